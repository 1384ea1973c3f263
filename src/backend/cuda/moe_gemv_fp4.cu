// The routed FP4 experts of a decode step (MoE tiles of up to 2 or 4 rows) on the tensor cores:
// gate / up with the SwiGLU epilogue, then down. The default from 2 tokens a call
// (moe_gemv_fp4_wanted, gemm_kernels.h).
//
// Why: the CUDA-core stream spends ~5 issued instructions on every FP4 element (decode, widen,
// scale, FMA) and is issue-bound at ~1 TB/s (docs/perf.md, sessions 7 and 20). Here an element costs
// half of a 4-operation f16x2 decode (fp4_bits.h) and 1/256 of an mma.sync.m16n8k16; each 32-column
// block's scale is applied once per row to the block's sums.
//
// Operands (as decode_gemv_tc.cu's FP8 GEMV, "swap AB"): A = a warp's 16 weight rows (under SwiGLU
// rows g are gate rows and rows g + 8 the same outputs' up rows), B = x split into P f16 parts per
// token (each 128-column step scaled by a power of two for f16's range), columns P tok + p: by
// default P = 2 (hi + lo, 22 bits of x: 4 tokens fill one MMA's 8 columns, and the smaller planes
// let 2 CTAs share an SM at 4 tokens; ncu, H100, batch 128: 3 parts at 1 CTA an SM streamed 1.2
// TB/s), P = 3 (hi + mid + lo: x exactly as float32 holds it) with DEEPINFER_MOE_GEMV_X_PARTS=3.
// Lane (g, t) copies block t of a 128-column step of rows g and g + 8 into shared memory (16 bytes
// each, cp.async) and reads word t of all four blocks back (fp4_bits.h: which codes feed
// which fragment slots; Fp4Bits.MmaFragmentsOfABlockGiveItsDotProducts checks the layout on the
// host). A row's 4 blocks sit side by side as in global memory, block b at slot b ^ (g / 2), so
// that both the copies and the reads of 32 lanes hit 32 distinct banks. The rows' E8M0 scale words
// come 8 steps at a time (a whole 32-byte sector a row; one word a step cost the L2 a sector each:
// ncu, H100, batch 128, the L2 the busiest unit at 80%; docs/perf.md, session 25). Weights enter
// as value * 2^-14; the outputs are multiplied by 2^14 at the end (exact).
// Rounding: products exact, sums in float32 per block, block sums times the E8M0 scale added per
// step, then times the x step's power of two; parts added (hi + mid) + lo, or hi + lo. Not the
// CUDA-core tile's bits: batch invariance keeps that tile.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp4_bits.h"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/launch_control.h"
#include "backend/cuda/mma_async.cuh"
#include "backend/cuda/skinny_gemm.cuh"  // swiglu_clamped: the SwiGLU epilogue of every kernel

