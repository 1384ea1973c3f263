// The tensor-core GEMM behind linear, grouped_linear and the MoE experts for BF16, FP8 (no scale or
// E8M0 block scales) and FP4 (E2M1, E8M0 per 32) weights: mma.sync m16n8k16 bf16 with fp32
// accumulation, used at EVERY number of rows (decode and prefill alike), so that a row's bits never
// depend on what else the call holds (gemm_kernels.h explains why no M threshold is allowed).
//
// Operands ("swap AB": the weight is the MMA's A operand, the tokens its N side):
//  - A: 16 weight rows of one warp, read straight from global memory with 16-byte loads (lane
//    (g, t) = (lane / 4, lane % 4) holds rows g and g + 8, columns 32 t .. 32 t + 31 of each
//    128-column slab, as 16-byte pieces of 4 F32 / 8 BF16, F16 / 16 FP8 / 32 FP4 elements) and
//    widened to bf16 in registers: BF16 as is, FP8 / FP4 exactly (value * E8M0 scale has at most 4
//    significant bits); F32, F16 and FP8 with F32 scales as hi + lo bf16 parts (a third MMA).
//  - B: the activations, float32 split once per call into bf16 hi + mid + lo parts (their sum is x
//    exactly; launch_tc_split_x), 24 bytes per 4 columns. Each MMA step is three MMAs (hi, mid, lo).
//    (A 2-term split, 2^-17, missed the op suite's 1e-4 where gate sums cancel under a small clamp.)
//    Default mode, FP8 whose values times scales are exact in f16 (kF8H, most checkpoints): f16
//    operands instead, x 2^-e (a power of two per row) as f16 hi + lo (22 bits, as the fixtures
//    need: docs/perf.md session 24), 16 bytes per 4 columns, so each MMA step is two MMAs; the
//    epilogue multiplies by 2^e. Calls that read x themselves (<= 8 rows) stay on bf16 parts.
//  - MMA step J (0..7) of a slab takes columns 32 t + 4 J .. + 3 from lane t (A and B agree on it),
//    so every fragment is a plain register of a 16-byte load, no shared memory, and the MMA
//    sequence (which columns each MMA sums, in which order) is the same for every weight format:
//    an F32 copy of FP8 / FP4 values gives bit-identical sums (its low parts are zero).
//
// Fixed arithmetic (batch invariance): the reduction is cut into ks slices (from the weight's shape
// only; slice s = a contiguous run of slabs); each slice is one chain of MMAs over its slabs in ascending
// order starting from zero; the slices are added in ascending order (p0 + p1 + ...). Two bit-
// identical schedules: "split" (warps of a CTA take the slices of a row group, partials summed
// through shared memory in slice order: decode, few rows) and "seq" (each warp takes every slice of
// its row group in turn, keeping a running total: prefill, many rows). Which one, and how many
// tokens a CTA holds (8, 16, 32 or 64), follow from the call's size, and change no bit: an MMA's
// output element depends on its own A row, B column and accumulator only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string_view>

#include "backend/cuda/device_math.cuh"
#include "core/dtype.h"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/tc_tile.cuh"  // the fragments, staging and tile of every schedule

