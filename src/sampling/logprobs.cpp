#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace deepinfer::sampling {

double log_normalizer(std::span<const float> row) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float max_value = kNegInf;
  for (float v : row) max_value = std::max(max_value, v);
  if (max_value == kNegInf) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max_value);
  return max_value + std::log(sum);
}

TokenLogprob token_logprob(std::span<const float> row, int32_t token, int64_t top_n) {
  DEEPINFER_CHECK(token >= 0 && static_cast<size_t>(token) < row.size(), "logprob of token {} from a row of {}", token,
                  row.size());
  const double lse = log_normalizer(row);
  const float value = row[static_cast<size_t>(token)];
  TokenLogprob out;
  out.token_id = token;
  out.logprob = static_cast<float>(value - lse);
  out.rank = 1;
  for (float v : row) out.rank += v > value;

  // Keep the best top_n in a small sorted array: few entries ever beat the current last one.
  auto before = [&](int32_t a, int32_t b) {
    const float va = row[static_cast<size_t>(a)], vb = row[static_cast<size_t>(b)];
    return va != vb ? va > vb : a < b;
  };
  std::vector<int32_t> best;
  const auto limit = static_cast<size_t>(std::max<int64_t>(top_n, 0));
  if (limit > 0) {
    best.reserve(limit + 1);
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] == -std::numeric_limits<float>::infinity()) continue;
      const auto id = static_cast<int32_t>(i);
      if (best.size() == limit && !before(id, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
      if (best.size() > limit) best.pop_back();
    }
  }
  out.top.reserve(best.size());
  for (int32_t id : best) out.top.push_back({id, static_cast<float>(row[static_cast<size_t>(id)] - lse)});
  return out;
}

}  // namespace deepinfer::sampling