namespace deepinfer::cuda {

namespace {

namespace mg {

using mma::copies_commit;
using mma::copies_wait;
using mma::copy16_async;
using mma::copy4_async;
using mma::mma_f16;
using mma::pack_f16;

// Warps of a CTA: 8 (two CTAs an SM) for tiles of 2 or 4 tokens; 16 for 8, whose x planes leave
// one CTA an SM.
template <int TOK>
__host__ __device__ constexpr int warps() { return TOK == 8 ? 16 : 8; }
template <int TOK>
__host__ __device__ constexpr int threads() { return 32 * warps<TOK>(); }
constexpr int kTileRows = 16;     // weight rows of a warp (the MMA's M)
constexpr int64_t kStepK = 128;   // columns of a step: 4 scale blocks, one x power of two
constexpr int kPlanePad = 32;     // f16 after each x plane: 16-byte reads of planes g, g + 1 miss each other's banks
// A warp's stage: 2 pieces (rows g, g + 8) of 16 bytes a lane.
constexpr size_t kWarpStageBytes = 2 * 32 * 16;
template <int TOK>
__host__ __device__ constexpr size_t stage_bytes() { return warps<TOK>() * kWarpStageBytes; }
constexpr int kWindow = 8, kWindowRowWords = kWindow + 1;
// Tiles of 2 tokens also decode each window once into float32 scales ([row][step][block], rows
// kF32RowFloats apart: the 8 rows read at a step fall in distinct banks), which the steps read as
// two float4s: each lane decoded its rows' 8 scales every step before (~45 of the ~250
// instructions a step: docs/perf.md session 27), the 4 lanes of a row the same ones (session 28:
// ~250 -> 234 instructions a step, the B=32 GEMV 3.77 -> 3.59 ms, decode B=32 -3%). 2.3 KB a warp,
// which tiles of 4 and 8 tokens (two CTAs, or 16 warps, an SM) and 3 parts of x have no room for.
template <int TOK, int P>
__host__ __device__ constexpr bool f32_window() { return TOK == 2 && P == 2; }
constexpr int kF32RowFloats = 4 * kWindow + 4;
constexpr size_t kWarpF32WindowBytes = kTileRows * kF32RowFloats * 4;
// Tiles of 8 tokens (x in 2 parts) decode each window once too, into bf16 scales (the E8M0 values
// are exactly bf16's: a power of two, 2^-127 subnormal, NaN), [row][step][block] with rows
// kBf16RowBytes apart (LDS.64 of rows g = 0..7 in distinct banks): 1.1 KB a warp, which their
// shared memory holds once the raw words keep one window instead of two (the window is decoded at
// its first step, the next one's words are copied kStages - 1 steps before its own first step).
template <int TOK, int P>
__host__ __device__ constexpr bool bf16_window() { return TOK == 8 && P == 2; }
constexpr int kBf16RowBytes = 8 * kWindow + 8;
constexpr size_t kWarpBf16WindowBytes = kTileRows * kBf16RowBytes;
// A warp's raw scale windows: 2 (one read while the next lands; 1 with bf16 windows) of kWindow
// steps' words for its 16 rows, kWindow + 1 words a row (rows g = 0..7 read at step s then fall in
// distinct banks).
template <int TOK, int P>
__host__ __device__ constexpr int raw_windows() { return bf16_window<TOK, P>() ? 1 : 2; }
template <int TOK, int P>
__host__ __device__ constexpr size_t warp_scale_bytes() {
  return raw_windows<TOK, P>() * kTileRows * kWindowRowWords * 4;
}
template <int TOK, int P>
__host__ __device__ constexpr size_t scale_bytes() { return warps<TOK>() * warp_scale_bytes<TOK, P>(); }
// The decoded windows (f32 or bf16), after the raw ones.
template <int TOK, int P>
__host__ __device__ constexpr size_t decoded_window_bytes() {
  return warps<TOK>() * (f32_window<TOK, P>() ? kWarpF32WindowBytes : bf16_window<TOK, P>() ? kWarpBf16WindowBytes : 0);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"  // launch() folds the argument bytes into the step signature
struct Args {
  const DevMatrix* wa;       // [experts]: gate (SwiGLU) or down
  const DevMatrix* wb;       // [experts]: up (SwiGLU), else wa
  const MoeTile* tiles;      // the plan's tiles (at most TOK rows each)
  const int32_t* tile_count; // how many
  const int32_t* row_src;    // x row of each routed row (null: the row itself)
  const float* x;            // [*, K]
  float* y;                  // [routed rows, n_out]
  int64_t K, n_out;
  int64_t ncol;              // column tiles of a MoE tile: kOuts * (warps / ks) outputs each
  int32_t ks;                // warps that split a warp tile's K (1, 2, 4 or 8)
  float limit;               // SwiGLU's clamp
  int32_t skip_empty_groups; // 1: no MMAs for column groups past a tile's rows (moe_gemv_skip_empty_groups)
  int32_t unused;
};
#pragma GCC diagnostic pop

// Outputs of a warp tile: 16 rows, or under SwiGLU 8 outputs (gate rows g, up rows g + 8).
template <bool kSwiglu>
__host__ __device__ constexpr int tile_outs() { return kSwiglu ? kTileRows / 2 : kTileRows; }

// Tokens of a tile TOK (2 or 4), parts of x P (2 or 3): B columns P tok + p in groups of 8 (one MMA
// each, sharing the A fragments); a warp's steps in flight + 1 (more where the planes leave one CTA
// an SM: 4 tokens in 3 parts).
template <int TOK, int P>
__host__ __device__ constexpr int column_groups() { return (P * TOK + 7) / 8; }
template <int TOK, int P>
__host__ __device__ constexpr int stages() { return TOK == 8 ? 3 : TOK > 2 && P == 3 ? 8 : 4; }
// Dynamic shared memory a kernel may take: the 227 KB a block may hold less its static reduction
// space (float4 red[G][warps][32]: 16 KB for 8 tokens in 2 parts, 24 KB in 3).
template <int TOK, int P>
__host__ __device__ constexpr size_t max_smem() {
  return 227 * 1024 - 16 * static_cast<size_t>(column_groups<TOK, P>()) * warps<TOK>() * 32;
}

__host__ __device__ constexpr int64_t plane_stride(int64_t K) { return K + kPlanePad; }
// Dynamic shared memory: the weight stages, the scale windows (and their float32 form), P TOK f16
// planes of x, then the steps' powers of two [TOK][K / 128].
template <int TOK, int P>
__host__ __device__ constexpr size_t planes_offset() {
  return stages<TOK, P>() * stage_bytes<TOK>() + scale_bytes<TOK, P>() + decoded_window_bytes<TOK, P>();
}
template <int TOK, int P>
__host__ __device__ constexpr size_t smem_bytes(int64_t K) {
  return planes_offset<TOK, P>() + static_cast<size_t>(P * TOK * plane_stride(K)) * 2 +
         static_cast<size_t>(TOK * (K / kStepK)) * 4;
}

// The tile's x rows into the planes: half-warp h of warp w takes steps 2 w + h, + 16, ...; lane l
// of it columns 8 l .. 8 l + 7 of the step, stored in f4_mma_x_position order. The step's largest
// magnitude sets its power of two (mma::f16_block_exponent), as in decode_gemv_tc.cu's split_x. Rows past
// `rows` get no planes: their B columns read stale ones, whose sums are never stored.
template <int TOK, int P>
__device__ void split_x(const Args& a, int64_t rb, int rows, __half* planes, float* step_scale) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int half = lane >> 4, hl = lane & 15;
  const int64_t K = a.K, stride = plane_stride(K), nsteps = K / kStepK;
  for (int tok = 0; tok < TOK; ++tok) {
    if (tok >= rows) {  // no planes (their B columns read stale ones, never stored); a finite scale
      for (int64_t st = threadIdx.x; st < nsteps; st += threads<TOK>()) step_scale[tok * nsteps + st] = 1.0f;
      continue;
    }
    const float* xr = a.x + (a.row_src ? static_cast<int64_t>(a.row_src[rb + tok]) : rb + tok) * K;
    for (int64_t base = 0; base < nsteps; base += 2 * warps<TOK>()) {  // uniform over the warp: the shuffles
      const int64_t st = base + 2 * warp + half;
      const bool in = st < nsteps;
      float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      if (in) {
        const float4 p = *reinterpret_cast<const float4*>(xr + st * kStepK + 8 * hl);
        const float4 q = *reinterpret_cast<const float4*>(xr + st * kStepK + 8 * hl + 4);
        v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w, v[4] = q.x, v[5] = q.y, v[6] = q.z, v[7] = q.w;
      }
      float m = 0.f;
#pragma unroll
      for (int c = 0; c < 8; ++c) m = fmaxf(m, fabsf(v[c]));
#pragma unroll
      for (int d = 8; d >= 1; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d, 16));
      if (!in) continue;
      const int e = mma::f16_block_exponent(m);
      const float to_f16 = mma::pow2f(-e);
      if (hl == 0) step_scale[tok * nsteps + st] = mma::pow2f(e);
      __half part[P][8];
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int pos = f4_mma_x_position(c);
        if constexpr (P == 3)
          mma::split3_f16(v[c] * to_f16, part[0][pos], part[1][pos], part[2][pos]);
        else
          mma::split2_f16(v[c] * to_f16, part[0][pos], part[1][pos]);
      }
#pragma unroll
      for (int p = 0; p < P; ++p)
        *reinterpret_cast<uint4*>(planes + (P * tok + p) * stride + st * kStepK + 8 * hl) =
            make_uint4(pack_f16(part[p][0], part[p][1]), pack_f16(part[p][2], part[p][3]),
                       pack_f16(part[p][4], part[p][5]), pack_f16(part[p][6], part[p][7]));
    }
  }
}

// grid: resident CTAs, each taking a contiguous run of the jobs (MoE tile, column tile); the warp
// (tile, ksi) = (warp / ks, warp % ks) takes its 16 rows and the steps ksi, ksi + ks, ... of a job.
template <int TOK, bool kSwiglu, int P>
__global__ void __launch_bounds__(threads<TOK>(), TOK == 8 ? 1 : 2) moe_gemv_fp4_kernel(Args a) {
  wait_for_previous_kernel();
  constexpr int G = column_groups<TOK, P>(), kStages = stages<TOK, P>();
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kWarps = warps<TOK>(), kThreads = threads<TOK>();
  constexpr size_t kStageBytes = stage_bytes<TOK>();
  __shared__ float4 red[G][kWarps][32];
  constexpr int kOuts = tile_outs<kSwiglu>();
  const int64_t K = a.K, stride = plane_stride(K), nsteps = K / kStepK;
  __half* planes = reinterpret_cast<__half*>(smem + planes_offset<TOK, P>());
  float* step_scale =
      reinterpret_cast<float*>(smem + planes_offset<TOK, P>() + static_cast<size_t>(P * TOK * stride) * 2);

  const int64_t jobs = static_cast<int64_t>(*a.tile_count) * a.ncol;
  const int64_t b_first = static_cast<int64_t>(blockIdx.x) * jobs / gridDim.x;
  const int64_t b_end = static_cast<int64_t>(blockIdx.x + 1) * jobs / gridDim.x;

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ks = a.ks, ksi = warp % ks, tile = warp / ks, tiles = kWarps / ks;
  const int per_job = static_cast<int>((nsteps - ksi + ks - 1) / ks);
  unsigned char* wstage = smem + static_cast<size_t>(warp) * kWarpStageBytes;  // + st * kStageBytes
  // [window parity][row 0..15][kWindowRowWords]
  uint32_t* wscale =
      reinterpret_cast<uint32_t*>(smem + stages<TOK, P>() * kStageBytes + warp * warp_scale_bytes<TOK, P>());
  const int slot = g >> 1;
  // Byte offset in a stage of block b of row j * 8 + g (j = 0: row g, 1: row g + 8): a row's 4
  // blocks side by side, block b at slot b ^ (g / 2).
  auto piece = [&](int j, int b) { return ((j * 8 + g) * 4 + (b ^ slot)) * 16; };
  // The scale window of the warp's n-th step (of a job): [row 0..15][kWindowRowWords], 2 in turn.
  auto window_of = [&](int n) {
    return wscale + (raw_windows<TOK, P>() == 2 ? (n / kWindow) % 2 : 0) * (kTileRows * kWindowRowWords);
  };
  // The decoded window: [row 0..15][kF32RowFloats] floats, step s's four block scales at s * 4
  // (f32_window), or [row 0..15][kBf16RowBytes] bytes, step s's at s * 8 (bf16_window).
  unsigned char* dwin = smem + stages<TOK, P>() * kStageBytes + scale_bytes<TOK, P>() +
                        warp * (decoded_window_bytes<TOK, P>() / warps<TOK>());
  float* fwin = reinterpret_cast<float*>(dwin);
  // The tokens of B columns 8 cg + 2t and 8 cg + 2t + 1 (columns past P TOK are never stored: any scale).
  int tok0[G], tok1[G];
#pragma unroll
  for (int cg = 0; cg < G; ++cg) {
    tok0[cg] = min((8 * cg + 2 * t) / P, TOK - 1);
    tok1[cg] = min((8 * cg + 2 * t + 1) / P, TOK - 1);
  }
  int64_t split_tile = -1;

  for (int64_t b = b_first; b < b_end; ++b) {
    const int64_t ti = b / a.ncol, col = b % a.ncol;
    const MoeTile mt = a.tiles[ti];
    const int rows = min(mt.row_end - mt.row_begin, TOK);
    // Column groups holding the tile's rows (the same for the whole CTA): the others' sums are never
    // stored, so they are skipped (a tile of 8 with 1-4 rows, most at batch 128, does half the MMAs).
    const int active = a.skip_empty_groups ? (P * rows + 7) / 8 : G;
    const DevMatrix& wa = a.wa[mt.expert];
    const DevMatrix& wb = kSwiglu ? a.wb[mt.expert] : wa;
    // The warp's rows: output o_g = o0 + g (and o0 + 8 + g without SwiGLU); a tile past n_out
    // reads the last tile's rows, never stored.
    int64_t o0 = col * kOuts * tiles + tile * kOuts;
    if (o0 + kOuts > a.n_out) o0 = a.n_out - kOuts;
    const int64_t row_g = o0 + g, row_g8 = kSwiglu ? o0 + g : o0 + 8 + g;
    const uint8_t* p0 = wa.data + row_g * (K / 2);
    const uint8_t* p1 = wb.data + row_g8 * (K / 2);
    const uint8_t* s0 = wa.scale + row_g * wa.scale_cols;
    const uint8_t* s1 = wb.scale + row_g8 * wb.scale_cols;

    // The warp's n-th step into stage st: block t of rows g and g + 8; at the first step of a
    // window, also the window's scale words of the two rows (steps n + 2t, n + 2t + 1 from lane t),
    // in the same copy group.
    // (Called for n = 0, 1, 2, ... in turn: the sources advance by a step each call instead of
    // being recomputed in 64 bits.)
    const uint8_t* q0 = p0 + (ksi * 64 + 16 * t);
    const uint8_t* q1 = p1 + (ksi * 64 + 16 * t);
    const int64_t q_step = static_cast<int64_t>(ks) * 64;
    auto copy_step = [&](int n, int st) {
      unsigned char* ws = wstage + static_cast<size_t>(st) * kStageBytes;
      copy16_async(ws + piece(0, t), q0, true);
      copy16_async(ws + piece(1, t), q1, true);
      q0 += q_step;
      q1 += q_step;
      if (n % kWindow == 0) {
        uint32_t* win = window_of(n);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int s = 2 * t + e;
          if (n + s >= per_job) break;
          const int64_t sps = ksi + static_cast<int64_t>(n + s) * ks;
          copy4_async(win + g * kWindowRowWords + s, s0 + sps * 4);
          copy4_async(win + (8 + g) * kWindowRowWords + s, s1 + sps * 4);
        }
      }
    };
    float acc[G][4] = {};  // per column group: C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
#pragma unroll
    for (int n = 0; n < kStages - 1; ++n) {
      if (n < per_job) copy_step(n, n);
      copies_commit();  // (an empty group past the end keeps the count)
    }
    // x of a new tile, while those copies are in flight (the last job ended with a barrier, so
    // nobody reads the planes any more).
    if (ti != split_tile) {
      split_x<TOK, P>(a, mt.row_begin, rows, planes, step_scale);
      __syncthreads();
      split_tile = ti;
    }
#pragma unroll 1
    for (int i = 0; i < per_job; ++i) {
      const int ni = i + kStages - 1;
      if (ni < per_job) copy_step(ni, ni % kStages);
      copies_commit();
      copies_wait<kStages - 1>();  // step i's copies (this lane's) have landed
      __syncwarp();                // and the other lanes' (each waited for its own)
      const unsigned char* ws = wstage + static_cast<size_t>(i % kStages) * kStageBytes;
      const int64_t sp = ksi + static_cast<int64_t>(i) * ks;
      const uint32_t* win = window_of(i);
      float cs[G][4] = {};
      float scale_g[4], scale_g8[4];  // the four blocks' scales of rows g and g + 8
      if constexpr (f32_window<TOK, P>()) {
        if (i % kWindow == 0) {
          // The window's words landed with step i's copies: lane l decodes row l / 2's steps
          // 4 (l % 2) .. + 3 (words past the job's steps are stale, decoded, never read).
          const int row = lane >> 1, s0 = (lane & 1) * 4;
#pragma unroll
          for (int s = s0; s < s0 + 4; ++s) {
            float v[4];
            e8m0x4_to_f32(win[row * kWindowRowWords + s], v);
            *reinterpret_cast<float4*>(fwin + row * kF32RowFloats + s * 4) = make_float4(v[0], v[1], v[2], v[3]);
          }
          __syncwarp();
        }
        const float4 fg = *reinterpret_cast<const float4*>(fwin + g * kF32RowFloats + (i % kWindow) * 4);
        const float4 f8 = *reinterpret_cast<const float4*>(fwin + (8 + g) * kF32RowFloats + (i % kWindow) * 4);
        scale_g[0] = fg.x, scale_g[1] = fg.y, scale_g[2] = fg.z, scale_g[3] = fg.w;
        scale_g8[0] = f8.x, scale_g8[1] = f8.y, scale_g8[2] = f8.z, scale_g8[3] = f8.w;
      } else if constexpr (bf16_window<TOK, P>()) {
        if (i % kWindow == 0) {  // as f32_window's, each scale's float32 bits' upper half (exact)
          const int row = lane >> 1, s0 = (lane & 1) * 4;
#pragma unroll
          for (int s = s0; s < s0 + 4; ++s) {
            uint32_t b[4];
            e8m0x4_bits(win[row * kWindowRowWords + s], b);
            *reinterpret_cast<uint2*>(dwin + row * kBf16RowBytes + s * 8) =
                make_uint2((b[0] >> 16) | (b[1] & 0xffff0000u), (b[2] >> 16) | (b[3] & 0xffff0000u));
          }
          __syncwarp();
        }
        const uint2 ug = *reinterpret_cast<const uint2*>(dwin + g * kBf16RowBytes + (i % kWindow) * 8);
        const uint2 u8 = *reinterpret_cast<const uint2*>(dwin + (8 + g) * kBf16RowBytes + (i % kWindow) * 8);
        scale_g[0] = __uint_as_float(ug.x << 16), scale_g[1] = __uint_as_float(ug.x & 0xffff0000u);
        scale_g[2] = __uint_as_float(ug.y << 16), scale_g[3] = __uint_as_float(ug.y & 0xffff0000u);
        scale_g8[0] = __uint_as_float(u8.x << 16), scale_g8[1] = __uint_as_float(u8.x & 0xffff0000u);
        scale_g8[2] = __uint_as_float(u8.y << 16), scale_g8[3] = __uint_as_float(u8.y & 0xffff0000u);
      } else {
        e8m0x4_to_f32(win[g * kWindowRowWords + i % kWindow], scale_g);
        e8m0x4_to_f32(win[(8 + g) * kWindowRowWords + i % kWindow], scale_g8);
      }
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) {
        const uint32_t wg = *reinterpret_cast<const uint32_t*>(ws + piece(0, blk) + 4 * t);
        const uint32_t w8 = *reinterpret_cast<const uint32_t*>(ws + piece(1, blk) + 4 * t);
        uint32_t pg[4], p8[4];
        f4_pairs_f16x2(wg, pg);
        f4_pairs_f16x2(w8, p8);
        const uint32_t a0[4] = {pg[0], p8[0], pg[1], p8[1]};
        const uint32_t a1[4] = {pg[2], p8[2], pg[3], p8[3]};
        const float sg = scale_g[blk], sg8 = scale_g8[blk];
#pragma unroll
        for (int cg = 0; cg < G; ++cg) {
          if (G > 1 && cg >= active) break;
          // This lane's B column's plane, or (columns past the tile's P rows) some plane: those
          // columns' sums are never stored (nor read by tile_row_sum), so no zeros are needed.
          const int plane = min(8 * cg + g, P * TOK - 1);
          const uint4 xv = *reinterpret_cast<const uint4*>(planes + plane * stride + sp * kStepK + 32 * blk + 8 * t);
          float c[4] = {0.f, 0.f, 0.f, 0.f};
          mma_f16(c, a0[0], a0[1], a0[2], a0[3], xv.x, xv.y);
          mma_f16(c, a1[0], a1[1], a1[2], a1[3], xv.z, xv.w);
          cs[cg][0] = fmaf(c[0], sg, cs[cg][0]);
          cs[cg][1] = fmaf(c[1], sg, cs[cg][1]);
          cs[cg][2] = fmaf(c[2], sg8, cs[cg][2]);
          cs[cg][3] = fmaf(c[3], sg8, cs[cg][3]);
        }
      }
#pragma unroll
      for (int cg = 0; cg < G; ++cg) {
        if (G > 1 && cg >= active) break;
        const float x0 = step_scale[tok0[cg] * nsteps + sp], x1 = step_scale[tok1[cg] * nsteps + sp];
        acc[cg][0] = fmaf(cs[cg][0], x0, acc[cg][0]);
        acc[cg][1] = fmaf(cs[cg][1], x1, acc[cg][1]);
        acc[cg][2] = fmaf(cs[cg][2], x0, acc[cg][2]);
        acc[cg][3] = fmaf(cs[cg][3], x1, acc[cg][3]);
      }
      __syncwarp();  // every lane has read this stage before any lane copies into it again
    }

