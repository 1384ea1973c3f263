#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sampling/random.h"

namespace deepinfer::sampling {

namespace {
// NaN or +inf logits mean the model went wrong; sampling around them would hide the bug.
void check_logit(float value, size_t id) {
  if (std::isnan(value) || value == std::numeric_limits<float>::infinity())
    fail("logits contain {} at token id {}", value, id);
}
}  // namespace

int32_t argmax(std::span<const float> logits) {
  DEEPINFER_CHECK(!logits.empty(), "cannot pick a token from an empty logits row");
  int64_t best = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    if (logits[i] > best_value) {  // strict: the first (lowest) id wins ties
      best_value = logits[i];
      best = static_cast<int64_t>(i);
    }
  }
  DEEPINFER_CHECK(best >= 0, "every token has logit -inf (all tokens masked)");
  return static_cast<int32_t>(best);
}

double Sampler::filter(std::span<const float> logits, const SamplingParams& params) {
  params.validate();
  DEEPINFER_CHECK(!logits.empty(), "cannot pick a token from an empty logits row");
  candidates_.clear();
  const double inv_temperature = 1.0 / params.temperature;
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    if (logits[i] == -std::numeric_limits<float>::infinity()) continue;  // masked
    candidates_.push_back({static_cast<int32_t>(i), static_cast<double>(logits[i]) * inv_temperature});
  }
  DEEPINFER_CHECK(!candidates_.empty(), "every token has logit -inf (all tokens masked)");

  auto more_likely = [](const Candidate& a, const Candidate& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  };
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + params.top_k - 1, candidates_.end(), more_likely);
    candidates_.resize(static_cast<size_t>(params.top_k));
    std::sort(candidates_.begin(), candidates_.end(), more_likely);
  }

  double max_weight = -std::numeric_limits<double>::infinity();
  for (const auto& c : candidates_) max_weight = std::max(max_weight, c.weight);
  double sum = 0.0;
  for (auto& c : candidates_) {
    c.weight = std::exp(c.weight - max_weight);  // monotonic, so the order by weight is unchanged
    sum += c.weight;
  }
  if (params.min_p > 0.0) {
    // weight = p / p_max, so min_p compares directly; the top token (weight 1) always stays.
    // top_k keeps the top token, so applying min_p after it equals vLLM's min_p-then-top_k.
    std::erase_if(candidates_, [&](const Candidate& c) { return c.weight < params.min_p; });
    sum = 0.0;
    for (const auto& c : candidates_) sum += c.weight;
  }
  if (params.top_p < 1.0) {
    // Smallest most-likely prefix whose mass reaches top_p (at least one token). The nucleus is
    // usually tiny next to a 100K+ vocabulary, so sort only a growing head instead of everything.
    const double target = params.top_p * sum;
    for (size_t head = std::min<size_t>(candidates_.size(), 64);; head = std::min(candidates_.size(), head * 4)) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(head), candidates_.end(),
                        more_likely);
      double kept = 0.0;
      size_t count = 0;
      while (count < head && kept < target) kept += candidates_[count++].weight;
      if (kept >= target || head == candidates_.size()) {
        candidates_.resize(count);
        sum = kept;
        break;
      }
    }
  }
  return sum;
}

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& params, uint64_t step) {
  if (params.greedy()) {
    params.validate();
    return argmax(logits);
  }
  const double sum = filter(logits, params);
  const double target = counter_random_unit(params.seed, /*stream=*/0, step) * sum;
  double cumulative = 0.0;
  for (const auto& c : candidates_) {
    cumulative += c.weight;
    if (target < cumulative) return c.id;
  }
  return candidates_.back().id;  // rounding left target at the very top
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(std::span<const float> logits,
                                                              const SamplingParams& params) {
  if (params.greedy()) {
    params.validate();
    return {{argmax(logits), 1.0}};
  }
  const double sum = filter(logits, params);
  std::vector<std::pair<int32_t, double>> out;
  out.reserve(candidates_.size());
  for (const auto& c : candidates_) out.emplace_back(c.id, c.weight / sum);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

}  // namespace deepinfer::sampling
