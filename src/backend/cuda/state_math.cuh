#pragma once
// Device helpers shared by the state-op kernels (attention_kernels.cu, v41_attention_kernels.cu):
// which sequence a step token belongs to, warp sums, -inf. nvcc only.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// The sequence holding step token t (the slices tile the tokens in order).
__device__ __forceinline__ int32_t seq_of_token(const DeviceSeq* seqs, int32_t nseq, int64_t t) {
  int32_t lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (seqs[mid].begin <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

// Nearest bfloat16 (ties to even) widened back, as core/dtype.h's round_to_bf16: NaN stays NaN.
__device__ __forceinline__ float round_bf16_f(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
  u += 0x7fffu + ((u >> 16) & 1u);
  return __uint_as_float((u >> 16) << 16);
}

}  // namespace deepinfer::cuda
