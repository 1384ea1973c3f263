// CUDA kernels behind gemm_kernels.h: a tiled float32 GEMM over stored weights (weight_at()
// widening into shared memory), MoE routing (one thread per token) and the MoE expert pipeline.
// Straightforward first versions, checked against the CPU ops by test_backend_ops.
#include "backend/cuda/gemm_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kTR = kGemmTileOut;   // outputs per block
constexpr int kTT = kGemmTileRows;  // rows (tokens) per block
constexpr int kKC = 32;             // inner-dimension chunk staged in shared memory
constexpr int kThreads = 256;       // 32 output lanes x 8 row lanes; each thread 2 outputs x 4 rows
static_assert(kTR == 64 && kTT == 32 && kThreads == 256, "the thread mapping below assumes these");

__device__ __forceinline__ float silu_f(float x) { return x * (1.0f / (1.0f + expf(-x))); }

// One block's tile: outputs o0 .. o0+63 (< n_out; weight rows w_row0 + o) for rows [rb, re) of
// the row space; row r reads x[src(r) * ldx + c] (src = row_src[r], or r when row_src is null) and
// writes y[r * ldy + o]. Each output: one thread, fmaf over c = 0 .. K-1 in order.
// kSwiglu: two weights (gate wa, up wb) and y = silu(min(g, limit)) * clamp(u, -limit, limit).
template <bool kSwiglu>
__device__ __forceinline__ void gemm_tile(const DevMatrix& wa, const DevMatrix& wb, int64_t w_row0, int64_t o0,
                                          int64_t n_out, int64_t K, const float* __restrict__ x, int64_t ldx,
                                          const int32_t* __restrict__ row_src, int64_t rb, int64_t re,
                                          float* __restrict__ y, int64_t ldy, float limit) {
  __shared__ float ws[kTR][kKC + 1];
  __shared__ float ws2[kSwiglu ? kTR : 1][kKC + 1];
  __shared__ float xs[kTT][kKC];
  __shared__ int64_t src[kTT];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 32, ty = tid / 32;
  if (tid < kTT) {
    const int64_t r = rb + tid;
    src[tid] = r < re ? (row_src ? static_cast<int64_t>(row_src[r]) : r) : int64_t{-1};
  }
  __syncthreads();
  float acc[4][2], acc2[4][2];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int q = 0; q < 2; ++q) acc[j][q] = acc2[j][q] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int kc = static_cast<int>(K - k0 < kKC ? K - k0 : kKC);
    for (int i = tid; i < kTR * kKC; i += kThreads) {
      const int f = i / kKC, c = i % kKC;
      const int64_t o = o0 + f;
      const bool ok = o < n_out && c < kc;
      ws[f][c] = ok ? weight_at(wa, w_row0 + o, k0 + c) : 0.0f;
      if constexpr (kSwiglu) ws2[f][c] = ok ? weight_at(wb, w_row0 + o, k0 + c) : 0.0f;
    }
    for (int i = tid; i < kTT * kKC; i += kThreads) {
      const int j = i / kKC, c = i % kKC;
      const int64_t s = src[j];
      xs[j][c] = (s >= 0 && c < kc) ? x[s * ldx + k0 + c] : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < kc; ++c) {
      const float w0 = ws[tx][c], w1 = ws[tx + 32][c];
      float v0 = 0.0f, v1 = 0.0f;
      if constexpr (kSwiglu) {
        v0 = ws2[tx][c];
        v1 = ws2[tx + 32][c];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float xv = xs[ty + 8 * j][c];
        acc[j][0] = fmaf(xv, w0, acc[j][0]);
        acc[j][1] = fmaf(xv, w1, acc[j][1]);
        if constexpr (kSwiglu) {
          acc2[j][0] = fmaf(xv, v0, acc2[j][0]);
          acc2[j][1] = fmaf(xv, v1, acc2[j][1]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t r = rb + ty + 8 * j;
    if (r >= re) continue;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int64_t o = o0 + tx + 32 * q;
      if (o >= n_out) continue;
      float v = acc[j][q];
      if constexpr (kSwiglu) {
        const float g = limit < v ? limit : v;  // std::min(g, limit)
        const float a = acc2[j][q];
        const float u = a < -limit ? -limit : (limit < a ? limit : a);  // std::clamp(u, -limit, limit)
        v = silu_f(g) * u;
      }
      y[r * ldy + o] = v;
    }
  }
}

// grid (ceil(R / 64), ceil(T / 32), groups).
__global__ void __launch_bounds__(kThreads) linear_kernel(DevMatrix w, int64_t groups, const float* x, int64_t tokens,
                                                          float* y) {
  const int64_t R = w.rows / groups, C = w.cols, g = blockIdx.z;
  const int64_t rb = static_cast<int64_t>(blockIdx.y) * kTT;
  const int64_t re = rb + kTT < tokens ? rb + kTT : tokens;
  gemm_tile<false>(w, w, g * R, static_cast<int64_t>(blockIdx.x) * kTR, R, C, x + g * C, groups * C, nullptr, rb, re,
                   y + g * R, groups * R, 0.0f);
}

// grid (tiles, ceil(n_out / 64)). ldx = K, ldy = n_out.
template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads) moe_gemm_kernel(const DevMatrix* wa, const DevMatrix* wb,
                                                            const MoeTile* tiles, const int32_t* tile_count,
                                                            int64_t identity_rows, const int32_t* row_src,
                                                            const float* x, int64_t K, float* y, int64_t n_out,
                                                            float limit) {
  int e = 0;
  int64_t rb = 0, re = 0;
  if (tiles) {
    if (static_cast<int64_t>(blockIdx.x) >= static_cast<int64_t>(*tile_count)) return;  // whole block
    const MoeTile t = tiles[blockIdx.x];
    e = t.expert;
    rb = t.row_begin;
    re = t.row_end;
  } else {
    rb = static_cast<int64_t>(blockIdx.x) * kTT;
    re = rb + kTT < identity_rows ? rb + kTT : identity_rows;
  }
  const DevMatrix a = wa[e];
  const DevMatrix b = kSwiglu ? wb[e] : a;
  gemm_tile<kSwiglu>(a, b, 0, static_cast<int64_t>(blockIdx.y) * kTR, n_out, K, x, K, row_src, rb, re, y, n_out,
                     limit);
}