namespace deepinfer::cuda {

namespace {

namespace tc {

// Shared memory of the split schedule's partials (8 warps x NT tiles x 4 x 32 lanes).
template <int NT>
struct Red {
  float v[kWarps * NT * 4 * 32];
};

// Outputs per row group, and row groups per CTA.
__host__ __device__ constexpr int outs_per_group(bool swiglu) { return swiglu ? 8 : 16; }
__host__ __device__ constexpr int groups_per_cta(bool seq, int ks, int rg) { return seq ? kWarps * rg : kWarps / ks; }

// The weights one linear_tc launch runs over the same x, each its own run of row tiles and its own
// output: one for linear / grouped_linear, up to kTcMaxTargets for linears (sibling projections).
// Passed as a __grid_constant__ parameter (read in place, indexed by the CTA's member).
struct Members {
  DevMatrix w[kTcMaxTargets];
  float* y[kTcMaxTargets];
  int32_t tile0[kTcMaxTargets + 1];  // member i's row tiles: [tile0[i], tile0[i + 1])
  int32_t col0[kTcMaxTargets + 1];   // its first column of the slice partials (rows of `cols` floats)
  int32_t n, cols;
};
// No padding: launch() folds the parameter's bytes into the step graphs' keys.
static_assert(sizeof(Members) == kTcMaxTargets * (sizeof(DevMatrix) + sizeof(float*)) + (2 * kTcMaxTargets + 4) * 4);

// The member of row tile rt (over all members' tiles).
__device__ __forceinline__ int member_of(const Members& m, int64_t rt) {
  int i = 0;
  while (i + 1 < m.n && rt >= m.tile0[i + 1]) ++i;
  return i;
}

// The CTA's weight rows (its row tile of its member, group blockIdx.z; token block 0's CTAs only, the
// others read the same rows), prefetch_bytes of each from the start of its K range (a slice CTA's slice;
// else column 0), for the L2 before the wait.
template <int F>
__device__ __forceinline__ L2Rows first_rows(const Members& m, int64_t groups, int64_t nb, int ks, bool seq, int RG,
                                             bool slice_ctas, int32_t prefetch_bytes) {
  const int64_t b = blockIdx.x, tb = b % nb;
  const int mi = member_of(m, b / nb);
  const int64_t rt = b / nb - m.tile0[mi];
  const DevMatrix& w = m.w[mi];
  const int64_t R = w.rows / groups, C = w.cols;
  const int64_t n = static_cast<int64_t>(groups_per_cta(seq, ks, RG)) * outs_per_group(false), o = rt * n;
  if (prefetch_bytes == 0 || tb != 0 || o >= R) return L2Rows{};
  const int64_t per = ((C + kSlabK - 1) / kSlabK + ks - 1) / ks;  // slabs a slice (tc_tile.cuh's tile)
  const int64_t k0 = slice_ctas ? static_cast<int64_t>(blockIdx.y) * per * kSlabK : 0;
  // Bytes from column k0 to the row's end (a last slice may be shorter), down to 16: the row's own.
  const int64_t left = skinny::cols_bytes<stored(F)>(C - k0) / 16 * 16;
  if (k0 >= C || left < 16) return L2Rows{};
  const int64_t row = blockIdx.z * R + o;
  const uint8_t* first = skinny::row_bytes<stored(F)>(w, row, C) + skinny::cols_bytes<stored(F)>(k0);
  return L2Rows{first, skinny::cols_bytes<stored(F)>(C),
                static_cast<int32_t>(n < R - o ? n : R - o),
                static_cast<int32_t>(prefetch_bytes < left ? prefetch_bytes : left)};
}

// grid (token blocks * row tiles of all members, slices, groups); block b: token block b % nb, row
// tile b / nb (of member member_of(b / nb)). part (grid-split schedule, grid.y = ks): slice y's
// sums go to part + y * tokens * m.cols, each member at its col0 (groups: group g's at g * R), for
// sum_slices_kernel; else grid.y = 1 and the sums go to the member's y.
template <int F, int NT, int RG, bool kRaw, bool kGrid>
__global__ void __launch_bounds__(kThreads, NT * RG >= 8 ? 1 : 2)
    linear_tc_kernel(const __grid_constant__ Members m, int64_t groups, const uint4* xc, const float* x,
                     int64_t tokens, int64_t nb, int ks, bool seq, float* part, int32_t prefetch_bytes,
                     bool stage_all) {
  wait_for_previous_kernel(first_rows<F>(m, groups, nb, ks, seq, RG, kGrid && part, prefetch_bytes));
  const int64_t b = blockIdx.x, tb = b % nb;
  const int mi = member_of(m, b / nb);
  const int64_t rt = b / nb - m.tile0[mi];
  const DevMatrix& w = m.w[mi];
  __shared__ Red<RG == 1 && !kGrid ? NT : 1> red;  // the split schedule's (RG 1 only)
  extern __shared__ uint4 x_stage[];               // staged_smem() bytes
  const int64_t R = w.rows / groups, C = w.cols, gi = blockIdx.z;
  Job j;
  j.wa = j.wb = w;
  j.w_row0 = gi * R;
  j.o0 = rt * groups_per_cta(seq, ks, RG) * outs_per_group(false);
  j.n_out = R;
  j.K = C;
  j.xc = kRaw ? nullptr : xc + gi * split_row_records(C);
  j.xlo = kRaw ? nullptr : reinterpret_cast<const uint2*>(xc + tokens * groups * split_row_records(C)) + gi * split_row_records(C);
  j.ldxc = groups * split_row_records(C);
  j.xexp = f16_operands(F) ? reinterpret_cast<const int32_t*>(xc + tokens * groups * split_row_records(C)) + gi : nullptr;
  j.ldxe = groups;
  j.x = kRaw ? x + gi * C : nullptr;
  j.ldx = groups * C;
  j.row_src = nullptr;
  j.rb = tb * 8 * NT;
  j.re = j.rb + 8 * NT < tokens ? j.rb + 8 * NT : tokens;
  j.ldy = groups * R;
  j.limit = 0.0f;
  j.ks = ks;
  j.stage_all = kGrid && stage_all;
  if constexpr (kGrid) {
    j.slice = part ? static_cast<int>(blockIdx.y) : -1;
    j.y = (part ? part + static_cast<int64_t>(blockIdx.y) * tokens * m.cols + m.col0[mi] : m.y[mi]) + gi * R;
    if (part) j.ldy = m.cols;
    j.seq = true;  // staged CTAs: every warp on the same pieces
  } else {
    j.slice = -1;
    j.y = m.y[mi] + gi * R;
    j.seq = seq;
  }
  tile<F, false, NT, RG, kRaw, kGrid>(j, red.v, x_stage);
}

// grid (tiles, row tiles).
// part (identity rows only: the shared expert's grid-split schedule, grid.z = ks): slice z's sums go
// to part + z * identity_rows * W, rows of W = n_out (SwiGLU: 2 n_out, gate then up) floats.
template <int F, bool kSwiglu, int NT, int RG, bool kRaw, bool kGrid>
__global__ void __launch_bounds__(kThreads, NT * RG >= 8 ? 1 : 2)
    moe_tc_kernel(const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, const int32_t* tile_count,
                  int64_t identity_rows, const int32_t* row_src, const uint4* xc, int64_t x_rows, const float* x,
                  int64_t K, float* y, int64_t n_out, float limit, int ks, bool seq, float* part, bool stage_all) {
  wait_for_previous_kernel();
  __shared__ Red<RG == 1 && !kGrid ? NT : 1> red;
  extern __shared__ uint4 x_stage[];  // staged_smem() bytes
  int e = 0;
  int64_t rb = 0, re = 0;
  if (tiles) {
    if (static_cast<int64_t>(blockIdx.x) >= static_cast<int64_t>(*tile_count)) return;  // whole block
    const MoeTile tl = tiles[blockIdx.x];
    e = tl.expert;
    rb = tl.row_begin;
    re = tl.row_end;
  } else {
    rb = static_cast<int64_t>(blockIdx.x) * 8 * NT;
    re = rb + 8 * NT < identity_rows ? rb + 8 * NT : identity_rows;
  }
  Job j;
  j.wa = wa[e];
  j.wb = kSwiglu ? wb[e] : j.wa;
  j.w_row0 = 0;
  j.o0 = static_cast<int64_t>(blockIdx.y) * groups_per_cta(seq, ks, RG) * outs_per_group(kSwiglu);
  j.n_out = n_out;
  j.K = K;
  j.xc = xc;
  j.xlo = xc ? reinterpret_cast<const uint2*>(xc + x_rows * split_row_records(K)) : nullptr;
  j.ldxc = split_row_records(K);
  j.xexp = f16_operands(F) ? reinterpret_cast<const int32_t*>(xc + x_rows * split_row_records(K)) : nullptr;
  j.ldxe = 1;
  j.x = x;
  j.ldx = K;
  j.row_src = row_src;
  j.rb = rb;
  j.re = re;
  j.limit = limit;
  j.ks = ks;
  j.stage_all = kGrid && stage_all;
  if constexpr (kGrid) {
    const int64_t width = part && kSwiglu ? 2 * n_out : n_out;
    j.y = part ? part + static_cast<int64_t>(blockIdx.z) * identity_rows * width : y;
    j.ldy = width;
    j.seq = true;  // staged CTAs: every warp on the same pieces
    j.slice = part ? static_cast<int>(blockIdx.z) : -1;
  } else {
    j.y = y;
    j.ldy = n_out;
    j.seq = seq;
    j.slice = -1;
  }
  tile<F, kSwiglu, NT, RG, kRaw, kGrid>(j, red.v, x_stage);
}

// x [rows, groups * C] float32 -> per group, split_row_records(C) hi / mid records (Split::hm) in
// split_index order (zeros past C), then the lo plane (Split::lo) in the same order. One thread per
// record.
__global__ void split_x_kernel(const float* x, int64_t rows, int64_t groups, int64_t C, uint4* out) {
  wait_for_previous_kernel();
  const int64_t per = split_row_records(C), i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * groups * per) return;
  const int64_t r = i / (groups * per), g = (i / per) % groups, c4 = i % per;  // c4: column quad, in order
  const int64_t c = 4 * c4;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = c + k < C ? x[r * groups * C + g * C + c + k] : 0.0f;
  const Split sp = split4(make_float4(v[0], v[1], v[2], v[3]));
  const int64_t o = (r * groups + g) * per + split_index(c);
  out[o] = sp.hm;
  reinterpret_cast<uint2*>(out + rows * groups * per)[o] = sp.lo;  // the lo plane follows
}

// kF8H's split: per row and group, the records {hi(x0, x1), hi(x2, x3), lo(x0, x1), lo(x2, x3)} of
// x 2^-e as f16 (mma::split2_f16) in split_index order (zeros past C), e from the row's largest
// magnitude (mma::f16_block_exponent: 2^14 <= m 2^-e < 2^15), then, where the lo plane would be,
// the exponents [rows][groups]. One block of kSplitThreads per (row, group).
constexpr int kSplitThreads = 128;
__global__ void split_x_f16_kernel(const float* x, int64_t rows, int64_t groups, int64_t C, uint4* out) {
  wait_for_previous_kernel();
  __shared__ float warp_max[kSplitThreads / 32];
  const int64_t rg = blockIdx.x, per = split_row_records(C);
  const float* xr = x + rg * C;  // row r, group g: (r groups + g) C
  const int tid = static_cast<int>(threadIdx.x);
  float m = 0.0f;  // (fmaxf drops NaN: a NaN element reaches the output through its own parts)
  for (int64_t c = tid; c < C; c += kSplitThreads) m = fmaxf(m, fabsf(xr[c]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((tid & 31) == 0) warp_max[tid >> 5] = m;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kSplitThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
  const int e = mma::f16_block_exponent(m);
  const float down = mma::pow2f(-e);
  for (int64_t c4 = tid; c4 < per; c4 += kSplitThreads) {
    const int64_t c = 4 * c4;
    __half hi[4], lo[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) mma::split2_f16(c + k < C ? xr[c + k] * down : 0.0f, hi[k], lo[k]);
    out[rg * per + split_index(c)] =
        make_uint4(mma::pack_f16(hi[0], hi[1]), mma::pack_f16(hi[2], hi[3]), mma::pack_f16(lo[0], lo[1]), mma::pack_f16(lo[2], lo[3]));
  }
  if (tid == 0) reinterpret_cast<int32_t*>(out + rows * groups * per)[rg] = e;
}

// y[i] = part[0][i] + part[1][i] + ... in ascending slice order: the sums of the split schedule's
// partials through shared memory and of the seq schedule's running total, so the same bits.
__global__ void sum_slices_kernel(const float* part, int ks, int64_t n, float* y) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = part[i];
  for (int s = 1; s < ks; ++s) v += part[static_cast<int64_t>(s) * n + i];
  y[i] = v;
}

// sum_slices_kernel over a launch's members: partials [ks][tokens][m.cols], member i's outputs at
// columns [col0[i], col0[i + 1]) of each row, to its own y.
__global__ void sum_slices_members_kernel(const float* part, int ks, int64_t tokens, const __grid_constant__ Members m) {
  wait_for_previous_kernel();
  const int64_t n = tokens * m.cols, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = part[i];
  for (int s = 1; s < ks; ++s) v += part[static_cast<int64_t>(s) * n + i];
  const int64_t t = i / m.cols, c = i % m.cols;
  int k = 0;
  while (k + 1 < m.n && c >= m.col0[k + 1]) ++k;
  m.y[k][t * m.w[k].rows + (c - m.col0[k])] = v;
}

// The same for SwiGLU partials [ks][rows][2 n_out]: y[r][o] = swiglu(sum of gates, sum of ups), as
// the tile's epilogue computes it from its own sums.
__global__ void sum_slices_swiglu_kernel(const float* part, int ks, int64_t rows, int64_t n_out, float limit, float* y) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * n_out) return;
  const int64_t r = i / n_out, o = i % n_out, slice = rows * 2 * n_out;
  const float* p = part + r * 2 * n_out + o;
  float gate = p[0], up = p[n_out];
  for (int s = 1; s < ks; ++s) {
    gate += p[s * slice];
    up += p[s * slice + n_out];
  }
  y[i] = skinny::swiglu_clamped(gate, up, limit);
}

// Slices of the reduction, from the weight's shape alone: row_groups of 16 rows (8 outputs under
// SwiGLU), nslab slabs of the reduction; at most max_ks (the in-CTA split schedule puts a CTA's
// slices on its kWarps warps; grid_slices lifts that where slices are CTAs).
int split_for(int64_t row_groups, int64_t nslab, int max_ks = kWarps) {
  int ks = 1;
  while (ks < max_ks && 2 * ks <= nslab && (row_groups * ks + kWarps - 1) / kWarps < kTargetCtas) ks *= 2;
  return ks;
}

// 8-token tiles per CTA for a call of `rows` rows (or rows per expert).
int tiles_for(int64_t rows) { return rows <= 8 ? 1 : rows <= 32 ? 4 : 8; }

// 16-row groups a warp holds in the many-row (64-token) seq schedule: each x fragment then feeds
// that many MMAs. Changes no bit (every output's MMA chain is the same); DEEPINFER_TC_ROWS_PER_WARP
// (1 or 2) overrides the default for measurements. (4 spills over 1 KB a thread at 64 tokens.)
int rows_per_warp() {
  static const int rg = [] {
    const char* v = std::getenv("DEEPINFER_TC_ROWS_PER_WARP");
    const int n = v ? std::atoi(v) : 2;
    return n == 1 ? 1 : 2;
  }();
  return rg;
}

// Dynamic shared memory a grid-split kernel of nt 8-token tiles may take for a slice's whole x: two
// CTAs an SM at 32 tokens (their launch bounds ask for two), one at 64; within the device's limit.
size_t whole_slice_cap(int nt) {
  const size_t want = (nt == 8 ? 200 : 100) * 1024, limit = device_smem_per_block_optin();
  return std::min(want, limit > 4096 ? limit - 4096 : 0);  // 4 KB for the static shared memory
}

}  // namespace tc

}  // namespace

