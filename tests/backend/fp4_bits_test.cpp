// The FP4 -> f16 bit placement of the CUDA weight-streaming kernels (backend/cuda/fp4_bits.h),
// checked on the host for every code in every position of a word, against the reference decoding
// (core/dtype.h's e2m1 table).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "backend/cuda/fp4_bits.h"
#include "core/dtype.h"

namespace deepinfer {
namespace {

// IEEE half bits to float (normal, subnormal, signed zero; no inf / NaN can come from e2m1).
float half_bits_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  EXPECT_NE(exp, 0x1f) << "an e2m1 code became inf / NaN: bits " << h;
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -24) : std::ldexp(1.0f + man / 1024.0f, exp - 15);
  return sign ? -mag : mag;
}

TEST(Fp4Bits, EveryCodePairInEveryPositionIsTheValueTimesTwoToMinus14) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  int checked = 0;
  for (int i = 0; i < 4; ++i)
    for (uint32_t lo = 0; lo < 16; ++lo)
      for (uint32_t hi = 0; hi < 16; ++hi)
        for (int trial = 0; trial < 4; ++trial) {
          // The other six codes random: they must not leak into the pair.
          uint32_t v = static_cast<uint32_t>(rng());
          v &= ~((0xFu << (4 * i)) | (0xFu << (4 * (i + 4))));
          v |= (lo << (4 * i)) | (hi << (4 * (i + 4)));
          const uint32_t pair = cuda::f4_pair_f16x2(v, i);
          const float got_lo = half_bits_to_float(static_cast<uint16_t>(pair & 0xffff));
          const float got_hi = half_bits_to_float(static_cast<uint16_t>(pair >> 16));
          const float want_lo = f4e2m1_to_f32(static_cast<uint8_t>(lo));
          const float want_hi = f4e2m1_to_f32(static_cast<uint8_t>(hi));
          ASSERT_EQ(got_lo, std::ldexp(want_lo, -14)) << "i " << i << " code " << lo << " word " << std::hex << v;
          ASSERT_EQ(got_hi, std::ldexp(want_hi, -14)) << "i " << i << " code " << hi << " word " << std::hex << v;
          // Signed zeros keep their sign (code 8 is -0).
          ASSERT_EQ(std::signbit(got_lo), (lo & 8) != 0);
          ASSERT_EQ(std::signbit(got_hi), (hi & 8) != 0);
          ++checked;
        }
  EXPECT_EQ(checked, 4 * 16 * 16 * 4);
}

}  // namespace
}  // namespace deepinfer