    // The ks partial sums of each warp tile in ascending order, then the parts', times 2^14.
#pragma unroll
    for (int cg = 0; cg < G; ++cg) red[cg][warp][lane] = make_float4(acc[cg][0], acc[cg][1], acc[cg][2], acc[cg][3]);
    __syncthreads();
    for (int th = static_cast<int>(threadIdx.x); th < tiles * kOuts * TOK; th += kThreads) {
      const int tl = th / (kOuts * TOK), r = (th / TOK) % kOuts, tok = th % TOK;
      // (the weights entered as value x 2^-14)
      auto row_sum = [&](int rr) { return mma::tile_row_sum<P>(&red[0][0][0], kWarps, tl, ks, rr, tok) * 0x1p14f; };
      float out = row_sum(r);
      if constexpr (kSwiglu) out = skinny::swiglu_clamped(out, row_sum(r + 8), a.limit);
      int64_t ob = col * kOuts * tiles + tl * kOuts;
      const bool clamped = ob + kOuts > a.n_out;
      if (clamped) ob = a.n_out - kOuts;
      const int64_t o = ob + r;
      // A clamped tile recomputes outputs of the tile before it: those it stores are the same
      // values (the same rows, x and order), written by both.
      if (tok < rows && o < a.n_out) a.y[(mt.row_begin + tok) * a.n_out + o] = out;
    }
    __syncthreads();  // red is written again by the next job
  }
}

}  // namespace mg

