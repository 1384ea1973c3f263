// The FP4 -> f16 bit placement of the CUDA weight-streaming kernels (backend/cuda/fp4_bits.h),
// checked on the host for every code in every position of a word, against the reference decoding
// (core/dtype.h's e2m1 table).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

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

TEST(Fp4Bits, AWordsFourPairsAtOnceAreThePairsOneByOne) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  auto check = [](uint32_t v) {
    uint32_t pairs[4];
    cuda::f4_pairs_f16x2(v, pairs);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(pairs[i], cuda::f4_pair_f16x2(v, i)) << "pair " << i << " of word " << std::hex << v;
  };
  // Every code in every position (the others random), then random words.
  for (int n = 0; n < 8; ++n)
    for (uint32_t code = 0; code < 16; ++code)
      for (int trial = 0; trial < 16; ++trial) check((static_cast<uint32_t>(rng()) & ~(0xFu << (4 * n))) | (code << (4 * n)));
  for (int trial = 0; trial < 100000; ++trial) check(static_cast<uint32_t>(rng()));
  check(0u);
  check(0xFFFFFFFFu);
}

TEST(Fp4Bits, FourE8m0ScalesOfAWordAreEachByteDecoded) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (int b = 0; b < 4; ++b)
    for (uint32_t v = 0; v < 256; ++v)
      for (int trial = 0; trial < 8; ++trial) {
        const uint32_t w = (static_cast<uint32_t>(rng()) & ~(0xffu << (8 * b))) | (v << (8 * b));
        uint32_t bits[4];
        cuda::e8m0x4_bits(w, bits);
        for (int i = 0; i < 4; ++i) {
          const float want = e8m0_to_f32(static_cast<uint8_t>(w >> (8 * i)));
          float got;
          std::memcpy(&got, &bits[i], sizeof got);
          if (std::isnan(want))
            ASSERT_TRUE(std::isnan(got)) << "byte " << i << " of word " << std::hex << w;
          else
            ASSERT_EQ(got, want) << "byte " << i << " of word " << std::hex << w;
        }
      }
}

// mma.sync.m16n8k16 (f16 in, f32 out) from the 32 lanes' registers, by the PTX ISA's fragment
// layout: A regs (row g, k 2t..2t+1), (g + 8, 2t..), (g, 2t+8..), (g + 8, 2t+8..); B regs
// (k 2t..2t+1, column g), (k 2t+8.., g); D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1] per lane.
// Sums in double: the test compares the fragment layout, not the hardware's rounding.
struct LaneRegs {
  uint32_t a[4], b[2];
};
std::vector<double> emulate_mma(const LaneRegs (&lanes)[32]) {
  double A[16][16] = {}, B[16][8] = {};
  auto lo = [](uint32_t r) { return static_cast<double>(half_bits_to_float(static_cast<uint16_t>(r & 0xffff))); };
  auto hi = [](uint32_t r) { return static_cast<double>(half_bits_to_float(static_cast<uint16_t>(r >> 16))); };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const LaneRegs& L = lanes[lane];
    A[g][2 * t] = lo(L.a[0]), A[g][2 * t + 1] = hi(L.a[0]);
    A[g + 8][2 * t] = lo(L.a[1]), A[g + 8][2 * t + 1] = hi(L.a[1]);
    A[g][2 * t + 8] = lo(L.a[2]), A[g][2 * t + 9] = hi(L.a[2]);
    A[g + 8][2 * t + 8] = lo(L.a[3]), A[g + 8][2 * t + 9] = hi(L.a[3]);
    B[2 * t][g] = lo(L.b[0]), B[2 * t + 1][g] = hi(L.b[0]);
    B[2 * t + 8][g] = lo(L.b[1]), B[2 * t + 9][g] = hi(L.b[1]);
  }
  std::vector<double> D(16 * 8, 0.0);
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) D[static_cast<size_t>(i * 8 + n)] += A[i][k] * B[k][n];
  return D;
}

