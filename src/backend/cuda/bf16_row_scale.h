#pragma once
// Per-row powers of two that put a BF16 weight on f16 tensor-core operands exactly (tc_gemm.cu's
// kBF16H): host code, run once at upload (cuda_backend.cpp), tested on the host
// (tests/backend/bf16_row_scale_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace deepinfer::cuda {

// 2^k for each row of a [rows, cols] BF16 matrix (its bits), k = 14 - the row's largest exponent,
// so that the row's largest magnitude lands in [2^14, 2^15) and every value times 2^k is exact in
// f16: a bf16 value has 8 significant bits, so v 2^k with exponent e + k is exact while e + k >= -17
// (f16's subnormals end at 2^-24 = 2^(-17 - 7)), i.e. its biased exponent is at least the row's
// largest minus 31 (a bf16 subnormal counts as exponent 0: conservative). All-zero rows get 1.
// Empty where some row holds a value that would not be exact, an inf or a NaN, or needs k > 126.
inline std::vector<float> bf16_row_f16_scales(const uint16_t* bits, int64_t rows, int64_t cols) {
  std::vector<float> scales(static_cast<size_t>(rows), 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = bits + r * cols;
    int top = 0, bottom = 255;  // largest biased exponent, smallest of the nonzero values
    for (int64_t c = 0; c < cols; ++c) {
      const int mag = row[c] & 0x7fff, e = mag >> 7;
      top = std::max(top, e);
      bottom = std::min(bottom, mag != 0 ? e : 255);
    }
    if (top == 255) return {};    // an inf or a NaN
    if (bottom == 255) continue;  // all zeros
    const int k = 14 - (top - 127);
    if (bottom < top - 31 || k > 126) return {};
    scales[static_cast<size_t>(r)] = std::ldexp(1.0f, k);
  }
  return scales;
}

}  // namespace deepinfer::cuda
