// CUDA kernels behind gemm_kernels.h: linear and the MoE expert GEMMs over stored weights (the
// weight-streaming tile of skinny_gemm.cuh), MoE routing (one warp per token) and the MoE plan /
// combine. Checked against the CPU ops by test_backend_ops.
#include "backend/cuda/gemm_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "core/dtype.h"
#include "backend/cuda/skinny_gemm.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kTT = kGemmTileRows;  // routed rows per MoE tile: one CTA pass
static_assert(kTT == skinny::kRows, "an MoE tile is one pass of the skinny tile");

using skinny::Job;

// Job (group g, column tile ct, rows [rb, re)) of linear / grouped_linear.
__device__ __forceinline__ Job linear_job(const DevMatrix& w, int64_t groups, const float* x, float* y, int ks,
                                          bool x_vec, int64_t g, int64_t ct, int64_t rb, int64_t re) {
  const int64_t R = w.rows / groups, C = w.cols;
  Job j;
  j.wa = j.wb = w;
  j.w_row0 = g * R;
  j.o0 = ct * skinny::outs_per_cta(false, ks);
  j.n_out = R;
  j.K = C;
  j.x = x + g * C;
  j.ldx = groups * C;
  j.row_src = nullptr;
  j.rb = rb;
  j.re = re;
  j.y = y + g * R;
  j.ldy = groups * R;
  j.limit = 0.0f;
  j.ks = ks;
  j.x_vec = x_vec;
  return j;
}

// grid (ceil(tokens / 8) * column tiles, 1, groups); block b: row chunk b % nm, column tile b / nm
// (the row chunks of one weight tile run next to each other and share it in L2).
// kMaxRows: skinny::run's row templates (2 when no chunk has more than 2 rows).
template <int F, int kMaxRows>
__global__ void __launch_bounds__(skinny::kThreads, 2)
    linear_kernel(DevMatrix w, int64_t groups, const float* x, int64_t tokens, float* y, int64_t nm, int ks,
                  bool x_vec) {
  wait_for_previous_kernel();
  const int64_t b = blockIdx.x, rb = (b % nm) * skinny::kRows;
  skinny::run<F, false, kMaxRows>(linear_job(w, groups, x, y, ks, x_vec, blockIdx.z, b / nm, rb,
                                             rb + skinny::kRows < tokens ? rb + skinny::kRows : tokens));
}

// The rows of the CTA's first job (job blockIdx.x), prefetch_bytes of each from its start (each warp
// reads slabs ksi < ks of a row first), for the L2 before the wait.
template <int F>
__device__ __forceinline__ L2Rows first_job_rows(const DevMatrix& w, int64_t groups, int64_t ct, int ks,
                                                 int32_t prefetch_bytes) {
  const int64_t b = blockIdx.x, R = w.rows / groups, n = skinny::outs_per_cta(false, ks), o = (b % ct) * n;
  if (prefetch_bytes == 0 || b >= ct * groups || o >= R) return L2Rows{};
  const uint8_t* first = skinny::row_bytes<F>(w, (b / ct) * R + o, w.cols);
  return L2Rows{first, skinny::cols_bytes<F>(w.cols),
                static_cast<int32_t>(n < R - o ? n : R - o), prefetch_bytes};
}

// Chunks of RM <= 2 rows (tokens <= 2; one token takes the 1-row path of the 2-row form), vector
// formats: jobs (column tile, group) streamed by a grid of resident CTAs (skinny::stream), job b =
// group b / ct, column tile b % ct.
template <int F, int RM>
__global__ void __launch_bounds__(skinny::kThreads, 2)
    linear_stream_kernel(DevMatrix w, int64_t groups, const float* x, int64_t tokens, float* y, int64_t ct, int ks,
                         bool x_vec, int32_t prefetch_bytes) {
  wait_for_previous_kernel(first_job_rows<F>(w, groups, ct, ks, prefetch_bytes));
  __shared__ float red[skinny::kWarps][skinny::kRW][skinny::kRows];
  auto job = [&](int64_t b) { return linear_job(w, groups, x, y, ks, x_vec, b / ct, b % ct, 0, tokens); };
  skinny::stream<F, false, RM>(ct * groups, job, red);
}

