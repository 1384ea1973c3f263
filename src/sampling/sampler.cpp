#include "sampling/sampler.h"

#include <algorithm>

#include "backend/cpu/sample_rows.h"
#include "sampling/random.h"

namespace deepinfer::sampling {

int32_t argmax(std::span<const float> logits) { return cpu::argmax_row(logits); }

backend::SampleRow sample_row(const SamplingParams& params, uint64_t step) {
  backend::SampleRow row;
  row.temperature = params.greedy() ? 0.0 : params.temperature;
  row.top_k = params.top_k;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  if (!params.greedy()) row.uniform = counter_random_unit(params.seed, /*stream=*/0, step);
  return row;
}

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& params, uint64_t step) {
  params.validate();
  return cpu::sample_row(logits, sample_row(params, step));
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(std::span<const float> logits,
                                                              const SamplingParams& params) {
  params.validate();
  if (params.greedy()) return {{argmax(logits), 1.0}};
  const auto c = cpu::sample_candidates(logits, sample_row(params, 0));
  const double mass = cpu::chunked_mass(c);
  std::vector<std::pair<int32_t, double>> out;
  out.reserve(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) out.emplace_back(c.ids[i], c.weights[i] / mass);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

}  // namespace deepinfer::sampling
