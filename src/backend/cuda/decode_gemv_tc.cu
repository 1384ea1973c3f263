// The decode GEMV (1-2 rows) of FP8 block-scaled weights on the tensor cores: the default mode's
// kernel for linear / grouped_linear and the shared expert (SwiGLU gate / up, then down) at batch
// 1-2 (gemm_kernels.h says when it runs).
//
// Why: a decode GEMV streams each weight byte once, so it should run at memory bandwidth. The
// CUDA-core tile (skinny_gemm.cuh) widens every FP8 element to float32, scales it and spends an FMA
// on it: ~3.5 instructions an element, which caps it at ~1.7 TB/s on the H200 (docs/perf.md,
// session 16). Here an element costs half a conversion (the hardware e4m3x2 -> f16x2) and 1/256 of
// an mma.sync.m16n8k16: the instruction stream no longer bounds the kernel.
//
// Operands ("swap AB": the weight is A, the tokens are the 8 columns of B):
//  - A: a warp's 16 weight rows (lane (g, t) = (lane / 4, lane % 4) reads rows g and g + 8, 16
//    bytes at column 16 t of each 64-column step), e4m3 widened exactly to f16. Under SwiGLU rows
//    g are gate rows and rows g + 8 the same outputs' up rows, so a warp makes 8 outputs.
//  - B: x split into three f16 parts per token (hi + mid + lo: 33 significant bits, so the parts
//    sum to x as exactly as float32 holds it), each 128-column block of x scaled by a power of two
//    that puts its largest magnitude in [2^14, 2^15) (f16 has 5 exponent bits). Columns 3 tok + p
//    of B are part p of token tok; columns 3 TOK .. 7 are zero.
//  - MMA j (0..3) of a step takes columns 16 t + 4 j .. + 3 from lane t in both A and B, so every
//    A fragment is a word of the lane's 16-byte load and the B fragments are two 16-byte reads of
//    the x planes in shared memory (split once per CTA and group, before the weights are used).
//  - Each 64-column step's sums start from zero and are added to the running sums times the
//    weight's block scale and the x block's power of two (in float32), so FP8 blocks of 64
//    columns or more (powers of two) and 16-row multiples are what it takes.
// Rounding: products are exact; the MMA adds in float32; x's parts are added per output as
// (hi + mid) + lo. Not the CUDA-core tile's order, so not its bits: batch invariance keeps that tile.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/launch_control.h"
#include "backend/cuda/mma_async.cuh"
#include "backend/cuda/skinny_gemm.cuh"  // scale_at / scale_row / block_shift / word_of: the FP8 scale lookup