TcPolicy moe_gemv_policy() {
  static const TcPolicy p = policy_from_env("DEEPINFER_MOE_GEMV");
  return p;
}

// Parts of x (mg: P): DEEPINFER_MOE_GEMV_X_PARTS=3 for x exactly as float32 holds it, else 2.
int moe_gemv_x_parts() {
  static const int parts = [] {
    const int64_t n = positive_env("DEEPINFER_MOE_GEMV_X_PARTS", 2);
    if (n != 2 && n != 3)
      std::fprintf(stderr, "deepinfer: DEEPINFER_MOE_GEMV_X_PARTS=%lld is not 2 or 3; the FP4 GEMV splits x in 2 parts\n",
                   static_cast<long long>(n));
    return n == 3 ? 3 : 2;
  }();
  return parts;
}

// Column groups past a tile's rows are skipped (the same bits: their sums are never stored). H200,
// docs/perf.md session 33: decode B=128 -0.02 ms, within noise (predicted -0.7: the kernel is not
// bound by those MMAs); kept as less work for the same bits. DEEPINFER_MOE_GEMV_SKIP_EMPTY=0
// computes them.
bool moe_gemv_skip_empty_groups() {
  static const bool on = policy_from_env("DEEPINFER_MOE_GEMV_SKIP_EMPTY") != TcPolicy::Never;
  return on;
}

