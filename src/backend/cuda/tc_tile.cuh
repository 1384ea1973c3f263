// The tensor-core GEMM's device code below its kernels: operand fragments, the staged x, and the
// tile every schedule runs (tc_gemm.cu, whose file comment explains the design, is its only user).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/mma_async.cuh"    // the f16 MMA and x split of kF8H
#include "backend/cuda/skinny_gemm.cuh"  // decode4: the exact FP8 / FP4 widening

namespace deepinfer::cuda {

namespace {

namespace tc {

using skinny::kBF16;
using skinny::kF16;
using skinny::kF32;
using skinny::kF4;
using skinny::kF8;
constexpr int kF8F = 7;  // FP8 with F32 block scales (values not exact in bf16)
// FP8 whose values times their scales are exact in f16 (DevMatrix::fp8_exact_in_f16), in the
// default mode only: f16 operands, x in two f16 parts (hi + lo, 22 bits) of x 2^-e with e a power
// of two per row (tc_gemm.cu's split_x_f16_kernel): 2 MMAs a step instead of 3, and a weight
// pair's decoding one conversion and one f16 multiply (the kernel is latency-bound on such chains:
// docs/perf.md session 26). Not bit-identical to kF8.
constexpr int kF8H = 8;
// BF16 whose rows times powers of two (DevMatrix::row_scale, one a row) are exact in f16, in the
// default mode only: f16 operands as kF8H's (two MMAs a step instead of three), a weight pair
// widened, scaled by its row's 2^k and narrowed to f16 (exact), the sums times 2^-k. The LM head's
// format (docs/perf.md session 28). Not bit-identical to kBF16 (x in 22 bits, as kF8H).
constexpr int kBF16H = 9;
constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int64_t kSlabK = 128;  // columns of one slab: 32 per lane t of a row
constexpr int kTargetCtas = 264;  // split K until a shape gives about 2 CTAs per SM (132 SMs)
constexpr int kSeqMinCtas = 132;  // the seq schedule only when it fills the SMs

__host__ __device__ constexpr int chunk_elems(int f) {
  return f == kF32 ? 4 : f == kF16 || f == kBF16 || f == kBF16H ? 8 : f == kF8 || f == kF8F || f == kF8H ? 16 : 32;
}
// Formats whose widened values need a low bf16 part too (a third MMA per step: W_lo x_hi).
__host__ __device__ constexpr bool has_lo(int f) { return f == kF32 || f == kF16 || f == kF8F; }
// The stored format the decoder reads.
__host__ __device__ constexpr int stored(int f) { return f == kF8F || f == kF8H ? kF8 : f == kBF16H ? kBF16 : f; }
// Formats on f16 operands (x as hi + lo, no lo plane in the split x).
__host__ __device__ constexpr bool f16_operands(int f) { return f == kF8H || f == kBF16H; }
// The format a call that reads x itself (kRaw: bf16 parts split in registers) takes instead.
__host__ __device__ constexpr int raw_format(int f) { return f == kF8H ? kF8 : f == kBF16H ? kBF16 : f; }

struct Job {
  DevMatrix wa, wb;  // wb: the up projection under SwiGLU
  int64_t w_row0;    // first weight row of the group
  int64_t o0, n_out, K;
  const uint4* xc;   // split x of the group's first column (hi / mid records, one per 4 columns)
  const uint2* xlo;  // its lo records (same numbering)
  const int32_t* xexp;  // f16 operands: the exponent e of each x row (x 2^-e was split), at xexp[x row * ldxe]
  int64_t ldxe;
  int64_t ldxc;      // row pitch in records
  const float* x;   // or (kRaw) x itself, split in registers: the same bits
  int64_t ldx;
  const int32_t* row_src;
  int64_t rb, re;  // token rows [rb, re) (x row row_src[r] or r; y row r)
  float* y;
  int64_t ldy;
  float limit;
  int ks;
  bool seq;
  int slice;  // >= 0: only this slice, into a partial (the grid-split schedule)
  // A slice CTA's whole x at once (a stage of dynamic shared memory for each piece of the slice,
  // sized by the host: tc_gemm.cu's whole_slice_pieces): one wait, instead of one a piece with
  // kStages - 1 in flight.
  bool stage_all;
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Elements 4j .. 4j + 3 of a lane chunk as two bf16 pairs (hi), and for has_lo formats the pairs of
// what hi leaves (lo: w - hi is exact in float32, then rounded to bf16).
template <int F, bool kExact>
__device__ __forceinline__ void frag(const uint4& raw, int j, float s, float S, uint32_t& p01, uint32_t& p23,
                                     uint32_t& l01, uint32_t& l23) {
  if constexpr (F == kBF16) {
    p01 = skinny::word_of(raw, 2 * j);
    p23 = skinny::word_of(raw, 2 * j + 1);
  } else if constexpr (F == kBF16H) {
    // bf16 pairs widened, times the row's 2^k (s) and narrowed to f16: all exact (bf16_row_scale.h).
    auto narrow = [s](uint32_t u) {
      const __half2 h = __floats2half2_rn(__uint_as_float(u << 16) * s, __uint_as_float(u & 0xffff0000u) * s);
      return *reinterpret_cast<const uint32_t*>(&h);
    };
    p01 = narrow(skinny::word_of(raw, 2 * j));
    p23 = narrow(skinny::word_of(raw, 2 * j + 1));
  } else if constexpr (f16_operands(F)) {
    // e4m3 pairs to f16 pairs (exact, NaN codes to NaN) times the scale in f16: exact, as the
    // products are f16 values (DevMatrix::fp8_exact_in_f16; f16 arithmetic keeps subnormals).
    const uint32_t u = skinny::word_of(raw, j);
    const __half2 sh = __float2half2_rn(s);
    const __half2 v0 = __hmul2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u), __NV_E4M3)), sh);
    const __half2 v1 =
        __hmul2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u >> 16), __NV_E4M3)), sh);
    p01 = *reinterpret_cast<const uint32_t*>(&v0);
    p23 = *reinterpret_cast<const uint32_t*>(&v1);
  } else {
    float v[4];
    skinny::decode4<stored(F), kExact>(raw, j, s, S, v);
    p01 = pack_bf16(v[0], v[1]);
    p23 = pack_bf16(v[2], v[3]);
    if constexpr (has_lo(F)) {
      float l[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) l[i] = v[i] - __bfloat162float(__float2bfloat16_rn(v[i]));
      l01 = pack_bf16(l[0], l[1]);
      l23 = pack_bf16(l[2], l[3]);
    }
  }
}

