#pragma once
// The seed of a randomised test: DEEPINFER_TEST_SEED when set (to rerun a failure with the seed a
// failing run printed), else a fresh one. And the greedy pick the model tests compare.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>

namespace deepinfer::testing_util {

inline uint32_t test_seed() {
  if (const char* s = std::getenv("DEEPINFER_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

// Index of the largest value (the first of equals).
inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Whether b is within GEMM rounding of a: max |a - b| <= 1e-3 (1 + max |a|); a NaN never is.
inline bool within_gemm_rounding(std::span<const float> a, std::span<const float> b, double* max_diff = nullptr) {
  double diff = a.size() == b.size() ? 0.0 : INFINITY, range = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    range = std::max(range, std::fabs(static_cast<double>(a[i])));
  }
  if (max_diff) *max_diff = diff;
  return diff <= 1e-3 * (1.0 + range);
}

}  // namespace deepinfer::testing_util
