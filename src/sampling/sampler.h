#pragma once
// Picks the next token from a row of logits: greedy at temperature 0; otherwise temperature,
// top-k, min-p, then top-p (nucleus) filtering and one draw from the counter-based RNG keyed by
// (seed, step). The arithmetic is the backends' (backend/cpu/sample_rows.h), so a row sampled here
// and a row sampled on the GPU (Backend::sample) give the same token. Penalties, biases and masks
// are applied to the row before (sequence_sampler.h). The result depends only on
// (logits, params, step).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling_params.h"

namespace deepinfer::sampling {

// Index of the largest logit; ties go to the lowest id. Throws on NaN or +inf, or if no logit is
// above -infinity (every token masked).
int32_t argmax(std::span<const float> logits);

// The backend's description of params' draw for the token at `step` (its uniform number included).
backend::SampleRow sample_row(const SamplingParams& params, uint64_t step);

class Sampler {
 public:
  // `step` is the index of the token being generated within its sequence (0 for the first).
  // params must be valid (see SamplingParams::validate); it is checked again here.
  int32_t sample(std::span<const float> logits, const SamplingParams& params, uint64_t step);

  // The filtered, renormalised distribution sample() draws from: (id, probability) pairs in
  // descending probability (ties by id). For tests and logprob reporting.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits, const SamplingParams& params);
};

}  // namespace deepinfer::sampling