namespace deepinfer::cuda {

namespace {

namespace dg {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kTileRows = 16;           // weight rows of a warp (the MMA's M)
constexpr int64_t kStepK = 64;          // columns of one step: 16 per lane t
constexpr int64_t kPairK = 2 * kStepK;  // columns of a loop iteration (the x exponent block too)
constexpr int kPlanePad = 8;            // f16 after each x plane: planes start 16 bytes apart in the bank cycle
constexpr int kTargetWarps = 2 * 132 * kWarps;  // split K until a shape keeps about this many warps busy
constexpr int kStages = 4;  // a warp's pairs in flight + 1: the copies land in shared memory (cp.async)
constexpr int64_t kMinJobs = 128;  // fewer CTAs than this: the CUDA-core tile is faster (docs/perf.md)
// A stage: every lane's pair (4 16-byte pieces) and its scale words (4: steps 0 / 1 x gate / up).
constexpr size_t kStageBytes = static_cast<size_t>(kWarps) * 32 * (64 + 16);
constexpr size_t kMaxSmem = 200 * 1024;

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"  // launch() folds the argument bytes into the step signature
struct Args {
  DevMatrix w, wu;  // wu: SwiGLU's up projection (rows g + 8 of a tile), else unused
  const float* x;   // [tokens, groups * K]
  float* y;         // [tokens, groups * R]
  int64_t groups, R, K;
  int64_t jobs_per_group;  // column tiles of kTileRows * (kWarps / ks) rows in a group
  int64_t jobs;            // groups * jobs_per_group
  int32_t ks;              // warps that split a tile's K (1, 2, 4 or 8)
  float limit;             // SwiGLU's clamp
  int32_t prefetch_bytes;  // of each row of a CTA's first job, asked of the L2 before the wait
  int32_t unused;
};
// Outputs of a warp tile: 16 rows, or under SwiGLU 8 outputs (gate rows g, up rows g + 8).
template <bool kSwiglu>
__host__ __device__ constexpr int tile_outs() { return kSwiglu ? kTileRows / 2 : kTileRows; }
#pragma GCC diagnostic pop

__host__ __device__ constexpr int64_t padded_k(int64_t K) { return (K + kPairK - 1) / kPairK * kPairK; }
__host__ __device__ constexpr int64_t plane_stride(int64_t K) { return padded_k(K) + kPlanePad; }
// Dynamic shared memory: the weight stages, 3 TOK f16 planes of x, then the x blocks' powers of
// two [TOK][blocks].
__host__ __device__ constexpr size_t planes_offset() { return kStages * kStageBytes; }
__host__ __device__ constexpr size_t smem_bytes(int tok, int64_t K) {
  return planes_offset() + static_cast<size_t>(3 * tok * plane_stride(K)) * 2 +
         static_cast<size_t>(tok * (padded_k(K) / kPairK)) * 4;
}

__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

using mma::copies_commit;
using mma::copies_wait;
using mma::copy16_async;
using mma::copy4_async;
using mma::mma_f16;
using mma::pack_f16;

// x of group `group` into the planes: warp w takes 128-column blocks w, w + 8, ...; lane l its
// columns 4 l .. 4 l + 3, each block scaled by 2^-e for its largest magnitude
// (mma::f16_block_exponent) and split into three f16 parts (mma::split3_f16).
template <int TOK>
__device__ void split_x(const Args& a, int64_t group, __half* planes, float* block_scale) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t K = a.K, stride = plane_stride(K), nblocks = padded_k(K) / kPairK;
  constexpr int kBatch = 8;  // blocks a warp loads at once (their loads in flight together)
  for (int tok = 0; tok < TOK; ++tok) {
    const float* xr = a.x + tok * a.groups * K + group * K;
    for (int64_t base = warp; base < nblocks; base += kBatch * kWarps) {
      float4 v[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int64_t k = (base + i * kWarps) * kPairK + 4 * lane;
        v[i] = k < K ? *reinterpret_cast<const float4*>(xr + k) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int64_t blk = base + i * kWarps, k = blk * kPairK + 4 * lane;
        if (blk >= nblocks) break;
        float m = fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
        const int e = mma::f16_block_exponent(m);
        const float to_f16 = mma::pow2f(-e);
        if (lane == 0) block_scale[tok * nblocks + blk] = mma::pow2f(e);
        const float xs[4] = {v[i].x * to_f16, v[i].y * to_f16, v[i].z * to_f16, v[i].w * to_f16};
        __half part[3][4];
#pragma unroll
        for (int q = 0; q < 4; ++q) mma::split3_f16(xs[q], part[0][q], part[1][q], part[2][q]);
#pragma unroll
        for (int p = 0; p < 3; ++p)
          *reinterpret_cast<uint2*>(planes + (3 * tok + p) * stride + k) =
              make_uint2(pack_f16(part[p][0], part[p][1]), pack_f16(part[p][2], part[p][3]));
      }
    }
  }
  __syncthreads();
}

// The rows of the CTA's first job (of w, or with `up` of SwiGLU's wu), the first a.prefetch_bytes
// of each: what its warps read first (pairs ksi < ks of each row), for the L2 before the wait.
template <bool kSwiglu>
__device__ __forceinline__ L2Rows first_job_rows(const Args& a, bool up) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * a.jobs / gridDim.x;
  if ((up && !kSwiglu) || a.prefetch_bytes == 0 || b >= static_cast<int64_t>(blockIdx.x + 1) * a.jobs / gridDim.x)
    return L2Rows{};
  const int64_t n = tile_outs<kSwiglu>() * (kWarps / a.ks), o = (b % a.jobs_per_group) * n;
  const DevMatrix& m = up ? a.wu : a.w;
  return L2Rows{m.data + ((b / a.jobs_per_group) * a.R + o) * a.K, a.K, static_cast<int32_t>(min(n, a.R - o)),
                a.prefetch_bytes};
}

// grid: resident CTAs, each taking a contiguous run of jobs. A job: column tile ct of group grp;
// warp (tile, ksi) = (warp / ks, warp % ks) takes its 16 rows and the pairs ksi, ksi + ks, ...;
// the next kStages - 1 pairs' copies (in this job or the next) are in flight during a pair's MMAs
// (a decode GEMV is bound by the bytes in flight: ~96 KB an SM here).
template <int TOK, bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 2) decode_gemv_fp8_kernel(Args a) {
  wait_for_previous_kernel(first_job_rows<kSwiglu>(a, false), first_job_rows<kSwiglu>(a, true));
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float4 red[kWarps][32];
  constexpr int P = 3 * TOK;  // B columns in use
  const int64_t K = a.K, stride = plane_stride(K), npairs = padded_k(K) / kPairK;
  __half* planes = reinterpret_cast<__half*>(smem + planes_offset());
  float* block_scale = reinterpret_cast<float*>(smem + planes_offset() + static_cast<size_t>(3 * TOK * stride) * 2);

  const int64_t b_first = static_cast<int64_t>(blockIdx.x) * a.jobs / gridDim.x;
  const int64_t b_end = static_cast<int64_t>(blockIdx.x + 1) * a.jobs / gridDim.x;
  if (b_first >= b_end) return;  // whole CTA

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ks = a.ks, ksi = warp % ks, tile = warp / ks, tiles = kWarps / ks;
  const DevMatrix& w = a.w;
  const int bshift = skinny::block_shift<skinny::kF8>(w), bshift_u = skinny::block_shift<skinny::kF8>(a.wu);
  constexpr int kOuts = tile_outs<kSwiglu>();

  // Row 0 of the warp's tile in job b (a tile past R reads the group's last tile, never stored).
  auto tile_row = [&](int64_t b) {
    const int64_t grp = b / a.jobs_per_group, o = (b % a.jobs_per_group) * kOuts * tiles + tile * kOuts;
    return grp * a.R + (o < a.R ? o : a.R - kOuts);
  };
  // Stage st of this lane: its 4 16-byte pieces (rows g, g + 8 of step 0, then of step 1), piece
  // j of all the warp's lanes side by side (conflict-free 16-byte accesses). Each lane reads only
  // what it copied itself, so its own cp.async waits are all the ordering needed.
  auto piece = [&](int st, int j) {
    return reinterpret_cast<uint4*>(smem + st * kStageBytes + ((warp * 4 + j) * 32 + lane) * 16);
  };
  auto scale_words = [&](int st) {
    return reinterpret_cast<uint4*>(smem + st * kStageBytes + (kWarps * 4 * 32 + warp * 32 + lane) * 16);
  };
  // Weight m's block-scale index at (row block srow_m, column k); copied as the 4-byte word that
  // holds it (E8M0 bytes: the aligned word, launch_decode_gemv_tc checks the array's alignment).
  auto scale_src = [&](const DevMatrix& m, int64_t srow_m, int64_t k, int bsh) -> const void* {
    const int64_t i = srow_m + (k >> bsh);
    return m.scale_dtype == 4 ? static_cast<const void*>(m.scale + (i & ~int64_t{3}))
                              : static_cast<const void*>(m.scale + 4 * i);
  };
  auto scale_of = [&](const DevMatrix& m, int64_t srow_m, int64_t k, int bsh, uint32_t word) {
    if (!m.scale) return 1.0f;
    if (m.scale_dtype != 4) return __uint_as_float(word);
    const int64_t i = srow_m + (k >> bsh);
    return e8m0_to_f32(static_cast<uint8_t>(word >> (8 * (i & 3))));
  };
  auto copy_pair = [&](int64_t row0, int64_t srow_w, int64_t srow_wu, int64_t sp, int st) {
    const uint8_t* p0 = w.data + (row0 + g) * K;
    const uint8_t* p1 = kSwiglu ? a.wu.data + (row0 + g) * K : p0 + 8 * K;
    uint32_t* sw = reinterpret_cast<uint32_t*>(scale_words(st));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t k0 = sp * kPairK + h * kStepK, k = k0 + 16 * t;
      const bool in = k < K;
      copy16_async(piece(st, 2 * h), in ? p0 + k : p0, in);
      copy16_async(piece(st, 2 * h + 1), in ? p1 + k : p1, in);
      if (w.scale && k0 < K) copy4_async(sw + 2 * h, scale_src(w, srow_w, k0, bshift));
      if (kSwiglu && a.wu.scale && k0 < K) copy4_async(sw + 2 * h + 1, scale_src(a.wu, srow_wu, k0, bshift_u));
    }
  };

  // The warp's items: pair ksi + i ks (i < per_job) of each job in turn, through the stages in turn.
  // Issued (ib, ii) and consumed (cb, ci) positions are counted, not divided out of an item number.
  const int per_job = static_cast<int>((npairs - ksi + ks - 1) / ks);
  int64_t ib = b_first, irow = 0, isrow = 0, isrow_u = 0;
  auto issue_job = [&]() {
    irow = tile_row(ib);
    isrow = skinny::scale_row<skinny::kF8>(w, irow);
    isrow_u = kSwiglu ? skinny::scale_row<skinny::kF8>(a.wu, irow) : isrow;
  };
  issue_job();
  int ii = 0, ist = 0;
  auto issue = [&]() {
    if (ib < b_end) copy_pair(irow, isrow, isrow_u, ksi + static_cast<int64_t>(ii) * ks, ist);
    copies_commit();  // (an empty group past the end keeps the count)
    ist = ist + 1 == kStages ? 0 : ist + 1;
    if (++ii == per_job) {
      ii = 0;
      if (++ib < b_end) issue_job();
    }
  };
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) issue();  // in flight while x is split
  int64_t group = b_first / a.jobs_per_group;
  split_x<TOK>(a, group, planes, block_scale);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
  // The token of B column c (columns past 3 TOK are zero: any scale).
  const int tok0 = min((2 * t) / 3, TOK - 1), tok1 = min((2 * t + 1) / 3, TOK - 1);

  // The oldest item's MMAs into acc; after a job's last item, its outputs.
  int64_t cb = b_first, row0 = tile_row(b_first);
  int ci = 0, cst = 0;
  int64_t srow = skinny::scale_row<skinny::kF8>(w, row0);
  int64_t srow_u = kSwiglu ? skinny::scale_row<skinny::kF8>(a.wu, row0) : srow;
  auto consume = [&]() {
    uint4 cur[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) cur[j] = *piece(cst, j);
    const uint4 words = *scale_words(cst);
    cst = cst + 1 == kStages ? 0 : cst + 1;
    const int64_t b = cb, sp = ksi + static_cast<int64_t>(ci) * ks;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t k0 = sp * kPairK + h * kStepK;
      if (k0 >= K) break;  // (the last pair of an odd number of steps)
      const float sw = scale_of(w, srow, k0, bshift, h == 0 ? words.x : words.z);  // rows g (and g + 8 unless SwiGLU)
      const float su = kSwiglu ? scale_of(a.wu, srow_u, k0, bshift_u, h == 0 ? words.y : words.w) : sw;
      uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
      if (g < P) {
        const uint4* xp = reinterpret_cast<const uint4*>(planes + g * stride + k0 + 16 * t);
        xa = xp[0];
        xb = xp[1];
      }
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t w0 = skinny::word_of(cur[2 * h], j), w1 = skinny::word_of(cur[2 * h + 1], j);
        const uint4& xw = j < 2 ? xa : xb;
        mma_f16(c, e4m3x2_to_f16x2(w0), e4m3x2_to_f16x2(w1), e4m3x2_to_f16x2(w0 >> 16), e4m3x2_to_f16x2(w1 >> 16),
                skinny::word_of(xw, 2 * (j & 1)), skinny::word_of(xw, 2 * (j & 1) + 1));
      }
      const float s0 = block_scale[tok0 * npairs + sp], s1 = block_scale[tok1 * npairs + sp];  // the pair's x block
      acc[0] = fmaf(c[0] * s0, sw, acc[0]);
      acc[1] = fmaf(c[1] * s1, sw, acc[1]);
      acc[2] = fmaf(c[2] * s0, su, acc[2]);
      acc[3] = fmaf(c[3] * s1, su, acc[3]);
    }
    if (++ci < per_job) return;
    ci = 0;
    // The ks partial sums of each tile in ascending order, then (hi + mid) + lo per output.
    red[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = 0.f;
    __syncthreads();
    const int th = static_cast<int>(threadIdx.x);
    if (th < tiles * kOuts * TOK) {
      const int tl = th / (kOuts * TOK), r = (th / TOK) % kOuts, tok = th % TOK;
      auto row_sum = [&](int rr) { return mma::tile_row_sum(&red[0][0], kWarps, tl, ks, rr, tok); };
      float out = row_sum(r);
      if constexpr (kSwiglu) out = skinny::swiglu_clamped(out, row_sum(r + 8), a.limit);
      const int64_t grp = b / a.jobs_per_group;
      const int64_t o = (b % a.jobs_per_group) * kOuts * tiles + tl * kOuts + r;
      if (o < a.R) a.y[tok * a.groups * a.R + grp * a.R + o] = out;
    }
    __syncthreads();  // red is written again by the next job
    if (++cb < b_end) {
      row0 = tile_row(cb);
      srow = skinny::scale_row<skinny::kF8>(w, row0);
      srow_u = kSwiglu ? skinny::scale_row<skinny::kF8>(a.wu, row0) : srow;
      if (cb / a.jobs_per_group != group) {
        group = cb / a.jobs_per_group;
        split_x<TOK>(a, group, planes, block_scale);
      }
    }
  };