TcPolicy policy_from_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || v[0] == '\0' || std::string_view(v) == "auto") return TcPolicy::Auto;
  return v[0] == '0' ? TcPolicy::Never : TcPolicy::Always;
}

TcPolicy tc_policy() {
  static const TcPolicy p = policy_from_env("DEEPINFER_TC_GEMM");
  return p;
}

int64_t positive_env(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  const long long r = v ? std::atoll(v) : 0;
  return r > 0 ? static_cast<int64_t>(r) : fallback;
}

// 8: from 8 rows a step is faster with the tensor cores (V4-Flash shape, batch 8: 5.55 against 5.82
// ms); below, the CUDA-core tile streams the weights faster (batch 1: 3.3 against 2.1 ms).
int64_t tc_min_rows() {
  static const int64_t n = positive_env("DEEPINFER_TC_MIN_ROWS", 8);
  return n;
}

// 1 (docs/perf.md, session 30; H100, V4-Flash shape, 4K context): with key splits (session 22) and
// f16 operands (session 29) the tensor-core attention is as fast at 1 decode token (1.88 against
// 1.90 ms a step) and faster from 2 (B=2 -3%, 4 -6%, 8 -8%, 16 -13%). (It was 32 from session 15,
// when one token's 32-head CTA could not fill the GPU.)
int64_t tc_attention_min_tokens() {
  static const int64_t n = positive_env("DEEPINFER_TC_ATTENTION_MIN_TOKENS", 1);
  return n;
}