// Job (MoE tile `tile`, column tile col) of the expert GEMMs: with a plan (tiles), its expert and
// rows; without, the shared expert's rows [8 tile, 8 tile + 8) of identity_rows. ldx = K, ldy = n_out.
template <bool kSwiglu>
__device__ __forceinline__ Job moe_job(const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, int64_t tile,
                                       int64_t col, int64_t identity_rows, const int32_t* row_src, const float* x,
                                       int64_t K, float* y, int64_t n_out, float limit, int ks, bool x_vec) {
  int e = 0;
  int64_t rb = 0, re = 0;
  if (tiles) {
    const MoeTile t = tiles[tile];
    e = t.expert;
    rb = t.row_begin;
    re = t.row_end;
  } else {
    rb = tile * kTT;
    re = rb + kTT < identity_rows ? rb + kTT : identity_rows;
  }
  Job j;
  j.wa = wa[e];
  j.wb = kSwiglu ? wb[e] : j.wa;
  j.w_row0 = 0;
  j.o0 = col * skinny::outs_per_cta(kSwiglu, ks);
  j.n_out = n_out;
  j.K = K;
  j.x = x;
  j.ldx = K;
  j.row_src = row_src;
  j.rb = rb;
  j.re = re;
  j.y = y;
  j.ldy = n_out;
  j.limit = limit;
  j.ks = ks;
  j.x_vec = x_vec;
  return j;
}

// grid (tiles, column tiles).
template <int F, bool kSwiglu, int kMaxRows>
__global__ void __launch_bounds__(skinny::kThreads, 2)
    moe_gemm_kernel(const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, const int32_t* tile_count,
                    int64_t identity_rows, const int32_t* row_src, const float* x, int64_t K, float* y,
                    int64_t n_out, float limit, int ks, bool x_vec) {
  wait_for_previous_kernel();
  if (tiles && static_cast<int64_t>(blockIdx.x) >= static_cast<int64_t>(*tile_count)) return;  // whole block
  skinny::run<F, kSwiglu, kMaxRows>(moe_job<kSwiglu>(wa, wb, tiles, blockIdx.x, blockIdx.y, identity_rows, row_src,
                                                     x, K, y, n_out, limit, ks, x_vec));
}

// The MoE GEMMs for tiles of RM <= 2 rows, vector formats: jobs (tile, column tile) streamed by a
// grid of resident CTAs (skinny::stream), job b = tile b / ncol, column tile b % ncol; with a plan
// (tiles), only its *tile_count tiles.
template <int F, bool kSwiglu, int RM>
__global__ void __launch_bounds__(skinny::kThreads, 2)
    moe_stream_kernel(const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, const int32_t* tile_count,
                      int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src, const float* x, int64_t K,
                      float* y, int64_t n_out, int64_t ncol, float limit, int ks, bool x_vec) {
  wait_for_previous_kernel();
  __shared__ float red[skinny::kWarps][skinny::kRW][skinny::kRows];
  const int64_t ntiles = tiles ? static_cast<int64_t>(*tile_count) : grid_tiles;
  auto job = [&](int64_t b) {
    return moe_job<kSwiglu>(wa, wb, tiles, b / ncol, b % ncol, identity_rows, row_src, x, K, y, n_out, limit, ks,
                            x_vec);
  };
  skinny::stream<F, kSwiglu, RM>(ntiles * ncol, job, red);
}

// ---------------------------------------------------------------- routing

// Top-k ties in this kernel go to the lower index under both tie policies (the CUDA backend does
// not reproduce torch's tie order for the router: CudaBackend::reproduces_reference_ties).