#pragma unroll 1
  while (cb < b_end) {
    issue();
    copies_wait<kStages - 1>();  // the oldest item's copies have landed
    consume();
  }
}

// A launch's shape: the split, jobs, and CTAs an SM (registers allow 2: the launch bounds).
struct Plan {
  int ks = 1;
  int64_t jobs_per_group = 0, jobs = 0;
  int per_sm = 1;
};
Plan plan(int64_t groups, int64_t R, int64_t K, int64_t tokens, int outs) {
  // Split K (from the shape only) until the tiles x splits keep about kTargetWarps warps busy,
  // with at least 4 pairs a warp.
  Plan p;
  const int64_t tiles = groups * (R / outs), npairs = padded_k(K) / kPairK;
  while (p.ks < kWarps && 4 * p.ks <= npairs && tiles * p.ks * 2 <= kTargetWarps) p.ks *= 2;
  const int64_t rows_per_job = outs * (kWarps / p.ks);
  p.jobs_per_group = (R + rows_per_job - 1) / rows_per_job;
  p.jobs = groups * p.jobs_per_group;
  const size_t cta = smem_bytes(static_cast<int>(tokens), K) + sizeof(float4) * kWarps * 32 + 1024;  // + static, reserved
  p.per_sm = 2 * cta <= device_smem_per_sm() ? 2 : 1;
  return p;
}

}  // namespace dg

}  // namespace