template <bool kSwiglu, int TOK, int P>
void launch_tok(mg::Args a, int64_t max_tiles) {
  a.skip_empty_groups = moe_gemv_skip_empty_groups() ? 1 : 0;
  const size_t smem = mg::smem_bytes<TOK, P>(a.K);
  constexpr int kWarps = mg::warps<TOK>();
  const size_t cta = smem + sizeof(float4) * mg::column_groups<TOK, P>() * kWarps * 32 + 1024;
  const int64_t resident = static_cast<int64_t>(device_sm_count()) * (2 * cta <= device_smem_per_sm() ? 2 : 1);
  // Split K (from the shapes and the plan's bound only, never the routing) while the jobs would
  // leave resident CTAs idle (batch 1: 6 tiles x 32 column tiles for 264 CTAs), keeping at least 4
  // steps a warp.
  constexpr int outs = mg::tile_outs<kSwiglu>();
  const int64_t nsteps = a.K / mg::kStepK;
  auto column_tiles = [&](int ks) { return (a.n_out + outs * (kWarps / ks) - 1) / (outs * (kWarps / ks)); };
  int ks = 1;
  while (ks < kWarps && 4 * ks * 2 <= nsteps && max_tiles * column_tiles(ks) < resident) ks *= 2;
  a.ks = ks;
  a.ncol = column_tiles(ks);
  const auto grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(max_tiles * a.ncol, resident)));
  // A refused shared-memory size stays in cudaGetLastError for the caller's launch check.
  if (allow_dynamic_smem<mg::moe_gemv_fp4_kernel<TOK, kSwiglu, P>>(mg::max_smem<TOK, P>()))
    launch(mg::moe_gemv_fp4_kernel<TOK, kSwiglu, P>, grid, mg::threads<TOK>(), smem, a);
}