// One warp per token. Element-wise steps are spread over the lanes; the steps whose rounding depends
// on order (the softmax sum, the top-k weight sum) stay serial in lane 0, and each top-k pass is a
// warp reduction that picks what the serial scan below would (kept in the comment) pick.
constexpr int kRouteWarps = 4;
__global__ void __launch_bounds__(32 * kRouteWarps) moe_route_kernel(MoeRouteArgs a) {
  wait_for_previous_kernel();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (t >= a.tokens) return;  // whole warp
  const int64_t E = a.experts, K = a.top_k;
  float* s = a.logits + t * E;
  switch (a.scoring) {
    case 0:
      for (int64_t j = lane; j < E; j += 32) {
        const float v = s[j];
        s[j] = sqrtf(v > 20.0f ? v : log1pf(expf(v)));  // torch softplus threshold
      }
      break;
    case 1:
      for (int64_t j = lane; j < E; j += 32) s[j] = sigmoid_f(s[j]);
      break;
    default: {
      float m = -INFINITY;
      for (int64_t j = lane; j < E; j += 32) m = m < s[j] ? s[j] : m;  // std::max(m, x): NaNs never enter
#pragma unroll
      for (int d = 16; d >= 1; d >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, m, d);
        m = m < o ? o : m;
      }
      if (m == -INFINITY) {
        for (int64_t j = lane; j < E; j += 32) s[j] = 0.0f;
        break;
      }
      for (int64_t j = lane; j < E; j += 32) s[j] = expf(s[j] - m);
      __syncwarp();
      float sum = 0.0f;
      if (lane == 0)
        for (int64_t j = 0; j < E; ++j) sum += s[j];  // ascending, as the CPU op
      const float inv = 1.0f / __shfl_sync(0xffffffffu, sum, 0);
      for (int64_t j = lane; j < E; j += 32) s[j] *= inv;
      break;
    }
  }
  __syncwarp();
  int32_t* ex = a.out_experts + t * K;
  if (a.hash_experts) {
    const int32_t* row = a.hash_experts + t * K;  // gathered and checked on the host
    for (int64_t k = lane; k < K; k += 32) ex[k] = row[k];
  } else {
    // K passes, each the best entry ranked below the previous pick in the order (value descending,
    // index ascending), i.e. cpu::top_k_indices' ranking. The serial scan
    //   for j: if (below(j) && (best_i < 0 || v_j > best_v)) best = (j, v_j);
    // keeps the first candidate if it is NaN, else the largest non-NaN candidate (lowest index of
    // equals); with no candidate it gives (0, 0.0f). Lanes find both, the warp reduces them.
    float prev_v = 0.0f;
    int64_t prev_i = -1;
    for (int64_t k = 0; k < K; ++k) {
      int64_t first_i = -1, best_i = -1;
      float first_v = 0.0f, best_v = 0.0f;
      for (int64_t j = lane; j < E; j += 32) {
        const float v = s[j] + (a.bias ? a.bias[j] : 0.0f);
        const bool below = prev_i < 0 || v < prev_v || (v == prev_v && j > prev_i);
        if (!below) continue;
        if (first_i < 0) first_i = j, first_v = v;
        if (v == v && (best_i < 0 || v > best_v)) best_i = j, best_v = v;
      }
#pragma unroll
      for (int d = 16; d >= 1; d >>= 1) {
        const int64_t oi = __shfl_xor_sync(0xffffffffu, first_i, d);
        const float ov = __shfl_xor_sync(0xffffffffu, first_v, d);
        if (oi >= 0 && (first_i < 0 || oi < first_i)) first_i = oi, first_v = ov;
        const int64_t bi = __shfl_xor_sync(0xffffffffu, best_i, d);
        const float bv = __shfl_xor_sync(0xffffffffu, best_v, d);
        if (bi >= 0 && (best_i < 0 || bv > best_v || (bv == best_v && bi < best_i))) best_i = bi, best_v = bv;
      }
      if (first_i < 0) {
        best_i = 0;  // only with NaN scores (no strict order): keep the index valid
        best_v = 0.0f;
      } else if (first_v != first_v) {
        best_i = first_i;
        best_v = first_v;
      }
      if (lane == 0) ex[k] = static_cast<int32_t>(best_i);
      prev_i = best_i;
      prev_v = best_v;
    }
  }
  __syncwarp();
  if (lane != 0) return;
  float sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) sum += s[ex[k]];
  const float norm = a.norm_topk_prob ? a.routed_scaling_factor / (sum + 1e-20f) : a.routed_scaling_factor;
  for (int64_t k = 0; k < K; ++k) a.out_weights[t * K + k] = s[ex[k]] * norm;
}