// ---------------------------------------------------------------- routing

// Top-k ties in this kernel go to the lower index; under TopKTies::Reference the host redoes the
// choice with cpu::torch_top_k_indices (ops_gemm.cpp).

// One thread per token (as the CPU op per token).
__global__ void moe_route_kernel(MoeRouteArgs a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.tokens) return;
  const int64_t E = a.experts, K = a.top_k;
  float* s = a.logits + t * E;
  switch (a.scoring) {
    case 0:
      for (int64_t j = 0; j < E; ++j) {
        const float v = s[j];
        s[j] = sqrtf(v > 20.0f ? v : log1pf(expf(v)));  // torch softplus threshold
      }
      break;
    case 1:
      for (int64_t j = 0; j < E; ++j) s[j] = sigmoid_f(s[j]);
      break;
    default: {
      float m = -INFINITY;
      for (int64_t j = 0; j < E; ++j) m = m < s[j] ? s[j] : m;  // std::max(m, x)
      if (m == -INFINITY) {
        for (int64_t j = 0; j < E; ++j) s[j] = 0.0f;
        break;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < E; ++j) {
        s[j] = expf(s[j] - m);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < E; ++j) s[j] *= inv;
      break;
    }
  }
  int32_t* ex = a.out_experts + t * K;
  if (a.hash_experts) {
    const int32_t* row = a.hash_experts + t * K;  // gathered and checked on the host
    for (int64_t k = 0; k < K; ++k) ex[k] = row[k];
  } else {
    // K passes, each the best entry ranked below the previous pick in the order
    // (value descending, index ascending), i.e. cpu::top_k_indices' ranking.
    float prev_v = 0.0f;
    int64_t prev_i = -1;
    for (int64_t k = 0; k < K; ++k) {
      int64_t best_i = -1;
      float best_v = 0.0f;
      for (int64_t j = 0; j < E; ++j) {
        const float v = s[j] + (a.bias ? a.bias[j] : 0.0f);
        const bool below = prev_i < 0 || v < prev_v || (v == prev_v && j > prev_i);
        if (below && (best_i < 0 || v > best_v)) {
          best_i = j;
          best_v = v;
        }
      }
      if (best_i < 0) best_i = 0;  // only with NaN scores (no strict order): keep the index valid
      ex[k] = static_cast<int32_t>(best_i);
      prev_i = best_i;
      prev_v = best_v;
    }
  }
  float sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) sum += s[ex[k]];
  const float norm = a.norm_topk_prob ? a.routed_scaling_factor / (sum + 1e-20f) : a.routed_scaling_factor;
  for (int64_t k = 0; k < K; ++k) a.out_weights[t * K + k] = s[ex[k]] * norm;
}

// ---------------------------------------------------------------- MoE plan / combine

__global__ void moe_count_kernel(const int32_t* experts, int64_t routed, int64_t E, int32_t* counts, int32_t* pos) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= routed) return;
  const int32_t e = experts[i];
  // Ranks within an expert follow atomic order: a row's arithmetic does not depend on its place.
  pos[i] = (e >= 0 && e < E) ? atomicAdd(counts + e, 1) : -1;
}

__global__ void moe_plan_kernel(const int32_t* counts, int64_t E, int32_t* offsets, MoeTile* tiles,
                                int32_t* tile_count) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int32_t off = 0, n = 0;
  for (int64_t e = 0; e < E; ++e) {
    offsets[e] = off;
    const int32_t c = counts[e];
    for (int32_t r = 0; r < c; r += kTT) tiles[n++] = {static_cast<int32_t>(e), off + r, off + (c < r + kTT ? c : r + kTT), 0};
    off += c;
  }
  offsets[E] = off;
  *tile_count = n;
}

