#pragma once
// Device helpers for the kernels (nvcc only): widening of the stored weight formats (the same
// decodings as core/dtype.h) and launch arithmetic.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/fp4_bits.h"

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

inline int blocks_for(int64_t n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// OCP FP8 E4M3 ("fn": no infinities, 0x7f / 0xff are NaN).
__device__ __forceinline__ float f8e4m3_to_f32(uint8_t v) {
  const int exp = (v >> 3) & 0xf, man = v & 0x7;
  if (exp == 0xf && man == 0x7) return nan_f32();
  const float mag = exp == 0 ? ldexpf(static_cast<float>(man), -9) : ldexpf(1.0f + man / 8.0f, exp - 7);
  return (v & 0x80) ? -mag : mag;
}

__device__ __forceinline__ float e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return nan_f32();
  if (v == 0) return __uint_as_float(0x00400000u);
  return __uint_as_float(static_cast<uint32_t>(v) << 23);
}

// The four E8M0 scales of word w (byte b: block b), as e8m0_to_f32 gives each (fp4_bits.h).
__device__ __forceinline__ void e8m0x4_to_f32(uint32_t w, float (&s)[4]) {
  uint32_t bits[4];
  e8m0x4_bits(w, bits);
#pragma unroll
  for (int b = 0; b < 4; ++b) s[b] = __uint_as_float(bits[b]);
}

__device__ __forceinline__ float f4e2m1_to_f32(uint8_t code) {
  const uint32_t m = code & 0x7;
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6
  const float v = m < 4 ? 0.5f * static_cast<float>(m) : static_cast<float>(1u << ((m >> 1) - 1)) * (m & 1 ? 1.5f : 1.0f);
  return (code & 0x8) ? -v : v;
}

// Element (r, c) of a stored weight widened to float32 with its block scale applied.
__device__ __forceinline__ float weight_at(const DevMatrix& w, int64_t r, int64_t c) {
  constexpr int kF32 = 0, kF16 = 1, kBF16 = 2, kF8 = 3, kE8M0 = 4, kF4 = 5;
  switch (w.dtype) {
    case kF32:
      return reinterpret_cast<const float*>(w.data)[r * w.cols + c];
    case kF16:
      return f16_bits_to_f32(reinterpret_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case kBF16:
      return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case kF8: {
      const float v = f8e4m3_to_f32(w.data[r * w.cols + c]);
      if (!w.scale) return v;
      const int64_t i = (r / w.block_rows) * w.scale_cols + c / w.block_cols;
      const float s = w.scale_dtype == kE8M0 ? e8m0_to_f32(w.scale[i]) : reinterpret_cast<const float*>(w.scale)[i];
      return v * s;
    }
    case kF4: {
      const uint8_t byte = w.data[r * (w.cols / 2) + c / 2];
      const float v = f4e2m1_to_f32((c & 1) ? (byte >> 4) : (byte & 0xf));
      return v * e8m0_to_f32(w.scale[r * w.scale_cols + c / 32]);
    }
  }
  return nan_f32();
}

// cos / sin of rotary pair i at `position` (as rope_angles on the CPU).
__device__ __forceinline__ void rope_angle(const DevRope& r, int64_t i, int64_t position, float* cos_out,
                                           float* sin_out) {
  const float a = r.inv_freq[i] * static_cast<float>(position);
  *cos_out = cosf(a) * r.attention_factor;
  *sin_out = sinf(a) * r.attention_factor;
}

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace deepinfer::cuda