// ---------------------------------------------------------------- MoE plan / combine

__global__ void moe_count_kernel(const int32_t* experts, int64_t routed, int64_t E, int32_t* counts, int32_t* pos) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= routed) return;
  const int32_t e = experts[i];
  // Ranks within an expert follow atomic order: a row's arithmetic does not depend on its place.
  pos[i] = (e >= 0 && e < E) ? atomicAdd(counts + e, 1) : -1;
}

// One block: thread t takes a contiguous run of experts; a block scan of the runs' rows and tiles
// gives each run its first row and tile (the same plan as a serial pass over the experts).
constexpr int kPlanThreads = 1024;
__global__ void __launch_bounds__(kPlanThreads) moe_plan_kernel(const int32_t* counts, int64_t E, int32_t* offsets,
                                                                MoeTile* tiles, int32_t* tile_count, int32_t tt) {
  wait_for_previous_kernel();
  __shared__ int32_t srows[kPlanThreads], stiles[kPlanThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int64_t per = (E + kPlanThreads - 1) / kPlanThreads, e0 = t * per, e1 = e0 + per < E ? e0 + per : E;
  int32_t rows = 0, nt = 0;
  for (int64_t e = e0; e < e1; ++e) {
    const int32_t c = counts[e];
    rows += c;
    nt += (c + tt - 1) / tt;
  }
  srows[t] = rows;
  stiles[t] = nt;
  __syncthreads();
  for (int d = 1; d < kPlanThreads; d <<= 1) {  // inclusive scan
    const int32_t a = t >= d ? srows[t - d] : 0, b = t >= d ? stiles[t - d] : 0;
    __syncthreads();
    srows[t] += a;
    stiles[t] += b;
    __syncthreads();
  }
  int32_t off = srows[t] - rows, n = stiles[t] - nt;
  for (int64_t e = e0; e < e1; ++e) {
    offsets[e] = off;
    const int32_t c = counts[e];
    for (int32_t r = 0; r < c; r += tt) tiles[n++] = {static_cast<int32_t>(e), off + r, off + (c < r + tt ? c : r + tt), 0};
    off += c;
  }
  if (t == kPlanThreads - 1) {
    offsets[E] = srows[t];
    *tile_count = stiles[t];
  }
}

__global__ void moe_assign_kernel(const int32_t* experts, const int32_t* pos, const int32_t* offsets, int64_t routed,
                                  int64_t K, int32_t* row_of, int32_t* row_token) {
  wait_for_previous_kernel();
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

// Block (t, c): token t, outputs (c * blockDim + thread) * V .. + V - 1. Experts added in ascending id
// (ties: ascending k). The order is found once per block, before any row is read (lane k of warp 0
// counts the entries before its own), so a thread's K row loads are in flight together.
// Shared memory: K row indices, then K weights.
template <int V>
__global__ void moe_combine_kernel(float* out, const float* ye, const int32_t* experts, const float* weights,
                                   const int32_t* row_of, int64_t K, int64_t D) {
  wait_for_previous_kernel();
  extern __shared__ int32_t combine_smem[];
  int32_t* order_rows = combine_smem;
  float* order_weights = reinterpret_cast<float*>(combine_smem + K);
  __shared__ int32_t count;
  const int64_t t = blockIdx.x;
  const int32_t* ex = experts + t * K;
  const int32_t* rows = row_of + t * K;
  if (threadIdx.x < 32) {
    int32_t valid_count = 0;
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
      const int64_t k = k0 + threadIdx.x;
      const bool valid = k < K && rows[k] >= 0;
      if (valid) {
        const int32_t e = ex[k];
        int32_t rank = 0;
        for (int64_t j = 0; j < K; ++j) rank += rows[j] >= 0 && (ex[j] < e || (ex[j] == e && j < k));
        order_rows[rank] = rows[k];
        order_weights[rank] = weights[t * K + k];
      }
      valid_count += __popc(__ballot_sync(0xffffffffu, valid));
    }
    if (threadIdx.x == 0) count = valid_count;
  }
  __syncthreads();
  const int64_t d = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * V;
  if (d >= D) return;
  if constexpr (V == 4) {
    float4 v = *reinterpret_cast<const float4*>(out + t * D + d);
#pragma unroll 8
    for (int32_t n = 0; n < count; ++n) {
      const float w = order_weights[n];
      const float4 y = *reinterpret_cast<const float4*>(ye + static_cast<int64_t>(order_rows[n]) * D + d);
      v.x += w * y.x;
      v.y += w * y.y;
      v.z += w * y.z;
      v.w += w * y.w;
    }
    *reinterpret_cast<float4*>(out + t * D + d) = v;
  } else {
    float v = out[t * D + d];
#pragma unroll 8
    for (int32_t n = 0; n < count; ++n) v += order_weights[n] * ye[static_cast<int64_t>(order_rows[n]) * D + d];
    out[t * D + d] = v;
  }
}

__global__ void fill_kernel(float* dst, int64_t n, float value) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}