// The f16-operand formats (kF8H, kBF16H) in the default mode only (tc_policy() Auto: no call
// compares rows' bits across batches); `env`=0 (DEEPINFER_TC_FP8_F16, DEEPINFER_TC_BF16_F16) keeps
// the format on bf16 operands, for measurements.
static bool f16_operands_wanted(const char* env) {
  return tc_policy() == TcPolicy::Auto && policy_from_env(env) != TcPolicy::Never;
}

int tc_format(const DevMatrix& w) {
  const int f = gemm_format(w);
  if (f == tc::kF8 && w.scale && w.scale_dtype != 4) return tc::kF8F;
  static const bool fp8_f16 = f16_operands_wanted("DEEPINFER_TC_FP8_F16");
  static const bool bf16_f16 = f16_operands_wanted("DEEPINFER_TC_BF16_F16");
  if (f == tc::kF8 && w.fp8_exact_in_f16 && fp8_f16) return tc::kF8H;
  if (f == tc::kBF16 && w.row_scale && bf16_f16) return tc::kBF16H;
  return f == kGemmGenericFormat ? -1 : f;
}

size_t tc_split_bytes(int64_t rows, int64_t groups, int64_t C) {
  return static_cast<size_t>(rows * groups * tc::split_row_records(C)) * 24;  // hi / mid + lo planes
}

