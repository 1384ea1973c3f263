// The indexers' scoring core, a LANE per (token, entry) (V4: attention_kernels.cu, V4.1:
// v41_attention_kernels.cu): q of the token in shared memory, read as a broadcast (the same address
// in every lane: one load feeds 4 FMAs in 32 lanes), the lane's entry in registers kScoreChunk
// values at a time, a partial dot product per head of a group of kScoreHeads. No warp sums, and a
// fixed order of operations for each (token, entry), so batching changes no score. The first
// version (a warp per entry, lanes over head_dim, a warp sum a head) issued ~10 instructions per 4
// FMAs: 0.67 ms a layer at batch 128 on the H100 (docs/perf.md, session 23).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda::indexer_lanes {

constexpr int kScoreHeads = 16;  // heads of a group: its partial dot products' registers
constexpr int kScoreChunk = 32;  // values of an entry a lane holds at once

// q's row stride in shared memory: head_dim rounded up to the chunk, zero padded, so the FMA loops
// need no bounds.
__host__ __device__ constexpr int64_t q_stride(int64_t hd) { return (hd + kScoreChunk - 1) / kScoreChunk * kScoreChunk; }

// q [nh][hd] (global) into qs [nh][q_stride(hd)] by the whole block, 4 values a thread at a time
// with 8 loads in flight before their stores (at batch 1 a block's copy is on the step's critical
// path). The caller's barrier makes it visible.
__device__ inline void q_to_shared(const float* q, int64_t nh, int64_t hd, float* qs) {
  const int64_t qstride = q_stride(hd), quads = nh * qstride / 4;
  const bool vec = hd % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 16 == 0;
  for (int64_t base = 0; base < quads; base += 8 * static_cast<int64_t>(blockDim.x)) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t i = base + threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      const int64_t h = 4 * i / qstride, c = 4 * i % qstride;
      const float* src = q + h * hd + c;
      if (i >= quads || c >= hd) v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      else if (vec) v[u] = *reinterpret_cast<const float4*>(src);
      else v[u] = make_float4(src[0], c + 1 < hd ? src[1] : 0.0f, c + 2 < hd ? src[2] : 0.0f, c + 3 < hd ? src[3] : 0.0f);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t i = base + threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      if (i < quads) reinterpret_cast<float4*>(qs)[i] = v[u];
    }
  }
}

// d[h] = q[h0 + h] . k for the group's heads below nh (the others stay 0), each a float32 FMA chain
// over the values in order. k: the lane's entry (hd values). Loaded 16 bytes at a time where
// aligned: each lane reads its own entry's line, so a 4-byte load costs the L1 as many wavefronts
// as a 16-byte one.
__device__ inline void head_group_dots(const float* k, const float* qs, int64_t hd, int64_t h0, int64_t nh,
                                       float (&d)[kScoreHeads]) {
  const int64_t qstride = q_stride(hd);
  const bool k_vec = hd % 4 == 0 && reinterpret_cast<uintptr_t>(k) % 16 == 0;
#pragma unroll
  for (int h = 0; h < kScoreHeads; ++h) d[h] = 0.0f;
  for (int64_t c0 = 0; c0 < qstride; c0 += kScoreChunk) {
    float kr[kScoreChunk];
    if (k_vec) {
#pragma unroll
      for (int i = 0; i < kScoreChunk / 4; ++i) {
        // (hd % 4 == 0: a quad is all inside the entry or all past it)
        const float4 v =
            c0 + 4 * i < hd ? *reinterpret_cast<const float4*>(k + c0 + 4 * i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        kr[4 * i] = v.x, kr[4 * i + 1] = v.y, kr[4 * i + 2] = v.z, kr[4 * i + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kScoreChunk; ++i) kr[i] = c0 + i < hd ? k[c0 + i] : 0.0f;
    }
#pragma unroll
    for (int h = 0; h < kScoreHeads; ++h) {
      if (h0 + h >= nh) break;  // (uniform: the group's last heads)
      const float4* qh = reinterpret_cast<const float4*>(qs + (h0 + h) * qstride + c0);
#pragma unroll
      for (int i = 0; i < kScoreChunk / 4; ++i) {
        const float4 qv = qh[i];
        d[h] = fmaf(qv.x, kr[4 * i], d[h]);
        d[h] = fmaf(qv.y, kr[4 * i + 1], d[h]);
        d[h] = fmaf(qv.z, kr[4 * i + 2], d[h]);
        d[h] = fmaf(qv.w, kr[4 * i + 3], d[h]);
      }
    }
  }
}

// Warps of 32 entries a block for `tokens` rows of `stride` entries: up to max_warps, fewer while
// that leaves SMs idle (batch 1: a token's ~1,000 entries). Which entries share a block changes no bit.
inline int64_t entry_warps_for(int64_t tokens, int64_t stride, int64_t max_warps, int64_t sms) {
  int64_t ew = max_warps > 1 ? max_warps : 1;
  auto blocks = [&](int64_t w) { return tokens * ((stride + 32 * w - 1) / (32 * w)); };
  while (ew > 1 && blocks(ew) < 2 * sms) ew /= 2;
  return ew;
}

}  // namespace deepinfer::cuda::indexer_lanes
