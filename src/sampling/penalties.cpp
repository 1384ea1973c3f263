#include "sampling/penalties.h"

namespace deepinfer::sampling {

void apply_penalties(std::span<float> logits, const SamplingParams& params, const TokenCounts& counts) {
  const auto in_row = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < logits.size(); };
  if (params.repetition_penalty != 1.0) {
    const auto r = params.repetition_penalty;
    auto penalise = [&](int32_t t) {
      float& v = logits[static_cast<size_t>(t)];
      v = static_cast<float>(v > 0 ? v / r : v * r);
    };
    for (int32_t t : counts.prompt())
      if (in_row(t)) penalise(t);
    for (const auto& [t, count] : counts.output())
      if (in_row(t) && !counts.prompt().count(t)) penalise(t);  // each seen token once
  }
  if (params.frequency_penalty != 0.0 || params.presence_penalty != 0.0) {
    for (const auto& [t, count] : counts.output()) {
      if (!in_row(t) || count == 0) continue;
      float& v = logits[static_cast<size_t>(t)];
      v = static_cast<float>(v - params.frequency_penalty * static_cast<double>(count) - params.presence_penalty);
    }
  }
}

}  // namespace deepinfer::sampling