// x's hi / mid / lo bf16 pairs of 4 columns (launch_tc_split_x's records): hi = bf16(x), mid =
// bf16(x - hi), lo = bf16(x - hi - mid) (each difference exact in float32), so hi + mid + lo = x.
struct Split {
  uint4 hm;  // {hi(x0, x1), hi(x2, x3), mid(x0, x1), mid(x2, x3)}
  uint2 lo;  // {lo(x0, x1), lo(x2, x3)}
};
__device__ __forceinline__ Split split4(const float4 v) {
  const float x[4] = {v.x, v.y, v.z, v.w};
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float r = x[i] - __bfloat162float(__float2bfloat16_rn(x[i]));
    m[i] = r;
    l[i] = r - __bfloat162float(__float2bfloat16_rn(r));
  }
  Split sp;
  sp.hm = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(m[0], m[1]), pack_bf16(m[2], m[3]));
  sp.lo = make_uint2(pack_bf16(l[0], l[1]), pack_bf16(l[2], l[3]));
  return sp;
}

// The many-row seq schedule with two row groups a warp (RG 2: every warp of the CTA walks the same
// pieces in the same order) stages each piece's split x in shared memory: kStages pieces in flight
// through cp.async, filled by the whole CTA, so the MMAs wait on shared memory instead of L1 / L2
// (ncu, session 15: these kernels spent half their cycles on that scoreboard). A stage holds, for
// the CTA's 8 NT token rows, the piece's CH hi / mid records then its CH lo records; a row pitch of
// CH + 4 records (64 mod 128 bytes, 32 mod 64 for lo) keeps the fragment reads conflict-free. The
// MMAs and their order are unchanged, so the bits are too. (The grid split, gemm_kernels.h: every
// seq CTA of 32 or 64 tokens stages, and the split schedule's slices become CTAs; gemm_kernels.h.)
constexpr int kStages = 3;
__host__ __device__ constexpr int stage_stride(int ch) { return ch >= 8 ? ch + 4 : 4; }
__host__ __device__ constexpr size_t stage_bytes(int f, int rows) {
  return static_cast<size_t>(rows) * stage_stride(chunk_elems(f)) * (sizeof(uint4) + (f16_operands(f) ? 0 : sizeof(uint2)));
}
// Whether a kernel stages x by default: the 64-token seq schedule with two row groups a warp.
__host__ __device__ constexpr bool stages_by_default(int NT, int RG, bool kRaw) { return RG == 2 && NT == 8 && !kRaw; }
template <int F, int NT, bool kStage>
constexpr size_t staged_smem() {
  return kStage ? kStages * stage_bytes(F, 8 * NT) : 0;
}