int tc_common_format(int a, int b) {
  if (a < 0 || b < 0) return -1;
  if (a == b) return a;
  // FP8 with E8M0 and with F32 scales: the F32-scale kernel takes both (each matrix's own scales;
  // the low parts of E8M0 values are zero and add no MMA).
  // FP8 exact in f16 and FP8 that is not: the bf16 kernel (it takes every E8M0-scaled FP8).
  auto fp8 = [](int f) { return f == tc::kF8 || f == tc::kF8F || f == tc::kF8H; };
  if (fp8(a) && fp8(b)) return a == tc::kF8F || b == tc::kF8F ? tc::kF8F : tc::kF8;
  // BF16 on f16 operands and BF16 that is not: the bf16 kernel.
  auto bf16 = [](int f) { return f == tc::kBF16 || f == tc::kBF16H; };
  if (bf16(a) && bf16(b)) return tc::kBF16;
  return -1;
}

void launch_tc_split_x(const float* x, int64_t rows, int64_t groups, int64_t C, void* out) {
  const int64_t n = rows * groups * tc::split_row_records(C);
  if (n <= 0) return;
  launch(tc::split_x_kernel, blocks_for(n, 256), 256, 0, x, rows, groups, C, static_cast<uint4*>(out));
}

bool tc_reads_x(int64_t rows, const float* x) { return rows <= 8 && reinterpret_cast<uintptr_t>(x) % 16 == 0; }

namespace {

// x split as the format's kernels read it (f16 operands: f16 parts and row exponents; else bf16 parts).
void split_x_for(int fmt, const float* x, int64_t rows, int64_t groups, int64_t C, void* out) {
  if (!tc::f16_operands(fmt)) {
    launch_tc_split_x(x, rows, groups, C, out);
  } else if (rows * groups > 0) {
    launch(tc::split_x_f16_kernel, dim3(static_cast<unsigned>(rows * groups)), tc::kSplitThreads, 0, x, rows, groups, C,
           static_cast<uint4*>(out));
  }
}

}  // namespace

#define DEEPINFER_TC_FORMATS(M) \
  switch (fmt) {                \
    case tc::kF32: M(tc::kF32) break;   \
    case tc::kF16: M(tc::kF16) break;   \
    case tc::kBF16: M(tc::kBF16) break; \
    case tc::kF8: M(tc::kF8) break;     \
    case tc::kF8F: M(tc::kF8F) break;   \
    case tc::kF8H: M(tc::kF8H) break;   \
    case tc::kBF16H: M(tc::kBF16H) break; \
    default: M(tc::kF4) break;          \
  }

namespace {

// Pieces of x a grid-split slice CTA stages at once (tc_tile.cuh's Job::stage_all: one wait instead
// of one a piece; session 30's ncu: the 256-row projections' 16 waits a slice took 10-24x their
// bytes' time), or 0 where the slice's x passes tc::whole_slice_cap or DEEPINFER_TC_SLICE_X=0 (the
// A/B). The same MMAs either way, so the same bits.
int64_t whole_slice_pieces(int fmt, int nt, int64_t K, int ks) {
  static const bool on = policy_from_env("DEEPINFER_TC_SLICE_X") != TcPolicy::Never;
  const int64_t nslab = (K + tc::kSlabK - 1) / tc::kSlabK, per = (nslab + ks - 1) / ks;
  const int64_t pieces = per * (32 / tc::chunk_elems(fmt));
  return on && pieces * tc::stage_bytes(fmt, 8 * nt) <= tc::whole_slice_cap(nt) ? pieces : 0;
}

// The launch's dynamic shared memory: staged x of kStages pieces, or (pieces > 0) of a whole slice.
// `limit`: what allow_dynamic_smem is asked for, the same every call of a kernel (its first call
// sets the kernel's ceiling once).
struct StageSmem {
  size_t bytes, limit;
};
template <int F, int NT, bool kStage, bool kGrid>
StageSmem stage_smem(int64_t pieces) {
  constexpr size_t staged = tc::staged_smem<F, NT, kStage>();
  if constexpr (!kGrid) return StageSmem{staged, staged};
  const size_t cap = std::max(staged, tc::whole_slice_cap(NT));
  return StageSmem{pieces > 0 ? static_cast<size_t>(pieces) * tc::stage_bytes(F, 8 * NT) : staged, cap};
}

// How a launcher runs a call, from the shapes alone (the *_slice_bytes functions size `part` by it).
struct Schedule {
  int ks, nt, rg;
  int64_t nb, row_tiles;              // token blocks (linear), row tiles (CTAs along the outputs)
  bool seq, grid_kernel, grid_split;  // grid_kernel: the grid-split schedule's (staged) kernels
};

// The grid-split schedule: staged seq CTAs, and each slice its own CTAs where whole-K CTAs (seq_ctas
// of them) would not fill the SMs.
void choose_grid_split(Schedule& p, int64_t seq_ctas) {
  p.seq = true;
  p.grid_kernel = true;
  p.grid_split = p.ks > 1 && seq_ctas < tc::kSeqMinCtas;
}

// The row tiles of the chosen schedule over rgroups row groups.
void settle_row_tiles(Schedule& p, int64_t rgroups) {
  const int64_t per = tc::groups_per_cta(p.seq, p.ks, p.rg);
  p.row_tiles = (rgroups + per - 1) / per;
}

// Slices of a grid-split call on f16 operands (the default mode only, whose bits already depend on
// the batch: tc_format): the same rule as split_for without its cap of kWarps, so a small weight's
// call has ~2 CTAs an SM instead of at most 8 slices of its row tiles (docs/perf.md session 31: the
// 256-row projections ran 16 CTAs whose warps each issued ~5,800 instructions in a row). Still from
// the shape alone. The default since session 32 (H100 decode B=32 -0.07 ms, B=128 -0.16);
// DEEPINFER_TC_GRID_SLICES=0 keeps split_for's count.
// At least 2 slabs a slice (one is too fine at 32 tokens: per-CTA fixed work, and partials as many
// bytes as the weights): B=32 -0.045 ms, B=128 -0.056 (H100, docs/perf.md session 32), -0.04 /
// -0.06 on the H200 (session 33). DEEPINFER_TC_SLICE_MIN_SLABS=n keeps at least n (1: one slab).
int grid_slices(int fmt, int64_t row_groups, int64_t nslab, int ks) {
  static const bool on = policy_from_env("DEEPINFER_TC_GRID_SLICES") != TcPolicy::Never;
  static const int64_t min_slabs = positive_env("DEEPINFER_TC_SLICE_MIN_SLABS", 2);
  return on && tc::f16_operands(fmt) ? std::max(ks, tc::split_for(row_groups, nslab / min_slabs, 64)) : ks;
}

Schedule plan_linear(int fmt, int64_t R, int64_t C, int64_t groups, int64_t tokens, bool raw) {
  Schedule p{};
  const int64_t nslab = (C + tc::kSlabK - 1) / tc::kSlabK;
  const int64_t rgroups = (R + 15) / 16;
  p.ks = tc::split_for(rgroups * groups, nslab);
  p.nt = tc::tiles_for(tokens);
  p.nb = (tokens + 8 * p.nt - 1) / (8 * p.nt);
  const int rgw = p.nt == 8 ? tc::rows_per_warp() : 1;  // 16-row groups a warp holds in the seq schedule
  const int64_t seq_ctas = (rgroups + tc::kWarps * rgw - 1) / (tc::kWarps * rgw) * p.nb * groups;
  if (tc_grid_split_wanted() && !raw && p.nt >= 4) {
    p.rg = rgw;
    choose_grid_split(p, seq_ctas);
    if (p.grid_split) p.ks = grid_slices(fmt, rgroups * groups, nslab, p.ks);
  } else {
    p.seq = p.ks == 1 || (p.nt == 8 && seq_ctas >= tc::kSeqMinCtas);
    p.rg = p.seq ? rgw : 1;
  }
  settle_row_tiles(p, rgroups);
  return p;
}

}  // namespace

