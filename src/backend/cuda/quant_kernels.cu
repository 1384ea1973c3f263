// The DeepSeek-V4.1 activation fake-quantisations, one thread per group; the same float32
// arithmetic as the CPU reference (cpu/quant_ops.cpp): power-of-two scales from the exponent bits,
// round to nearest even with saturation. Plain division (no fast math), so results match exactly.
#include <cmath>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/quant_kernels.h"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

// 2^ceil(log2(y)) for a positive normal float: its exponent, plus one when a mantissa bit is set.
__device__ __forceinline__ float pow2_ceil(float y) {
  const uint32_t bits = __float_as_uint(y);
  const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return __uint_as_float(static_cast<uint32_t>(exponent) << 23);
}

// The nearest code of a small float format (mantissa bits, lowest binade), saturating at max.
__device__ __forceinline__ float round_to_format(float x, int mantissa_bits, int min_exponent, float max) {
  if (isnan(x)) return x;
  const float a = fminf(fabsf(x), max);
  if (a == 0.0f) return copysignf(0.0f, x);
  int e;
  frexpf(a, &e);  // a in [2^(e-1), 2^e)
  const int binade = e - 1 > min_exponent ? e - 1 : min_exponent;
  const float step = ldexpf(1.0f, binade - mantissa_bits);
  const float r = fminf(rintf(a / step) * step, max);  // rintf: to nearest even
  return copysignf(r, x);
}

__device__ __forceinline__ float to_e4m3(float x) { return round_to_format(x, 3, -6, 448.0f); }
__device__ __forceinline__ float to_e2m1(float x) { return round_to_format(x, 1, 0, 6.0f); }

__global__ void quantize_dequantize_kernel(float* x, int64_t groups, int format) {
  wait_for_previous_kernel();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int n = format == 2 ? 16 : 32;
  float* v = x + g * n;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(v[i]));
  if (format == 0) {
    const float scale = pow2_ceil(fmaxf(amax, 1e-4f) * (1.0f / 448.0f));
    for (int i = 0; i < n; ++i) v[i] = to_e4m3(v[i] / scale) * scale;
    return;
  }
  const float scale = format == 1 ? pow2_ceil(fmaxf(amax, 6.0f * 0x1p-126f) * (1.0f / 6.0f))
                                  : to_e4m3(fmaxf(amax, 6.0f * 0x1p-9f) / 6.0f);
  for (int i = 0; i < n; ++i) v[i] = to_e2m1(fminf(fmaxf(v[i] / scale, -6.0f), 6.0f)) * scale;
}

}  // namespace

void launch_quantize_dequantize(float* x, int64_t groups, int format) {
  if (groups <= 0) return;
  launch(quantize_dequantize_kernel, blocks_for(groups, 128), 128, 0, x, groups, format);
}

}  // namespace deepinfer::cuda