// h[t, i] = SwiGLU of gu[t, i] (gate) and gu[t, I + i] (up), one thread an element.
__global__ void swiglu_rows_kernel(const float* gu, int64_t rows, int64_t I, float limit, float* h) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * I) return;
  const int64_t t = i / I, c = i % I;
  h[i] = skinny::swiglu_clamped(gu[t * 2 * I + c], gu[t * 2 * I + I + c], limit);
}

// CTAs of the skinny kernels resident on the whole device at once (2 per SM, their launch bounds):
// the grid of the streaming kernels.
int64_t resident_ctas() { return static_cast<int64_t>(device_sm_count()) * 2; }

bool x_vec_ok(const float* x, int64_t ld) { return reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld % 4 == 0; }

// Split K for a weight of `weight_rows` rows in all: from the shape alone (batch invariance).
int split_for(int64_t weight_rows, int64_t K, int fmt) {
  const int64_t slab = 32 * skinny::chunk_elems(fmt), nslab = (K + slab - 1) / slab;
  int ks = 1;
  while (ks < skinny::kWarps && 2 * ks <= nslab &&
         (weight_rows * ks + skinny::kRW * skinny::kWarps - 1) / (skinny::kRW * skinny::kWarps) < skinny::kTargetCtas)
    ks *= 2;
  return ks;
}

template <int kMaxRows>
void launch_linear_rows(int fmt, dim3 grid, const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y,
                        int64_t nm, int ks, bool xv) {
  switch (fmt) {
#define DEEPINFER_LINEAR(F) \
  case F: launch(linear_kernel<F, kMaxRows>, grid, skinny::kThreads, 0, w, groups, x, tokens, y, nm, ks, xv); break;
    DEEPINFER_LINEAR(skinny::kF32)
    DEEPINFER_LINEAR(skinny::kF16)
    DEEPINFER_LINEAR(skinny::kBF16)
    DEEPINFER_LINEAR(skinny::kF8)
    DEEPINFER_LINEAR(skinny::kF4)
    default: launch(linear_kernel<skinny::kGeneric, kMaxRows>, grid, skinny::kThreads, 0, w, groups, x, tokens, y, nm, ks, xv);
#undef DEEPINFER_LINEAR
  }
}

}  // namespace

int gemm_format(const DevMatrix& w) {
  using namespace skinny;
  const int ch = chunk_elems(w.dtype);
  const bool aligned = reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.cols % ch == 0;
  switch (w.dtype) {
    case kF32:
    case kF16:
    case kBF16:
      return aligned ? w.dtype : kGeneric;
    case kF8:
      // Blocks of a power-of-two width of 16 or more: a lane chunk lies in one block, found by a shift.
      return aligned && (!w.scale || (w.block_rows > 0 && w.block_cols >= 16 &&
                                      (w.block_cols & (w.block_cols - 1)) == 0))
                 ? kF8
                 : kGeneric;
    case kF4:
      return aligned && w.scale ? kF4 : kGeneric;
  }
  return kGeneric;
}

