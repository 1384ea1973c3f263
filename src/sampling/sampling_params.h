#pragma once
// What a request asks of the sampler and the generation loop. validate() rejects nonsense up front
// so a bad request fails with a clear message instead of producing odd tokens.
#include <cstdint>
#include <vector>

namespace deepinfer::sampling {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy (argmax, ties -> lowest id)
  double top_p = 1.0;        // nucleus mass kept, in (0, 1]; 1 = off
  int64_t top_k = 0;         // keep the k most likely tokens; 0 = off
  uint64_t seed = 0;         // same seed + same logits -> same tokens
  int64_t max_tokens = 64;   // generated tokens at most (stop tokens included)
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids
  bool ignore_eos = false;   // keep generating past EOS (benchmarks); stop_token_ids still apply

  // Throws deepinfer::Error naming the first invalid field.
  void validate() const;
  bool greedy() const { return temperature == 0.0 || top_k == 1; }
};

}  // namespace deepinfer::sampling