__device__ __forceinline__ void cp_async(void* dst, const void* src, int bytes) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if (bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_stages() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2)); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// Piece i's records (CH of them from record `first` of each row) into stage buffer `stage`, by the
// whole CTA; row_off: each of the ROWS rows' first record. kLo: the lo records too.
template <int CH, int ROWS, bool kLo>
__device__ __forceinline__ void fill_stage(uint4* stage, const uint4* xc, const uint2* xlo, const uint32_t* row_off,
                                           int64_t first) {
  constexpr int S = stage_stride(CH);
  auto* lo = reinterpret_cast<uint2*>(stage + ROWS * S);
  for (int i = static_cast<int>(threadIdx.x); i < ROWS * CH; i += kThreads) {
    const int row = i / CH, l = i % CH;
    const int64_t src = row_off[row] + first + l;
    cp_async(stage + row * S + l, xc + src, 16);
    if constexpr (kLo) cp_async(lo + row * S + l, xlo + src, 8);
  }
}

// xi: the piece's first column (raw x); xr: its first record in the split x (split_index; the lo
// plane xlo has the same record numbers). RG: 16-row groups of the warp, each with its own A
// fragments; one B fragment feeds all of them (fewer x loads per MMA), and every accumulator gets
// the same MMA sequence as with one group a warp (has_l is decided per group).
// kStaged: the piece's x records come from shared memory instead (x_stage: token row n * 8 + g,
// record 4 J + t of the piece; records past K are zeros there, as `valid` makes them here).
template <int F, int NT, int RG, bool kRaw, bool kStaged = false>
__device__ __forceinline__ void slab_mma(const uint4 (&ra)[RG], const uint4 (&rb)[RG], const float (&sa)[RG],
                                         const float (&Sa)[RG], const float (&sb)[RG], const float (&Sb)[RG],
                                         const bool (&exact)[RG], const void* xp, const uint2* xlo,
                                         const uint32_t* xoff, int64_t xi, int64_t xr, bool valid,
                                         float (&cur)[RG][NT][4], const uint4* stage_hm = nullptr,
                                         const uint2* stage_lo = nullptr) {
  constexpr int CH = chunk_elems(F);
#pragma unroll
  for (int j = 0; j < CH / 4; ++j) {
    uint32_t a[RG][4], l[RG][4];
    bool has_l[RG];
#pragma unroll
    for (int r = 0; r < RG; ++r) {
      l[r][0] = l[r][1] = l[r][2] = l[r][3] = 0;
      if (exact[r]) {
        frag<F, true>(ra[r], j, sa[r], Sa[r], a[r][0], a[r][2], l[r][0], l[r][2]);
        frag<F, true>(rb[r], j, sb[r], Sb[r], a[r][1], a[r][3], l[r][1], l[r][3]);
      } else {
        frag<F, false>(ra[r], j, sa[r], Sa[r], a[r][0], a[r][2], l[r][0], l[r][2]);
        frag<F, false>(rb[r], j, sb[r], Sb[r], a[r][1], a[r][3], l[r][1], l[r][3]);
      }
      // Low parts that are all zero in the warp's group (values exact in bf16) add no MMA: the same
      // sequence as a weight stored in an exact format.
      has_l[r] = has_lo(F) && __any_sync(0xffffffffu, (l[r][0] | l[r][1] | l[r][2] | l[r][3]) != 0);
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      Split xv;
      xv.hm = make_uint4(0, 0, 0, 0);
      xv.lo = make_uint2(0, 0);
      if constexpr (kStaged) {
        const int lane = static_cast<int>(threadIdx.x) & 31;
        const int at = (n * 8 + (lane >> 2)) * stage_stride(CH) + 4 * j + (lane & 3);
        xv.hm = stage_hm[at];
        if constexpr (!f16_operands(F)) xv.lo = stage_lo[at];
      } else if (valid) {
        if constexpr (kRaw) {
          static_assert(!f16_operands(F), "kRaw splits x into bf16 parts");
          xv = split4(__ldg(reinterpret_cast<const float4*>(static_cast<const float*>(xp) + xoff[n] + xi) + j));
        } else {
          xv.hm = __ldg(static_cast<const uint4*>(xp) + xoff[n] + xr + 4 * j);
          if constexpr (!f16_operands(F)) xv.lo = __ldg(xlo + xoff[n] + xr + 4 * j);
        }
      }
#pragma unroll
      for (int r = 0; r < RG; ++r) {
        if constexpr (f16_operands(F)) {  // hm: x's f16 hi, then lo
          ::deepinfer::cuda::mma::mma_f16(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.x, xv.hm.y);
          ::deepinfer::cuda::mma::mma_f16(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.z, xv.hm.w);
        } else {
          mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.x, xv.hm.y);
          mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.z, xv.hm.w);
          mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.lo.x, xv.lo.y);
          if constexpr (has_lo(F))
            if (has_l[r]) mma(cur[r][n], l[r][0], l[r][1], l[r][2], l[r][3], xv.hm.x, xv.hm.y);
        }
      }
    }
  }
}