void launch_linear(const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y) {
  const int64_t R = w.rows / groups;
  if (tokens <= 0 || R <= 0) return;
  const int fmt = gemm_format(w);
  const int ks = split_for(w.rows, w.cols, fmt);
  const int64_t nm = (tokens + skinny::kRows - 1) / skinny::kRows;
  const int64_t ct = (R + skinny::outs_per_cta(false, ks) - 1) / skinny::outs_per_cta(false, ks);
  const dim3 grid(static_cast<unsigned>(nm * ct), 1, static_cast<unsigned>(groups));
  const bool xv = x_vec_ok(x, groups * w.cols) && w.cols % 4 == 0;
  if (tokens <= 2 && fmt != skinny::kGeneric) {
    const dim3 sgrid(static_cast<unsigned>(std::min<int64_t>(ct * groups, resident_ctas())));
    const int64_t row_bytes = w.cols * static_cast<int64_t>(dtype_bits(static_cast<DType>(w.dtype))) / 8;
    const int32_t pre = l2_prefetch_row_bytes(skinny::outs_per_cta(false, ks), row_bytes, sgrid.x);
    switch (fmt) {
#define DEEPINFER_LINEAR(F)                                                                                      \
  case F:                                                                                                        \
    launch(linear_stream_kernel<F, 2>, sgrid, skinny::kThreads, 0, w, groups, x, tokens, y, ct, ks, xv, pre); \
    break;
      DEEPINFER_LINEAR(skinny::kF32)
      DEEPINFER_LINEAR(skinny::kF16)
      DEEPINFER_LINEAR(skinny::kBF16)
      DEEPINFER_LINEAR(skinny::kF8)
      DEEPINFER_LINEAR(skinny::kF4)
#undef DEEPINFER_LINEAR
    }
  } else if (tokens <= 2)
    launch_linear_rows<2>(fmt, grid, w, groups, x, tokens, y, nm, ks, xv);
  else
    launch_linear_rows<skinny::kRows>(fmt, grid, w, groups, x, tokens, y, nm, ks, xv);
}

namespace {

template <bool kSwiglu, int kMaxRows>
void launch_moe_gemm(int fmt, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, const int32_t* tile_count,
                     int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src, const float* x, int64_t K,
                     float* y, int64_t n_out, float limit) {
  if (grid_tiles <= 0 || n_out <= 0) return;
  // Routed experts: one split for all (their CTAs are many); the shared expert: by its shape.
  const int ks = tiles ? 1 : split_for(kSwiglu ? 2 * n_out : n_out, K, fmt);
  const int outs = skinny::outs_per_cta(kSwiglu, ks);
  const dim3 grid(static_cast<unsigned>(grid_tiles), static_cast<unsigned>((n_out + outs - 1) / outs));
  const bool xv = x_vec_ok(x, K);
  if (kMaxRows <= 2 && fmt != skinny::kGeneric) {  // tiles of 1-2 rows: the streaming form
    const int64_t ncol = grid.y;
    const dim3 sgrid(static_cast<unsigned>(std::min<int64_t>(grid_tiles * ncol, resident_ctas())));
    switch (fmt) {
#define DEEPINFER_MOE(F)                                                                                          \
  case F:                                                                                                         \
    launch(moe_stream_kernel<F, kSwiglu, 2>, sgrid, skinny::kThreads, 0, wa, wb, tiles, tile_count, grid_tiles,          \
                                                                  identity_rows, row_src, x, K, y, n_out, ncol,   \
                                                                  limit, ks, xv);                                 \
    break;
      DEEPINFER_MOE(skinny::kF32)
      DEEPINFER_MOE(skinny::kF16)
      DEEPINFER_MOE(skinny::kBF16)
      DEEPINFER_MOE(skinny::kF8)
      DEEPINFER_MOE(skinny::kF4)
#undef DEEPINFER_MOE
    }
    return;
  }
  switch (fmt) {
#define DEEPINFER_MOE(F)                                                                                          \
  case F:                                                                                                         \
    launch(moe_gemm_kernel<F, kSwiglu, kMaxRows>, grid, skinny::kThreads, 0, wa, wb, tiles, tile_count, identity_rows, row_src, x, K, \
                                                            y, n_out, limit, ks, xv);                             \
    break;
    DEEPINFER_MOE(skinny::kF32)
    DEEPINFER_MOE(skinny::kF16)
    DEEPINFER_MOE(skinny::kBF16)
    DEEPINFER_MOE(skinny::kF8)
    DEEPINFER_MOE(skinny::kF4)
    default:
      launch(moe_gemm_kernel<skinny::kGeneric, kSwiglu, kMaxRows>, grid, skinny::kThreads, 0, wa, wb, tiles, tile_count, identity_rows,
                                                                             row_src, x, K, y, n_out, limit, ks, xv);
#undef DEEPINFER_MOE
  }
}

}  // namespace

