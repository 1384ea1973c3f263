#pragma once
// Tensor-core and asynchronous-copy primitives shared by the decode GEMVs (nvcc only):
// decode_gemv_tc.cu (FP8) and moe_gemv_fp4.cu (FP4 routed experts).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda::mma {

// d += A B on mma.sync.m16n8k16 (f16 operands, f32 accumulators; fragments as the PTX ISA lays them
// out: fp4_bits.h and decode_gemv_tc.cu say which columns each lane holds).
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes from global to shared memory, asynchronously (zeros where !valid: src is not read).
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
// 4 bytes, the same way (src 4-byte aligned).
__device__ __forceinline__ void copy4_async(void* dst, const void* src) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void copies_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Until at most n of this thread's copy groups are pending.
template <int n>
__device__ __forceinline__ void copies_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n)); }

__device__ __forceinline__ uint32_t pack_f16(__half lo, __half hi) {
  return static_cast<uint32_t>(__half_as_ushort(lo)) | (static_cast<uint32_t>(__half_as_ushort(hi)) << 16);
}

// The decode GEMVs' x split. A block of x whose largest magnitude is m is scaled by 2^-e with
// m 2^-e in [2^14, 2^15) (f16 has 5 exponent bits; e clamped to [-110, 113] so that 2^e and 2^-e
// are normal floats; 0 for inf / NaN, which then reach the output as the reference's arithmetic
// would carry them, or as NaN). Returns e.
__device__ __forceinline__ int f16_block_exponent(float m) {
  const int biased = static_cast<int>((__float_as_uint(m) >> 23) & 0xffu);
  return biased == 0xff ? 0 : max(biased - 126 - 15, -110);
}
__device__ __forceinline__ float pow2f(int e) { return __uint_as_float(static_cast<uint32_t>(127 + e) << 23); }
// xs (already scaled) as three f16 parts hi + mid + lo: 33 significant bits, so they sum to xs as
// exactly as float32 holds it.
__device__ __forceinline__ void split3_f16(float xs, __half& hi, __half& mid, __half& lo) {
  hi = __float2half_rn(xs);
  const float r1 = xs - __half2float(hi);  // exact: the rounding error of hi
  mid = __float2half_rn(r1);
  lo = __float2half_rn(r1 - __half2float(mid));
}
// xs as two f16 parts hi + lo: 22 significant bits (a relative error of at most 2^-23 of xs, about
// one float32 rounding), for kernels that trade the third part's MMAs for more tokens per MMA.
__device__ __forceinline__ void split2_f16(float xs, __half& hi, __half& lo) {
  hi = __float2half_rn(xs);
  lo = __float2half_rn(xs - __half2float(hi));  // (the difference is exact)
}

// The decode GEMVs' epilogue: row rr (0..15) of warp tile tl for token tok, from every warp's
// accumulators red[(cg * warps + warp) * 32 + lane] = (C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1])
// of B column group cg, where B column kParts tok + p holds part p of the token's x: the ks split-K
// partials of each part in ascending order, then (hi + mid) + lo (two parts: hi + lo).
template <int kParts = 3>
__device__ __forceinline__ float tile_row_sum(const float4* red, int warps, int tl, int ks, int rr, int tok) {
  float v[3] = {0.f, 0.f, 0.f};
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
    const int col = kParts * tok + p, cg = col >> 3, c8 = col & 7;
    const int src = (rr & 7) * 4 + c8 / 2, i = (rr >= 8 ? 2 : 0) + (c8 & 1);
    for (int q = 0; q < ks; ++q) {
      const float4 f = red[(cg * warps + tl * ks + q) * 32 + src];
      const float e = i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w;
      v[p] = q == 0 ? e : v[p] + e;
    }
  }
  return kParts == 3 ? (v[0] + v[1]) + v[2] : v[0] + v[1];
}

}  // namespace deepinfer::cuda::mma