template <int F>
__device__ __forceinline__ float scale_of(const DevMatrix& w, int64_t srow, int64_t k0) {
  if constexpr (stored(F) == kF8 || F == kF4) {
    return skinny::scale_at<stored(F)>(w, srow, k0);
  } else {
    return 1.0f;
  }
}

// The split x's record of columns c .. c + 3 (c a multiple of 4) within its row: per 128-column
// slab, the record of lane t's step J (c = 32 t + 4 J) is J * 4 + t, so the 4 lanes of a step read
// 64 contiguous bytes. Rows are padded to whole slabs (split_row_records).
__host__ __device__ __forceinline__ int64_t split_index(int64_t c) {
  const int64_t w = c % kSlabK;
  return (c / kSlabK) * (kSlabK / 4) + ((w % 32) / 4) * 4 + w / 32;
}
__host__ __device__ __forceinline__ int64_t split_row_records(int64_t cols) {
  return (cols + kSlabK - 1) / kSlabK * (kSlabK / 4);
}

// RG: 16-row groups (8 outputs under SwiGLU) a warp holds; more than one only in the seq schedule.
// kGrid: the grid-split schedule's kernels (seq only): x always staged, and with j.slice >= 0 this
// CTA sums slice j.slice alone (every warp on it) into j.y, a partial that sum_slices_kernel adds
// (under SwiGLU the gate sums, then at column n_out the up sums: sum_slices_swiglu_kernel). A
// template flag, so the default kernels keep their code (and registers) as they were.
template <int F, bool kSwiglu, int NT, int RG, bool kRaw, bool kGrid>
__device__ __forceinline__ void tile(const Job& j, float* red, uint4* x_stage) {
  constexpr bool kStaged = kGrid || stages_by_default(NT, RG, kRaw);
  constexpr int kRows = 8 * NT;  // token rows of the CTA (of a stage)
  constexpr int CH = chunk_elems(F);  // elements of one 16-byte piece
  constexpr int P = 32 / CH;          // pieces of a lane's 32 columns of a slab
  constexpr int D = NT * RG >= 16 ? 1 : NT * RG >= 8 ? 2 : 4;  // slabs in flight per warp (registers)
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ks = j.ks, kp = j.seq ? 1 : ks;
  const int ksi = warp % kp;
  const bool one_slice = kGrid && j.slice >= 0;
  const bool stage_all = one_slice && j.stage_all;
  const int s_first = one_slice ? j.slice : ksi, s_end = one_slice ? j.slice + 1 : ks;

  // This lane's two weight rows of each group: plain, outputs o0 + 16 rg + g and + 8; SwiGLU, output
  // o0 + 8 rg + g (gate row in A row g, up row in A row g + 8).
  const DevMatrix& ma = j.wa;
  const DevMatrix& mb = kSwiglu ? j.wb : j.wa;
  const int64_t K = j.K;
  constexpr int64_t kBytes = F == kF32 ? 4 : stored(F) == kF8 ? 1 : 2;
  int64_t out_a[RG], out_b[RG], srow_a[RG], srow_b[RG];
  float rs_a[RG], rs_b[RG];  // kBF16H: the rows' 2^k
  const uint8_t* base_a[RG];
  const uint8_t* base_b[RG];
#pragma unroll
  for (int r = 0; r < RG; ++r) {
    const int rg = (warp / kp) * RG + r;
    out_a[r] = kSwiglu ? j.o0 + rg * 8 + g : j.o0 + rg * 16 + g;
    out_b[r] = kSwiglu ? out_a[r] : out_a[r] + 8;
    const int64_t wra = j.w_row0 + (out_a[r] < j.n_out ? out_a[r] : 0);  // rows past the end: row 0, never stored
    const int64_t wrb = j.w_row0 + (out_b[r] < j.n_out ? out_b[r] : 0);
    base_a[r] = ma.data + (F == kF4 ? wra * (K / 2) : wra * K * kBytes);
    base_b[r] = mb.data + (F == kF4 ? wrb * (K / 2) : wrb * K * kBytes);
    srow_a[r] = srow_b[r] = 0;
    rs_a[r] = rs_b[r] = 1.0f;
    if constexpr (F == kBF16H) {
      rs_a[r] = ma.row_scale[wra];
      rs_b[r] = mb.row_scale[wrb];
    }
    if constexpr (stored(F) == kF8) {
      srow_a[r] = (wra / (ma.block_rows > 0 ? ma.block_rows : 1)) * ma.scale_cols;
      srow_b[r] = (wrb / (mb.block_rows > 0 ? mb.block_rows : 1)) * mb.scale_cols;
    } else if constexpr (F == kF4) {
      srow_a[r] = wra * ma.scale_cols;
      srow_b[r] = wrb * mb.scale_cols;
    }
  }
  // The lane's token of each 8-token tile (B column g).
  // (uint4 offsets: the split x of a call stays far below 2^32 records.)
  uint32_t xoff[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int64_t r0 = j.rb + n * 8 + g;
    const int64_t r = r0 < j.re ? r0 : j.rb;  // missing rows repeat the first, never stored
    xoff[n] = static_cast<uint32_t>((j.row_src ? static_cast<int64_t>(j.row_src[r]) : r) * (kRaw ? j.ldx : j.ldxc));
  }

  // Piece i of lane t: columns k0(i) .. + CH of its rows (the same columns for every format).
  auto k0_of = [&](int64_t i) -> int64_t { return (i / P) * kSlabK + t * 32 + (i % P) * CH; };
  const int64_t nslab = (K + kSlabK - 1) / kSlabK;
  auto load = [&](int64_t sl, uint4 (&ra)[RG], uint4 (&rb)[RG]) {
    const int64_t k0 = k0_of(sl);
    const int64_t off = F == kF4 ? k0 / 2 : k0 * kBytes;
#pragma unroll
    for (int r = 0; r < RG; ++r) {
      if (k0 < K) {
        ra[r] = __ldg(reinterpret_cast<const uint4*>(base_a[r] + off));
        rb[r] = __ldg(reinterpret_cast<const uint4*>(base_b[r] + off));
      } else {
        ra[r] = rb[r] = make_uint4(0, 0, 0, 0);
      }
    }
  };

  // Staged x: each row's first record, then the first kStages - 1 pieces in flight.
  __shared__ uint32_t row_off[kStaged ? kRows : 1];
  const int64_t npieces = nslab * P;
  const int64_t per = (nslab + ks - 1) / ks;  // slice s: slabs [s * per, (s + 1) * per)
  constexpr int SS = static_cast<int>(stage_bytes(F, kRows) / sizeof(uint4));  // a stage, in uint4
  [[maybe_unused]] const int64_t first = one_slice ? j.slice * per * P : 0;  // the CTA's first piece
  if constexpr (kStaged) {
    if (threadIdx.x < kRows) {
      const int64_t r0 = j.rb + threadIdx.x;
      const int64_t r = r0 < j.re ? r0 : j.rb;
      row_off[threadIdx.x] = static_cast<uint32_t>((j.row_src ? static_cast<int64_t>(j.row_src[r]) : r) * j.ldxc);
    }
    __syncthreads();
    // Piece p sits in buffer p % kStages; a slice CTA's pieces start at its first. stage_all: piece
    // p in buffer p - first, every piece of the slice asked for at once (one L2 round trip).
    if (stage_all) {
      const int64_t end = first + per * P < npieces ? first + per * P : npieces;
      for (int64_t pc = first; pc < end; ++pc)
        fill_stage<CH, kRows, !f16_operands(F)>(x_stage + (pc - first) * SS, j.xc, j.xlo, row_off, (pc / P) * 32 + (pc % P) * CH);
      cp_async_commit();  // waited for at the first piece, after the first weight loads are out
    } else {
#pragma unroll
      for (int st = 0; st < kStages - 1; ++st) {
        const int64_t pc = first + st;
        if (pc < npieces)
          fill_stage<CH, kRows, !f16_operands(F)>(x_stage + (pc % kStages) * SS, j.xc, j.xlo, row_off, (pc / P) * 32 + (pc % P) * CH);
        cp_async_commit();
      }
    }
  }

  float tot[RG][NT][4];
  for (int s = s_first; s < s_end; s += kp) {
    float cur[RG][NT][4];
#pragma unroll
    for (int r = 0; r < RG; ++r)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) cur[r][n][e] = 0.0f;
    const int64_t sb = s * per * P, se = (s * per + per < nslab ? s * per + per : nslab) * P;  // pieces
    uint4 buf[D][2][RG];
#pragma unroll
    for (int d = 0; d < D; ++d)
      if (sb + d < se) load(sb + d, buf[d][0], buf[d][1]);
#pragma unroll 1
    for (int64_t sl = sb; sl < se; sl += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int64_t cs = sl + d;
        if (cs < se) {  // warp-uniform
          uint4 ra[RG], rb[RG];
#pragma unroll
          for (int r = 0; r < RG; ++r) {
            ra[r] = buf[d][0][r];
            rb[r] = buf[d][1][r];
          }
          if (cs + D < se) load(cs + D, buf[d][0], buf[d][1]);
          const int64_t k0 = k0_of(cs);
          const bool valid = k0 < K;
          float sa[RG], sb[RG], Sa[RG], Sb[RG];
          bool exact[RG];
#pragma unroll
          for (int r = 0; r < RG; ++r) {
            sa[r] = sb[r] = Sa[r] = Sb[r] = 1.0f;
            bool ex = false;
            if constexpr (stored(F) == kF8 || F == kF4) {
              if (valid) {
                sa[r] = scale_of<F>(ma, srow_a[r], k0);
                sb[r] = scale_of<F>(mb, srow_b[r], k0);
              }
            } else if constexpr (F == kBF16H) {
              sa[r] = rs_a[r];
              sb[r] = rs_b[r];
            }
            // The reference decoding where a scale times the decoder's constant overflows or an FP8
            // code is NaN (f16 operands have one decoding, exact for every code and scale they take).
            if constexpr (!f16_operands(F)) {
              if constexpr (stored(F) == kF8 || F == kF4) {
                constexpr float kC = stored(F) == kF8 ? 0x1p120f : 0x1p126f;
                Sa[r] = sa[r] * kC;
                Sb[r] = sb[r] * kC;
                ex = (fabsf(Sa[r]) == INFINITY && fabsf(sa[r]) != INFINITY) ||
                     (fabsf(Sb[r]) == INFINITY && fabsf(sb[r]) != INFINITY);
              }
              if constexpr (stored(F) == kF8) {
                uint32_t nan = 0;  // any 0x7f / 0xff code (NaN in e4m3fn)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                  nan |= __vcmpeq4(skinny::word_of(ra[r], i) & 0x7f7f7f7fu, 0x7f7f7f7fu);
                  nan |= __vcmpeq4(skinny::word_of(rb[r], i) & 0x7f7f7f7fu, 0x7f7f7f7fu);
                }
                ex |= nan != 0;
              }
            }
            exact[r] = !f16_operands(F) && __any_sync(0xffffffffu, ex);
          }
          if constexpr (kStaged) {
            const uint4* hm = x_stage + (cs - first) * SS;  // stage_all's buffer
            if (stage_all) {
              if (cs == first) {  // every warp reaches it (seq: the same pieces)
                cp_async_wait_all();
                __syncthreads();
              }
            } else {
              // Piece cs has landed (and every warp is done with piece cs - 1, whose buffer takes
              // piece cs + kStages - 1 now).
              cp_async_wait_stages();
              __syncthreads();
              const int64_t next = cs + kStages - 1;
              if (next < npieces)
                fill_stage<CH, kRows, !f16_operands(F)>(x_stage + (next % kStages) * SS, j.xc, j.xlo, row_off, (next / P) * 32 + (next % P) * CH);
              cp_async_commit();
              hm = x_stage + (cs % kStages) * SS;
            }
            slab_mma<F, NT, RG, kRaw, true>(ra, rb, sa, Sa, sb, Sb, exact, nullptr, nullptr, xoff, k0, 0, valid, cur, hm,
                                            reinterpret_cast<const uint2*>(hm + kRows * stage_stride(CH)));
          } else {
            slab_mma<F, NT, RG, kRaw>(ra, rb, sa, Sa, sb, Sb, exact,
                                      kRaw ? static_cast<const void*>(j.x) : static_cast<const void*>(j.xc), j.xlo,
                                      xoff, k0, split_index(k0), valid, cur);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RG; ++r)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) tot[r][n][e] = s == s_first ? cur[r][n][e] : tot[r][n][e] + cur[r][n][e];
  }
  if constexpr (RG == 1) {
    if (kp > 1) {
      // split: slice partials in ascending slice order (the same sums as seq's running total).
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[((warp * NT + n) * 4 + e) * 32 + lane] = tot[0][n][e];
      __syncthreads();
      if (ksi != 0) return;
      for (int i = 1; i < kp; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) tot[0][n][e] += red[(((warp + i) * NT + n) * 4 + e) * 32 + lane];
    }
  }
  // C fragment: tot[r][n][0..1] row g (output a), tokens 8n + 2t, + 1; tot[r][n][2..3] row g + 8 (output b).
