#pragma once
// Repetition, frequency and presence penalties (vLLM's definitions) over token counts that are
// kept incrementally: the prompt's distinct tokens once, then one update per generated token, so a
// step costs O(distinct tokens seen), never a recount of the sequence.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "sampling/sampling_params.h"

namespace deepinfer::sampling {

class TokenCounts {
 public:
  void add_prompt(std::span<const int32_t> prompt) { prompt_.insert(prompt.begin(), prompt.end()); }
  void add_output(int32_t token) { ++output_[token]; }

  const std::unordered_set<int32_t>& prompt() const { return prompt_; }
  const std::unordered_map<int32_t, int64_t>& output() const { return output_; }  // token -> count
  int64_t output_count(int32_t token) const {
    const auto it = output_.find(token);
    return it == output_.end() ? 0 : it->second;
  }

 private:
  std::unordered_set<int32_t> prompt_;
  std::unordered_map<int32_t, int64_t> output_;
};

// In place, vLLM's order: repetition over prompt + output tokens (positive logits divided,
// negative multiplied), then logit -= frequency * count + presence * (count > 0) over the output.
// Tokens at -inf stay there.
void apply_penalties(std::span<float> logits, const SamplingParams& params, const TokenCounts& counts);

}  // namespace deepinfer::sampling
