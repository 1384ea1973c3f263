#pragma once
// The seed of a randomised test: DEEPINFER_TEST_SEED when set (to rerun a failure with the seed a
// failing run printed), else a fresh one. And the greedy pick the model tests compare.
#include <algorithm>
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

}  // namespace deepinfer::testing_util