uint16_t float_to_half_bits_exact(float v) {  // for values with few significant bits in f16's normal range
  if (v == 0.0f) return std::signbit(v) ? 0x8000 : 0;
  int e = 0;
  const float m = std::frexp(std::fabs(v), &e);  // v = m 2^e, m in [0.5, 1)
  const auto man = static_cast<uint32_t>(std::ldexp(m, 11)) & 0x3ff;  // 1.xxx: drop the leading 1
  const auto exp = static_cast<uint32_t>(e - 1 + 15);
  return static_cast<uint16_t>((v < 0 ? 0x8000u : 0u) | (exp << 10) | man);
}

// One 32-column block of 16 FP4 rows times 8 x columns, as the tensor-core FP4 GEMV feeds its two
// MMAs (f4_pair_f16x2 words for A, x planes ordered by f4_mma_x_position for B): the sums must be
// 2^-14 times the block's exact dot products.
TEST(Fp4Bits, MmaFragmentsOfABlockGiveItsDotProducts) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (int trial = 0; trial < 50; ++trial) {
    uint8_t code[16][32];
    float x[8][32];
    for (auto& row : code)
      for (auto& c : row) c = static_cast<uint8_t>(rng() & 0xf);
    for (auto& col : x)
      for (auto& v : col) {  // at most 11 significant bits: exact in f16
        const int mantissa = static_cast<int>(rng() % 2047) - 1023, shift = static_cast<int>(rng() % 8);
        v = std::ldexp(static_cast<float>(mantissa), -shift);
      }
    // Row r's word t: codes 8t .. 8t + 7 (code n in bits 4n .. 4n + 3).
    auto word = [&](int r, int t) {
      uint32_t v = 0;
      for (int n = 0; n < 8; ++n) v |= static_cast<uint32_t>(code[r][8 * t + n]) << (4 * n);
      return v;
    };
    // Plane n (x column n of B), positions of the permuted 8-column groups.
    uint16_t plane[8][32];
    for (int n = 0; n < 8; ++n)
      for (int c = 0; c < 32; ++c)
        plane[n][(c & ~7) + cuda::f4_mma_x_position(c & 7)] = float_to_half_bits_exact(x[n][c]);
    std::vector<double> got(16 * 8, 0.0);
    for (int h = 0; h < 2; ++h) {
      LaneRegs lanes[32];
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        const uint32_t wg = word(g, t), wg8 = word(g + 8, t);
        lanes[lane].a[0] = cuda::f4_pair_f16x2(wg, 2 * h);
        lanes[lane].a[1] = cuda::f4_pair_f16x2(wg8, 2 * h);
        lanes[lane].a[2] = cuda::f4_pair_f16x2(wg, 2 * h + 1);
        lanes[lane].a[3] = cuda::f4_pair_f16x2(wg8, 2 * h + 1);
        // The lane's 16 bytes of plane g at column 8t: words 2h and 2h + 1 are MMA h's B fragments.
        const uint16_t* p = &plane[g][8 * t];
        lanes[lane].b[0] = static_cast<uint32_t>(p[4 * h]) | (static_cast<uint32_t>(p[4 * h + 1]) << 16);
        lanes[lane].b[1] = static_cast<uint32_t>(p[4 * h + 2]) | (static_cast<uint32_t>(p[4 * h + 3]) << 16);
      }
      const auto d = emulate_mma(lanes);
      for (size_t i = 0; i < got.size(); ++i) got[i] += d[i];
    }
    for (int i = 0; i < 16; ++i)
      for (int n = 0; n < 8; ++n) {
        double want = 0.0;
        for (int c = 0; c < 32; ++c) want += static_cast<double>(f4e2m1_to_f32(code[i][c])) * x[n][c];
        ASSERT_EQ(got[static_cast<size_t>(i * 8 + n)], std::ldexp(want, -14)) << "row " << i << " column " << n;
      }
  }
}

}  // namespace
}  // namespace deepinfer