bool tc_grid_split_wanted() {
  // The default since session 22 (H100, decode at 4K context: B=32 11.23 -> 8.90 ms a step, B=128
  // 25.28 -> 22.01 ms; docs/perf.md); DEEPINFER_TC_GRID_SPLIT=0 goes back to the in-CTA schedules.
  static const bool on = policy_from_env("DEEPINFER_TC_GRID_SPLIT") != TcPolicy::Never;
  return on;
}

namespace {

// The schedule of a launch over m's members (groups of one member: grouped_linear): the shape rule
// over all their rows at once, then each member's own row tiles, in order (m.tile0).
Schedule plan_members(int fmt, tc::Members& m, int64_t groups, int64_t tokens, bool raw) {
  Schedule p = plan_linear(fmt, m.cols / groups, m.w[0].cols, groups, tokens, raw);
  const int64_t per = tc::groups_per_cta(p.seq, p.ks, p.rg);
  int64_t tiles = 0;
  for (int i = 0; i < m.n; ++i) {
    m.tile0[i] = static_cast<int32_t>(tiles);
    tiles += ((m.w[i].rows / groups + 15) / 16 + per - 1) / per;
  }
  m.tile0[m.n] = static_cast<int32_t>(tiles);
  p.row_tiles = tiles;
  return p;
}

tc::Members members_of(std::span<const TcLinearTarget> targets) {
  if (targets.size() > static_cast<size_t>(kTcMaxTargets))
    throw std::length_error("launch_linears_tc: more weights than one launch takes (kTcMaxTargets)");
  tc::Members m;
  std::memset(&m, 0, sizeof m);  // the padding-free bytes fold into graph keys
  m.n = static_cast<int32_t>(targets.size());
  int64_t cols = 0;
  for (int i = 0; i < m.n; ++i) {
    m.w[i] = targets[i].w;
    m.y[i] = targets[i].y;
    m.col0[i] = static_cast<int32_t>(cols);
    cols += targets[i].w.rows;
  }
  m.col0[m.n] = m.cols = static_cast<int32_t>(cols);
  return m;
}

size_t slice_bytes(int fmt, tc::Members m, int64_t groups, int64_t tokens, const float* x) {
  if (tokens <= 0 || m.cols <= 0) return 0;
  const Schedule p = plan_members(fmt, m, groups, tokens, tc_reads_x(tokens, x));
  return p.grid_split ? static_cast<size_t>(p.ks * tokens * m.cols) * sizeof(float) : 0;
}

void run_linear_tc(int fmt, tc::Members m, int64_t groups, const float* x, void* xc, bool x_split, int64_t tokens,
                   float* part) {
  const int64_t K = m.w[0].cols;
  if (tokens <= 0 || m.cols <= 0) return;
  const bool raw = tc_reads_x(tokens, x);
  const Schedule p = plan_members(fmt, m, groups, tokens, raw);
  if (p.grid_split && !part) return;  // (slice_bytes gave the caller its size)
  if (raw) fmt = tc::raw_format(fmt);
  const int ks = p.ks, nt = p.nt, rg = p.rg;
  const int64_t nb = p.nb;
  const bool seq = p.seq, grid_kernel = p.grid_kernel;
  float* slices = p.grid_split ? part : nullptr;
  const dim3 grid(static_cast<unsigned>(p.row_tiles * nb), static_cast<unsigned>(p.grid_split ? ks : 1),
                  static_cast<unsigned>(groups));
  if (!raw && !x_split) {
    split_x_for(fmt, x, tokens, groups, K, xc);
    if (cudaPeekAtLastError() != cudaSuccess) return;  // the caller's check reports it
  }
  const auto* x4 = static_cast<const uint4*>(xc);
  // The L2 prefetch of each CTA's rows (token block 0's CTAs): from a slice's start under the grid
  // split, else from column 0 (what the seq and split schedules read first).
  const auto elem_bits = static_cast<int64_t>(dtype_bits(static_cast<DType>(m.w[0].dtype)));
  const int64_t nslab = (K + tc::kSlabK - 1) / tc::kSlabK, per = (nslab + ks - 1) / ks;
  const int64_t region = (p.grid_split ? std::min(per * tc::kSlabK, K) : K) * elem_bits / 8;
  const int32_t pre = l2_prefetch_row_bytes(tc::groups_per_cta(seq, ks, rg) * tc::outs_per_group(false), region,
                                            p.row_tiles * grid.y * groups);
  const int64_t whole = slices ? whole_slice_pieces(fmt, nt, K, ks) : 0;
#define DEEPINFER_TC_LINEAR_K(F, NT, RG, RAW, GRID)                                                              \
  {                                                                                                               \
    const StageSmem smem = stage_smem<F, NT, GRID || tc::stages_by_default(NT, RG, RAW), GRID>(whole);            \
    if (!allow_dynamic_smem<tc::linear_tc_kernel<F, NT, RG, RAW, GRID>>(smem.limit)) return;                       \
    launch(tc::linear_tc_kernel<F, NT, RG, RAW, GRID>, grid, tc::kThreads, smem.bytes, m, groups,               \
           RAW ? nullptr : x4, RAW ? x : nullptr, tokens, nb, ks, seq, slices, pre, whole > 0);                    \
  }
#define DEEPINFER_TC_LINEAR(F)                        \
  if (raw) {                                          \
    DEEPINFER_TC_LINEAR_K(tc::raw_format(F), 1, 1, true, false) \
  } else if (nt == 4 && grid_kernel) {                \
    DEEPINFER_TC_LINEAR_K(F, 4, 1, false, true)       \
  } else if (nt == 4) {                               \
    DEEPINFER_TC_LINEAR_K(F, 4, 1, false, false)      \
  } else if (nt == 8 && rg == 2 && grid_kernel) {     \
    DEEPINFER_TC_LINEAR_K(F, 8, 2, false, true)       \
  } else if (nt == 8 && rg == 2) {                    \
    DEEPINFER_TC_LINEAR_K(F, 8, 2, false, false)      \
  } else if (nt == 8 && grid_kernel) {                \
    DEEPINFER_TC_LINEAR_K(F, 8, 1, false, true)       \
  } else if (nt == 8) {                               \
    DEEPINFER_TC_LINEAR_K(F, 8, 1, false, false)      \
  } else {                                            \
    DEEPINFER_TC_LINEAR_K(F, 1, 1, false, false)      \
  }
  DEEPINFER_TC_FORMATS(DEEPINFER_TC_LINEAR)
#undef DEEPINFER_TC_LINEAR
#undef DEEPINFER_TC_LINEAR_K
  if (slices && cudaPeekAtLastError() == cudaSuccess) {
    const int64_t n = tokens * m.cols;
    if (m.n == 1)
      launch(tc::sum_slices_kernel, blocks_for(n, 256), 256, 0, static_cast<const float*>(slices), ks, n, m.y[0]);
    else
      launch(tc::sum_slices_members_kernel, blocks_for(n, 256), 256, 0, static_cast<const float*>(slices), ks, tokens, m);
  }
}

}  // namespace

