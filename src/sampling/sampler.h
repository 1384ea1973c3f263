#pragma once
// Picks the next token from a row of logits. Greedy at temperature 0; otherwise softmax with
// temperature, then min-p, top-k, then top-p (nucleus) filtering, then one draw from the
// counter-based RNG keyed by (seed, step). Penalties, biases and masks are applied to the row
// before (sequence_sampler.h). The sampler keeps only scratch memory, so one instance can serve any
// number of sequences and the result depends only on (logits, params, step).
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace deepinfer::sampling {

// Index of the largest logit; ties go to the lowest id, NaN never wins. Throws if no logit is
// above -infinity (every token masked).
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  // `step` is the index of the token being generated within its sequence (0 for the first).
  // params must be valid (see SamplingParams::validate); it is checked again here.
  int32_t sample(std::span<const float> logits, const SamplingParams& params, uint64_t step);

  // The filtered, renormalised distribution sample() draws from: (id, probability) pairs in
  // descending probability (ties by id). Exposed for tests and for logprob reporting later.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits, const SamplingParams& params);

 private:
  struct Candidate {
    int32_t id;
    double weight;  // logit / temperature, then exp(. - max)
  };
  // Fills candidates_ with the tokens that survive top-k / top-p, weights unnormalised; returns
  // their weight sum.
  double filter(std::span<const float> logits, const SamplingParams& params);

  std::vector<Candidate> candidates_;
};

}  // namespace deepinfer::sampling
