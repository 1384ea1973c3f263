// Scalar widening of the stored element types against their defining formulas.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace deepinfer {
namespace {

// OCP FP8 E4M3 "fn" by definition: (-1)^s * 2^(e-7) * (1 + m/8), subnormals 2^-6 * m/8, S.1111.111 NaN.
double e4m3_formula(uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 0xf, m = v & 0x7;
  if (e == 0xf && m == 0x7) return std::nan("");
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -magnitude : magnitude;
}

TEST(DType, F8E4M3TableMatchesFormulaForAll256Codes) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const double want = e4m3_formula(code);
    const float got = f8e4m3_to_f32(code);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << c << " must be NaN, got " << got;
      ++nan_codes;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << "code 0x" << std::hex << c;
    EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code 0x" << std::hex << c;  // -0 stays -0
  }
  EXPECT_EQ(nan_codes, 2);  // 0x7f and 0xff
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
}

TEST(DType, E8M0IsAPowerOfTwo) {
  for (int c = 0; c < 255; ++c)
    EXPECT_EQ(static_cast<double>(e8m0_to_f32(static_cast<uint8_t>(c))), std::ldexp(1.0, c - 127)) << c;
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xff)));
}

TEST(DType, F4E2M1Values) {
  const double magnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const double want = (c & 8) ? -magnitudes[c & 7] : magnitudes[c & 7];
    EXPECT_EQ(static_cast<double>(f4e2m1_to_f32(static_cast<uint8_t>(c))), want) << c;
  }
}

// f16 by definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024; e=31 is Inf/NaN.
TEST(DType, F16MatchesFormulaForAllCodes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int s = static_cast<int>(h >> 15), e = static_cast<int>((h >> 10) & 0x1f), m = static_cast<int>(h & 0x3ff);
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (e == 31) {
      EXPECT_EQ(std::isnan(got), m != 0) << h;
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << h;
      }
      continue;
    }
    const double magnitude = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15);
    ASSERT_EQ(static_cast<double>(got), s ? -magnitude : magnitude) << h;
  }
}

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie to even (up)
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace deepinfer