namespace {

// Whether matrix w (rows R a group, `outs`-row tiles) fits the kernel.
bool fits(const DevMatrix& w, int64_t groups, int64_t outs) {
  if (groups < 1 || w.rows % groups != 0 || gemm_format(w) != skinny::kF8) return false;  // 16-byte rows, pow2 blocks
  const int64_t R = w.rows / groups;
  if (R < outs || R % outs != 0 || w.cols <= 0) return false;
  // Scales: blocks of >= 64 columns; E8M0 / F32 arrays 4-byte aligned (copied by the word).
  return !w.scale || (w.block_cols >= dg::kStepK && w.block_rows % outs == 0 &&
                      reinterpret_cast<uintptr_t>(w.scale) % 4 == 0);
}

bool x_fits(const float* x, int64_t groups, int64_t K, int64_t tokens) {
  return tokens >= 1 && tokens <= 2 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && (groups * K) % 4 == 0 &&
         dg::smem_bytes(static_cast<int>(tokens), K) <= dg::kMaxSmem;
}

// Where the kernel beats the CUDA-core tile (H200, docs/perf.md): enough CTAs to fill the device
// (small matrices pay its x split and job setup), two CTAs an SM (one leaves too few loads in flight).
// DEEPINFER_DECODE_GEMV (read once): 0 never, 1 wherever the call fits (the tests), unset / auto
// where worth_it.
TcPolicy decode_gemv_policy() {
  static const TcPolicy p = policy_from_env("DEEPINFER_DECODE_GEMV");
  return p;
}
bool worth_it(const dg::Plan& p) {
  switch (decode_gemv_policy()) {
    case TcPolicy::Never: return false;
    case TcPolicy::Always: return true;
    default: return p.jobs >= dg::kMinJobs && p.per_sm == 2;
  }
}

// Plans the call and launches it where worth_it; false (nothing launched) otherwise.
template <bool kSwiglu>
bool launch_gemv(dg::Args a, int64_t tokens) {
  const dg::Plan p = dg::plan(a.groups, a.R, a.K, tokens, dg::tile_outs<kSwiglu>());
  if (!worth_it(p)) return false;
  a.ks = p.ks;
  a.jobs_per_group = p.jobs_per_group;
  a.jobs = p.jobs;
  const size_t smem = dg::smem_bytes(static_cast<int>(tokens), a.K);
  const auto grid = static_cast<unsigned>(std::min<int64_t>(a.jobs, static_cast<int64_t>(device_sm_count()) * p.per_sm));
  const int64_t job_rows = dg::tile_outs<kSwiglu>() * (dg::kWarps / p.ks) * (kSwiglu ? 2 : 1);
  a.prefetch_bytes = l2_prefetch_row_bytes(job_rows, a.K, grid);
  // A refused shared-memory size stays in cudaGetLastError for the caller's launch check.
  if (tokens == 1) {
    if (allow_dynamic_smem<dg::decode_gemv_fp8_kernel<1, kSwiglu>>(dg::kMaxSmem))
      launch(dg::decode_gemv_fp8_kernel<1, kSwiglu>, grid, dg::kThreads, smem, a);
  } else {
    if (allow_dynamic_smem<dg::decode_gemv_fp8_kernel<2, kSwiglu>>(dg::kMaxSmem))
      launch(dg::decode_gemv_fp8_kernel<2, kSwiglu>, grid, dg::kThreads, smem, a);
  }
  return true;
}

}  // namespace

bool launch_decode_gemv_tc(const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y) {
  if (!fits(w, groups, dg::tile_outs<false>()) || !x_fits(x, groups, w.cols, tokens)) return false;
  dg::Args a{};
  a.w = a.wu = w;
  a.x = x;
  a.y = y;
  a.groups = groups;
  a.R = w.rows / groups;
  a.K = w.cols;
  return launch_gemv<false>(a, tokens);
}

bool launch_decode_swiglu_tc(const DevMatrix& w1, const DevMatrix& w3, const float* x, int64_t tokens, float limit,
                             float* h) {
  if (w1.rows != w3.rows || w1.cols != w3.cols || !fits(w1, 1, dg::tile_outs<true>()) ||
      !fits(w3, 1, dg::tile_outs<true>()) || !x_fits(x, 1, w1.cols, tokens))
    return false;
  dg::Args a{};
  a.w = w1;
  a.wu = w3;
  a.x = x;
  a.y = h;
  a.groups = 1;
  a.R = w1.rows;
  a.K = w1.cols;
  a.limit = limit;
  return launch_gemv<true>(a, tokens);
}

}  // namespace deepinfer::cuda