#pragma unroll
  for (int r = 0; r < RG; ++r)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t row = j.rb + n * 8 + 2 * t + c;
        if (row >= j.re) continue;
        float va = tot[r][n][c], vb = tot[r][n][c + 2];
        if constexpr (f16_operands(F)) {  // the sums were of x 2^-e (exact scaling, as a slice partial's)
          const float xs = ::deepinfer::cuda::mma::pow2f(j.xexp[(j.row_src ? j.row_src[row] : row) * j.ldxe]);
          va *= xs;
          vb *= xs;
        }
        if constexpr (F == kBF16H) {  // the rows' 2^-k (exact, as for a slice partial)
          va *= 1.0f / rs_a[r];
          vb *= 1.0f / rs_b[r];
        }
        if constexpr (kSwiglu) {
          if (out_a[r] >= j.n_out) continue;
          if (one_slice) {  // a slice's partial: gate and up sums, the SwiGLU after their sum
            j.y[row * j.ldy + out_a[r]] = va;
            j.y[row * j.ldy + j.n_out + out_a[r]] = vb;
          } else {
            j.y[row * j.ldy + out_a[r]] = skinny::swiglu_clamped(va, vb, j.limit);
          }
        } else {
          if (out_a[r] < j.n_out) j.y[row * j.ldy + out_a[r]] = va;
          if (out_b[r] < j.n_out) j.y[row * j.ldy + out_b[r]] = vb;
        }
      }
}

}  // namespace tc

}  // namespace

}  // namespace deepinfer::cuda