template <bool kSwiglu, int TOK>
void launch_parts(mg::Args a, int64_t max_tiles) {
  if (moe_gemv_x_parts() == 3)
    launch_tok<kSwiglu, TOK, 3>(a, max_tiles);
  else
    launch_tok<kSwiglu, TOK, 2>(a, max_tiles);
}

}  // namespace

int moe_gemv_fp4_tile_rows(std::span<const DevMatrix> ws, bool swiglu) {
  if (ws.empty()) return 0;
  const int64_t R = ws[0].rows, K = ws[0].cols;
  if (K <= 0 || K % mg::kStepK != 0 || R < (swiglu ? mg::tile_outs<true>() : mg::tile_outs<false>())) return 0;
  for (const DevMatrix& w : ws)
    if (gemm_format(w) != skinny::kF4 || w.scale_dtype != 4 || w.rows != R || w.cols != K || w.scale_cols != K / 32 ||
        reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || reinterpret_cast<uintptr_t>(w.scale) % 4 != 0)
      return 0;
  auto fits = [&]<int P>() {  // the largest tile whose kernel's shared memory holds K's planes
    return mg::smem_bytes<8, P>(K) <= mg::max_smem<8, P>()   ? 8
           : mg::smem_bytes<4, P>(K) <= mg::max_smem<4, P>() ? 4
           : mg::smem_bytes<2, P>(K) <= mg::max_smem<2, P>() ? 2
                                                             : 0;
  };
  return moe_gemv_x_parts() == 3 ? fits.template operator()<3>() : fits.template operator()<2>();
}