__global__ void moe_assign_kernel(const int32_t* experts, const int32_t* pos, const int32_t* offsets, int64_t routed,
                                  int64_t K, int32_t* row_of, int32_t* row_token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= routed) return;
  const int32_t p = pos[i];
  if (p < 0) {
    row_of[i] = -1;
    return;
  }
  const int32_t row = offsets[experts[i]] + p;
  row_of[i] = row;
  row_token[row] = static_cast<int32_t>(i / K);
}

// One block per token; each thread some d. Experts added in ascending id (ties: ascending k).
__global__ void moe_combine_kernel(float* out, const float* ye, const int32_t* experts, const float* weights,
                                   const int32_t* row_of, int64_t K, int64_t D) {
  const int64_t t = blockIdx.x;
  const int32_t* ex = experts + t * K;
  const int32_t* rows = row_of + t * K;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float v = out[t * D + d];
    int32_t prev_e = -1;
    int64_t prev_k = -1;
    for (int64_t n = 0; n < K; ++n) {
      int32_t best_e = 0;
      int64_t best_k = -1;
      for (int64_t k = 0; k < K; ++k) {
        if (rows[k] < 0) continue;
        const int32_t e = ex[k];
        const bool after = e > prev_e || (e == prev_e && k > prev_k);
        if (after && (best_k < 0 || e < best_e)) {  // k ascending: the first of equal ids wins
          best_e = e;
          best_k = k;
        }
      }
      if (best_k < 0) break;
      v += weights[t * K + best_k] * ye[static_cast<int64_t>(rows[best_k]) * D + d];
      prev_e = best_e;
      prev_k = best_k;
    }
    out[t * D + d] = v;
  }
}

__global__ void zero_kernel(float* dst, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = 0.0f;
}

unsigned tiles_of(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

}  // namespace

void launch_linear(const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y) {
  const int64_t R = w.rows / groups;
  if (tokens <= 0 || R <= 0) return;
  const dim3 grid(tiles_of(R, kTR), tiles_of(tokens, kTT), static_cast<unsigned>(groups));
  linear_kernel<<<grid, kThreads>>>(w, groups, x, tokens, y);
}


void launch_moe_route(const MoeRouteArgs& a) {
  if (a.tokens <= 0) return;
  constexpr int threads = 128;
  moe_route_kernel<<<blocks_for(a.tokens, threads), threads>>>(a);
}

void launch_moe_plan(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts, const MoeIndex& ix) {
  const int64_t routed = tokens * top_k;
  if (routed <= 0) return;
  constexpr int threads = 256;
  cudaMemsetAsync(ix.counts, 0, static_cast<size_t>(num_experts) * sizeof(int32_t), 0);
  moe_count_kernel<<<blocks_for(routed, threads), threads>>>(experts, routed, num_experts, ix.counts, ix.pos);
  moe_plan_kernel<<<1, 1>>>(ix.counts, num_experts, ix.offsets, ix.tiles, ix.tile_count);
  moe_assign_kernel<<<blocks_for(routed, threads), threads>>>(experts, ix.pos, ix.offsets, routed, top_k, ix.row_of,
                                                              ix.row_token);
}

void launch_moe_gate_up(const DevMatrix* w1s, const DevMatrix* w3s, const MoeTile* tiles, const int32_t* tile_count,
                        int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src, const float* x, int64_t D,
                        int64_t I, float limit, float* h) {
  if (grid_tiles <= 0 || I <= 0) return;
  const dim3 grid(static_cast<unsigned>(grid_tiles), tiles_of(I, kTR));
  moe_gemm_kernel<true><<<grid, kThreads>>>(w1s, w3s, tiles, tile_count, identity_rows, row_src, x, D, h, I, limit);
}

void launch_moe_down(const DevMatrix* w2s, const MoeTile* tiles, const int32_t* tile_count, int64_t grid_tiles,
                     int64_t identity_rows, const float* h, int64_t I, int64_t D, float* y) {
  if (grid_tiles <= 0 || D <= 0) return;
  const dim3 grid(static_cast<unsigned>(grid_tiles), tiles_of(D, kTR));
  moe_gemm_kernel<false><<<grid, kThreads>>>(w2s, w2s, tiles, tile_count, identity_rows, nullptr, h, I, y, D, 0.0f);
}

void launch_moe_combine(float* out, const float* ye, const int32_t* experts, const float* weights,
                        const int32_t* row_of, int64_t tokens, int64_t top_k, int64_t D) {
  if (tokens <= 0 || top_k <= 0 || D <= 0) return;
  const int threads = D >= 256 ? 256 : 64;
  moe_combine_kernel<<<static_cast<unsigned>(tokens), threads>>>(out, ye, experts, weights, row_of, top_k, D);
}

void launch_zero(float* dst, int64_t n) {
  if (n <= 0) return;
  zero_kernel<<<blocks_for(n, 256), 256>>>(dst, n);
}

}  // namespace deepinfer::cuda