size_t tc_slice_bytes(int fmt, const DevMatrix& w, int64_t groups, int64_t tokens, const float* x) {
  const TcLinearTarget t{w, nullptr};
  return slice_bytes(fmt, members_of({&t, 1}), groups, tokens, x);
}

void launch_linear_tc(int fmt, const DevMatrix& w, int64_t groups, const float* x, void* xc, int64_t tokens, float* y,
                      float* part) {
  const TcLinearTarget t{w, y};
  run_linear_tc(fmt, members_of({&t, 1}), groups, x, xc, false, tokens, part);
}

size_t tc_linears_slice_bytes(int fmt, std::span<const TcLinearTarget> targets, int64_t tokens, const float* x) {
  return targets.empty() ? 0 : slice_bytes(fmt, members_of(targets), 1, tokens, x);
}

void launch_linears_tc(int fmt, std::span<const TcLinearTarget> targets, const float* x, void* xc, bool x_split,
                       int64_t tokens, float* part) {
  if (targets.empty()) return;
  run_linear_tc(fmt, members_of(targets), 1, x, xc, x_split, tokens, part);
}

bool tc_split_f16(int fmt) { return tc::f16_operands(fmt); }

int tc_moe_tile_rows(int64_t rows_per_expert) { return 8 * tc::tiles_for(rows_per_expert); }