void launch_moe_route(const MoeRouteArgs& a) {
  if (a.tokens <= 0) return;
  launch(moe_route_kernel, blocks_for(a.tokens, kRouteWarps), 32 * kRouteWarps, 0, a);
}

void launch_moe_plan(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts, const MoeIndex& ix,
                     int tile_rows) {
  const int64_t routed = tokens * top_k;
  if (routed <= 0) return;
  constexpr int threads = 256;
  (void)stream_memset(ix.counts, 0, static_cast<size_t>(num_experts) * sizeof(int32_t));
  launch(moe_count_kernel, blocks_for(routed, threads), threads, 0, experts, routed, num_experts, ix.counts, ix.pos);
  launch(moe_plan_kernel, 1, kPlanThreads, 0, ix.counts, num_experts, ix.offsets, ix.tiles, ix.tile_count, tile_rows);
  launch(moe_assign_kernel, blocks_for(routed, threads), threads, 0, experts, ix.pos, ix.offsets, routed, top_k, ix.row_of,
                                                              ix.row_token);
}

void launch_moe_gate_up(int fmt, const DevMatrix* w1s, const DevMatrix* w3s, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src,
                        const float* x, int64_t D, int64_t I, float limit, float* h, bool few_rows) {
  if (few_rows)
    launch_moe_gemm<true, 2>(fmt, w1s, w3s, tiles, tile_count, grid_tiles, identity_rows, row_src, x, D, h, I, limit);
  else
    launch_moe_gemm<true, skinny::kRows>(fmt, w1s, w3s, tiles, tile_count, grid_tiles, identity_rows, row_src, x, D,
                                         h, I, limit);
}

void launch_moe_down(int fmt, const DevMatrix* w2s, const MoeTile* tiles, const int32_t* tile_count,
                     int64_t grid_tiles, int64_t identity_rows, const float* h, int64_t I, int64_t D, float* y,
                     bool few_rows) {
  if (few_rows)
    launch_moe_gemm<false, 2>(fmt, w2s, w2s, tiles, tile_count, grid_tiles, identity_rows, nullptr, h, I, y, D, 0.0f);
  else
    launch_moe_gemm<false, skinny::kRows>(fmt, w2s, w2s, tiles, tile_count, grid_tiles, identity_rows, nullptr, h, I,
                                          y, D, 0.0f);
}

void launch_moe_combine(float* out, const float* ye, const int32_t* experts, const float* weights,
                        const int32_t* row_of, int64_t tokens, int64_t top_k, int64_t D) {
  if (tokens <= 0 || top_k <= 0 || D <= 0) return;
  const bool vec = D % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(ye) % 16 == 0;
  const int64_t per_block = D / (vec ? 4 : 1) >= 256 ? 256 : 64;
  const int threads = static_cast<int>(per_block);
  const int64_t items = vec ? D / 4 : D;
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>((items + threads - 1) / threads));
  const size_t smem = static_cast<size_t>(top_k) * (sizeof(int32_t) + sizeof(float));
  if (vec)
    launch(moe_combine_kernel<4>, grid, threads, smem, out, ye, experts, weights, row_of, top_k, D);
  else
    launch(moe_combine_kernel<1>, grid, threads, smem, out, ye, experts, weights, row_of, top_k, D);
}

void launch_swiglu_rows(const float* gu, int64_t rows, int64_t I, float limit, float* h) {
  if (rows * I <= 0) return;
  launch(swiglu_rows_kernel, blocks_for(rows * I, 256), 256, 0, gu, rows, I, limit, h);
}

void launch_fill(float* dst, int64_t n, float value) {
  if (n <= 0) return;
  launch(fill_kernel, blocks_for(n, 256), 256, 0, dst, n, value);
}

}  // namespace deepinfer::cuda
