#pragma once
// The arithmetic of the token sampler, shared by the CPU reference (cpu/sample_rows.cpp) and the
// CUDA kernel so both draw the same token from the same logits, bit for bit:
// - weights p_i = sample_exp((x_i - max) / T) with an exp built from IEEE double + and * only
//   (no library exp, whose last bit differs between glibc and CUDA; no fused multiply-add: the
//   device side uses the _rn intrinsics, the host side is compiled with -ffp-contract=off);
// - every mass is a *chunked sum*: token i belongs to chunk i % kSampleChunks, each chunk is summed
//   in id order, and the chunk sums are added as a fixed binary tree. A GPU block computes exactly
//   that (thread t walks ids t, t + kSampleChunks, ...: coalesced loads; then a tree in shared
//   memory), and so does the CPU.
// - the draw descends that tree (go left when the target is below the left sum), then walks the
//   chosen chunk in id order.
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define DEEPINFER_SAMPLE_HD __host__ __device__ __forceinline__
#else
#define DEEPINFER_SAMPLE_HD inline
#endif

namespace deepinfer::backend::sample_math {

constexpr int kSampleChunks = 1024;  // leaves of the sum tree; a power of two

DEEPINFER_SAMPLE_HD int chunk_of(int64_t id) { return static_cast<int>(id & (kSampleChunks - 1)); }

DEEPINFER_SAMPLE_HD double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
DEEPINFER_SAMPLE_HD double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// exp(z) for z <= 0 (0 below -708): Cody-Waite reduction by ln 2 and a degree-13 Taylor
// polynomial on |r| <= 0.35 (truncation ~1e-18 relative), then an exact scale by 2^k.
DEEPINFER_SAMPLE_HD double sample_exp(double z) {
  if (!(z > -708.0)) return 0.0;
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // trailing zeros: k * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  double kd = dadd(dmul(z, kLog2e), 0.5);
  kd = static_cast<double>(static_cast<int64_t>(kd) - (kd < static_cast<double>(static_cast<int64_t>(kd)) ? 1 : 0));
  const double r = dadd(dadd(z, -dmul(kd, kLn2Hi)), -dmul(kd, kLn2Lo));
  constexpr double c[14] = {1.0,
                            1.0,
                            1.0 / 2,
                            1.0 / 6,
                            1.0 / 24,
                            1.0 / 120,
                            1.0 / 720,
                            1.0 / 5040,
                            1.0 / 40320,
                            1.0 / 362880,
                            1.0 / 3628800,
                            1.0 / 39916800,
                            1.0 / 479001600,
                            1.0 / 6227020800.0};
  double p = c[13];
  for (int i = 12; i >= 0; --i) p = dadd(dmul(p, r), c[i]);
  const int64_t k = static_cast<int64_t>(kd);  // in [-1022, 0] for z in (-708, 0]
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return dmul(p, scale);
}

// The weight of logit x under a row maximum m and 1/temperature.
DEEPINFER_SAMPLE_HD double sample_weight(float x, float m, double inv_temperature) {
  return sample_exp(dmul(dadd(static_cast<double>(x), -static_cast<double>(m)), inv_temperature));
}

// Orders floats as unsigned integers (larger float, larger key); -0 and +0 share a key, as they
// compare equal.
DEEPINFER_SAMPLE_HD uint32_t float_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

}  // namespace deepinfer::backend::sample_math
