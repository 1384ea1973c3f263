#include "sampling/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace deepinfer::sampling {

void SamplingParams::validate() const {
  DEEPINFER_CHECK(std::isfinite(temperature) && temperature >= 0.0,
                  "invalid sampling parameter: temperature must be a finite number >= 0 (0 = greedy), got {}",
                  temperature);
  DEEPINFER_CHECK(top_p > 0.0 && top_p <= 1.0, "invalid sampling parameter: top_p must be in (0, 1], got {}", top_p);
  DEEPINFER_CHECK(top_k >= 0, "invalid sampling parameter: top_k must be >= 0 (0 = off), got {}", top_k);
  DEEPINFER_CHECK(max_tokens >= 1, "invalid sampling parameter: max_tokens must be >= 1, got {}", max_tokens);
  for (int32_t id : stop_token_ids)
    DEEPINFER_CHECK(id >= 0, "invalid sampling parameter: stop token id {} is negative", id);
}

}  // namespace deepinfer::sampling