int64_t moe_gemv_fp4_min_tokens() {
  static const int64_t n = positive_env("DEEPINFER_MOE_GEMV_MIN_TOKENS", 1);
  return n;
}

int moe_gemv_fp4_plan_rows(int64_t routed, int64_t experts, int max_rows) {
  // DEEPINFER_MOE_GEMV_TILE_ROWS (2, 4 or 8) caps the tile rows, for measurements.
  static const int64_t cap = positive_env("DEEPINFER_MOE_GEMV_TILE_ROWS", 8);
  const int64_t e = std::max<int64_t>(experts, 1);
  const int64_t most = std::min<int64_t>(max_rows, cap);
  // Tiles of 2 while the experts average at most 2 rows; then 8 where they fit (one read of an
  // expert's weights for up to 8 rows: H100, docs/perf.md session 27, decode B=128 14.64 -> 14.47
  // ms, B=192, past 4 rows an expert, 33.6 -> 17.9 ms), else 4.
  if (routed <= 2 * e) return most >= 2 ? 2 : 0;
  if (most >= 8 && routed <= 8 * e) return 8;
  return most >= 4 && routed <= 4 * e ? 4 : 0;
}

bool moe_gemv_fp4_wanted(int64_t tokens) {
  switch (moe_gemv_policy()) {
    case TcPolicy::Never: return false;
    case TcPolicy::Always: return true;
    // Not while DEEPINFER_TC_GEMM pins every GEMM to the tensor-core GEMM (or off them): a row's bits
    // then do not depend on the call's rows (batching_keeps_bits), which two kernels would break.
    default: return tc_policy() == TcPolicy::Auto && tokens >= moe_gemv_fp4_min_tokens();
  }
}