namespace {

// How launch_moe_gemm_tc runs a call: the routed experts' tiles as always; the shared expert's
// identity rows under the grid split (tc_grid_split_wanted) as linear's.
Schedule plan_moe(bool swiglu, bool identity, int64_t n_out, int64_t K, int tile_rows, int64_t grid_tiles, bool raw,
                 bool routed) {
  Schedule p{};
  const int64_t nslab = (K + tc::kSlabK - 1) / tc::kSlabK;
  const int64_t rgroups = (n_out + tc::outs_per_group(swiglu) - 1) / tc::outs_per_group(swiglu);
  // Routed experts: split as if 8 experts ran at once (the shape alone decides).
  p.ks = tc::split_for(routed ? 8 * rgroups : rgroups, nslab);
  p.nt = tile_rows / 8;
  p.rg = p.nt == 8 ? tc::rows_per_warp() : 1;
  if (identity && tc_grid_split_wanted() && !raw && p.nt >= 4)
    choose_grid_split(p, (rgroups + tc::kWarps * p.rg - 1) / (tc::kWarps * p.rg) * grid_tiles);
  else
    p.seq = p.nt == 8 || p.ks == 1;
  settle_row_tiles(p, rgroups);
  return p;
}

}  // namespace

size_t tc_identity_slice_bytes(bool swiglu, int64_t rows, int tile_rows, const float* x, int64_t K, int64_t n_out) {
  if (rows <= 0 || n_out <= 0) return 0;
  const int64_t grid_tiles = (rows + tile_rows - 1) / tile_rows;
  const Schedule p = plan_moe(swiglu, true, n_out, K, tile_rows, grid_tiles, tc_reads_x(tile_rows, x), false);
  return p.grid_split ? static_cast<size_t>(p.ks * rows * (swiglu ? 2 : 1) * n_out) * sizeof(float) : 0;
}

void launch_moe_gemm_tc(bool swiglu, int fmt, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, int tile_rows,
                        const int32_t* row_src, const float* x, int64_t x_rows, void* xc, int64_t K, float* y,
                        int64_t n_out, float limit, bool routed, float* part) {
  if (grid_tiles <= 0 || n_out <= 0) return;
  const bool raw = tc_reads_x(tile_rows, x);
  const Schedule p = plan_moe(swiglu, tiles == nullptr, n_out, K, tile_rows, grid_tiles, raw, routed);
  if (p.grid_split && !part) return;  // (tc_identity_slice_bytes gave the caller its size)
  if (raw) fmt = tc::raw_format(fmt);
  const int ks = p.ks, nt = p.nt, rg = p.rg;
  const bool seq = p.seq, grid_kernel = p.grid_kernel;
  float* slices = p.grid_split ? part : nullptr;
  const dim3 grid(static_cast<unsigned>(grid_tiles), static_cast<unsigned>(p.row_tiles),
                  static_cast<unsigned>(p.grid_split ? ks : 1));
  if (!raw) {
    split_x_for(fmt, x, x_rows, 1, K, xc);
    if (cudaPeekAtLastError() != cudaSuccess) return;
  }
  const auto* x4 = static_cast<const uint4*>(xc);
  const int64_t whole = slices ? whole_slice_pieces(fmt, nt, K, ks) : 0;
#define DEEPINFER_TC_MOE_K(F, S, NT, RG, RAW, GRID)                                                                 \
  {                                                                                                                 \
    const StageSmem smem = stage_smem<F, NT, GRID || tc::stages_by_default(NT, RG, RAW), GRID>(whole);              \
    if (!allow_dynamic_smem<tc::moe_tc_kernel<F, S, NT, RG, RAW, GRID>>(smem.limit)) return;                         \
    launch(tc::moe_tc_kernel<F, S, NT, RG, RAW, GRID>, grid, tc::kThreads, smem.bytes, wa, wb, tiles, tile_count, \
           identity_rows, row_src, x4, x_rows, x, K, y, n_out, limit, ks, seq, slices, whole > 0);                  \
  }
#define DEEPINFER_TC_MOE_S(F, S)                       \
  if (raw) {                                           \
    DEEPINFER_TC_MOE_K(tc::raw_format(F), S, 1, 1, true, false) \
  } else if (nt == 4 && grid_kernel) {                 \
    DEEPINFER_TC_MOE_K(F, S, 4, 1, false, true)        \
  } else if (nt == 4) {                                \
    DEEPINFER_TC_MOE_K(F, S, 4, 1, false, false)       \
  } else if (nt == 8 && rg == 2 && grid_kernel) {      \
    DEEPINFER_TC_MOE_K(F, S, 8, 2, false, true)        \
  } else if (nt == 8 && rg == 2) {                     \
    DEEPINFER_TC_MOE_K(F, S, 8, 2, false, false)       \
  } else if (nt == 8 && grid_kernel) {                 \
    DEEPINFER_TC_MOE_K(F, S, 8, 1, false, true)        \
  } else if (nt == 8) {                                \
    DEEPINFER_TC_MOE_K(F, S, 8, 1, false, false)       \
  } else {                                             \
    DEEPINFER_TC_MOE_K(F, S, 1, 1, false, false)       \
  }
#define DEEPINFER_TC_MOE(F)         \
  if (swiglu) {                     \
    DEEPINFER_TC_MOE_S(F, true)     \
  } else {                          \
    DEEPINFER_TC_MOE_S(F, false)    \
  }
  DEEPINFER_TC_FORMATS(DEEPINFER_TC_MOE)
#undef DEEPINFER_TC_MOE
#undef DEEPINFER_TC_MOE_S
#undef DEEPINFER_TC_MOE_K
  if (slices && cudaPeekAtLastError() == cudaSuccess) {
    const int64_t n = identity_rows * n_out;
    if (swiglu)
      launch(tc::sum_slices_swiglu_kernel, blocks_for(n, 256), 256, 0, static_cast<const float*>(slices), ks,
             identity_rows, n_out, limit, y);
    else
      launch(tc::sum_slices_kernel, blocks_for(n, 256), 256, 0, static_cast<const float*>(slices), ks, n, y);
  }
}

#undef DEEPINFER_TC_FORMATS

}  // namespace deepinfer::cuda
