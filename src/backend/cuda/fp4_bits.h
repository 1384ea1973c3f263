#pragma once
// FP4 (e2m1) codes widened by bit placement, shared by the CUDA kernels and a host test that checks
// every code (tests/backend/fp4_bits_test.cpp). No CUDA headers: plain integer arithmetic.
//
// An f16 with the code's bits eem at bits 9-11 (exponent bits 10-11, top mantissa bit 9) and its
// sign at bit 15 is the e2m1 value times 2^-14, exactly, for all 16 codes: exponent e > 0 gives
// 2^(e - 15) (1 + m / 2) = 2^-14 * 2^(e - 1) (1 + m / 2), and e = 0 gives f16's subnormal
// 2^-14 * m / 2 = 2^-14 * (m * 0.5). So two codes become an f16x2 in four integer operations.
#include <cstdint>

#ifdef __CUDACC__
#define DEEPINFER_FP4_HD __host__ __device__ __forceinline__
#else
#define DEEPINFER_FP4_HD inline
#endif

namespace deepinfer::cuda {

DEEPINFER_FP4_HD uint32_t shift_bits(uint32_t v, int n) { return n >= 0 ? v << n : v >> -n; }

// Codes i and i + 4 (i in 0..3) of word v (code n in bits 4n .. 4n + 3, as the weights store them)
// as an f16x2 of value * 2^-14: code i in the low half, code i + 4 in the high half.
DEEPINFER_FP4_HD uint32_t f4_pair_f16x2(uint32_t v, int i) {
  return (shift_bits(v, 9 - 4 * i) & 0x0E000E00u) | (shift_bits(v, 12 - 4 * i) & 0x80008000u);
}

// Bytes of (x, y) picked by the four selector nibbles of s (PRMT's default mode: 0-3 bytes of x,
// 4-7 of y), the host's stand-in for __byte_perm.
DEEPINFER_FP4_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t xy = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((xy >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
#endif
}

// All four pairs of word v, as f4_pair_f16x2(v, 0..3) gives them, in 10 integer operations rather
// than 16: an e2m1 value times 2^-14 has only high-byte bits in f16 (sign 15, eem 9-11), so the
// even codes' high bytes are formed in one word and the odd codes' in another (a byte each), and
// each pair is two of those bytes with zero low bytes. The FP4 GEMV decodes 64 codes a lane a
// step, which made its decode most of its issued instructions (docs/perf.md, session 23).
DEEPINFER_FP4_HD void f4_pairs_f16x2(uint32_t v, uint32_t (&pair)[4]) {
  const uint32_t sign = v & 0x88888888u;
  const uint32_t even = ((v << 1) & 0x0E0E0E0Eu) | ((sign << 4) & 0x80808080u);  // byte b: code 2b's high byte
  const uint32_t odd = ((v >> 3) & 0x0E0E0E0Eu) | (sign & 0x80808080u);           // code 2b + 1's
  pair[0] = byte_perm(even, 0u, 0x2404u);  // (0, code 0, 0, code 4): bytes 0 and 2 of even, high halves
  pair[1] = byte_perm(odd, 0u, 0x2404u);   // codes 1, 5
  pair[2] = even & 0xFF00FF00u;            // codes 2, 6 (bytes 1 and 3 already in place)
  pair[3] = odd & 0xFF00FF00u;             // codes 3, 7
}

// The float32 bits of the four E8M0 scales of word w (byte b: block b), as e8m0_to_f32 gives each:
// 2^(e - 127), 0's 2^-127 (a subnormal: the largest of the shifted field and 0x00400000) and 255's
// NaN (a test a word, rare). Three operations a scale where a byte at a time took about six.
DEEPINFER_FP4_HD void e8m0x4_bits(uint32_t w, uint32_t (&bits)[4]) {
  const uint32_t e[4] = {(w << 23) & 0x7F800000u, (w << 15) & 0x7F800000u, (w << 7) & 0x7F800000u,
                         (w >> 1) & 0x7F800000u};
  for (int b = 0; b < 4; ++b) bits[b] = e[b] > 0x00400000u ? e[b] : 0x00400000u;
  if (((w & 0x7F7F7F7Fu) + 0x01010101u) & w & 0x80808080u)  // a byte is 255
    for (int b = 0; b < 4; ++b)
      if (((w >> (8 * b)) & 0xffu) == 0xffu) bits[b] = 0x7fc00000u;
}

// The tensor-core FP4 GEMV (moe_gemv_fp4.cu) on mma.m16n8k16 (A: 16 weight rows, B: 8 x columns):
// lane (g, t) = (lane / 4, lane % 4) takes word t of a 32-column block (one E8M0 scale) of rows g
// and g + 8, and MMA h (0, 1) of the block takes its pairs 2h and 2h + 1, so fragment slots
// (2t, 2t + 1) hold columns 8t + 2h + {0, 4} and slots (2t + 8, 2t + 9) columns 8t + 2h + {1, 5}.
// Both MMAs of a block stay inside its 32 columns, so each block's sums can take its scale. The x
// planes hold each 8 columns in the order 0, 4, 1, 5, 2, 6, 3, 7, so a lane's 16 bytes at column 8t
// are its B fragments of both MMAs. Position of column c (0..7) of an 8-column group:
DEEPINFER_FP4_HD int f4_mma_x_position(int c) { return c < 4 ? 2 * c : 2 * (c - 4) + 1; }

}  // namespace deepinfer::cuda