void launch_moe_gemv_fp4(bool swiglu, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles,
                         const int32_t* tile_count, int64_t max_tiles, int tile_rows, const int32_t* row_src,
                         const float* x, int64_t K, float* y, int64_t n_out, float limit) {
  if (max_tiles <= 0 || n_out <= 0) return;
  mg::Args a{};
  a.wa = wa;
  a.wb = swiglu ? wb : wa;
  a.tiles = tiles;
  a.tile_count = tile_count;
  a.row_src = row_src;
  a.x = x;
  a.y = y;
  a.K = K;
  a.n_out = n_out;
  a.limit = limit;
  // Tiles of up to 2 rows: one group of 8 B columns (6 in use); up to 4: two. Rows a tile lacks
  // skip their x split, and their columns read as zeros.
  if (tile_rows <= 2) {
    if (swiglu)
      launch_parts<true, 2>(a, max_tiles);
    else
      launch_parts<false, 2>(a, max_tiles);
  } else if (tile_rows <= 4) {
    if (swiglu)
      launch_parts<true, 4>(a, max_tiles);
    else
      launch_parts<false, 4>(a, max_tiles);
  } else {
    if (swiglu)
      launch_parts<true, 8>(a, max_tiles);
    else
      launch_parts<false, 8>(a, max_tiles);
  }
}

}  // namespace deepinfer::cuda
