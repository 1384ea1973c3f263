// The per-row powers of two that put a BF16 weight on f16 tensor-core operands (kBF16H,
// backend/cuda/bf16_row_scale.h), checked on the host: every value of an accepted row times its
// scale is exact in f16 (a round trip through IEEE half bits), and the rows it must refuse are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/bf16_row_scale.h"

namespace deepinfer {
namespace {

uint16_t bf16_bits(float v) {  // (the test's values are bf16 already: truncation is exact)
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}
// Whether v is exactly an IEEE half (normal or subnormal, |v| <= 65504).
bool exact_in_f16(float v) {
  if (v == 0.0f) return true;
  const float a = std::fabs(v);
  if (a > 65504.0f) return false;
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  const int lsb = std::max(e - 11, -24);  // the half's unit in the last place at a's binade
  const float q = std::ldexp(a, -lsb);
  return q == std::floor(q);
}

TEST(Bf16RowScale, EveryValueOfARandomMatrixTimesItsRowScaleIsExactInF16) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const int64_t rows = 64, cols = 256;
  std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
  std::uniform_int_distribution<int> binade(-40, 40), below(0, 31), mantissa(0, 127);
  for (int64_t r = 0; r < rows; ++r) {
    // Each row its own magnitude, its values down to 31 binades below its top one (the most the
    // scales accept), every bf16 mantissa, both signs, some zeros.
    const int top = binade(rng);
    for (int64_t c = 0; c < cols; ++c) {
      float v = std::ldexp(1.0f + mantissa(rng) / 128.0f, top - below(rng)) * (rng() % 2 ? -1.0f : 1.0f);
      if (c % 17 == 3) v = 0.0f;
      w[static_cast<size_t>(r * cols + c)] = bf16_bits(v);
    }
  }
  const std::vector<float> s = deepinfer::cuda::bf16_row_f16_scales(w.data(), rows, cols);
  ASSERT_EQ(s.size(), static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int k = 0;
    ASSERT_EQ(std::frexp(s[r], &k), 0.5f) << "row " << r << ": not a power of two";
    float largest = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = bf16_value(w[static_cast<size_t>(r * cols + c)]) * s[r];
      ASSERT_TRUE(exact_in_f16(v)) << "row " << r << " column " << c << ": " << v;
      largest = std::max(largest, std::fabs(v));
    }
    EXPECT_GE(largest, 16384.0f) << "row " << r;  // the largest lands in [2^14, 2^15)
    EXPECT_LT(largest, 32768.0f) << "row " << r;
  }
}

TEST(Bf16RowScale, RefusesValuesThatWouldNotBeExactAndNonFiniteValues) {
  const int64_t cols = 8;
  std::vector<uint16_t> w(cols, bf16_bits(1.0f));
  EXPECT_EQ(deepinfer::cuda::bf16_row_f16_scales(w.data(), 1, cols).size(), 1u);
  // 2^-31 of the largest (biased exponent 31 below it) is still exact: 2^14 2^-31 = 2^-17, 8 bits.
  w[3] = bf16_bits(std::ldexp(1.0f, -31) * 1.9921875f);
  const std::vector<float> ok = deepinfer::cuda::bf16_row_f16_scales(w.data(), 1, cols);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_TRUE(exact_in_f16(bf16_value(w[3]) * ok[0]));
  w[3] = bf16_bits(std::ldexp(1.0f, -32) * 1.9921875f);  // one binade lower: its last bits fall off
  EXPECT_FALSE(exact_in_f16(bf16_value(w[3]) * std::ldexp(1.0f, 14)));
  EXPECT_TRUE(deepinfer::cuda::bf16_row_f16_scales(w.data(), 1, cols).empty());
  w[3] = bf16_bits(INFINITY);
  EXPECT_TRUE(deepinfer::cuda::bf16_row_f16_scales(w.data(), 1, cols).empty());
  w[3] = 0x7fc0;  // NaN
  EXPECT_TRUE(deepinfer::cuda::bf16_row_f16_scales(w.data(), 1, cols).empty());
  // A row of zeros (and a negative zero) scales by 1.
  const std::vector<uint16_t> zeros = {0, 0x8000, 0, 0};
  const std::vector<float> z = deepinfer::cuda::bf16_row_f16_scales(zeros.data(), 1, 4);
  ASSERT_EQ(z.size(), 1u);
  EXPECT_EQ(z[0], 1.0f);
}

}  // namespace
}  // namespace deepinfer
