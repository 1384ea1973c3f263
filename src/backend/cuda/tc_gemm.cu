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

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/skinny_gemm.cuh"  // decode4: the exact FP8 / FP4 widening
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

namespace tc {

using skinny::kBF16;
using skinny::kF16;
using skinny::kF32;
using skinny::kF4;
using skinny::kF8;
constexpr int kF8F = 7;  // FP8 with F32 block scales (values not exact in bf16)
constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int64_t kSlabK = 128;  // columns of one slab: 32 per lane t of a row
constexpr int kTargetCtas = 264;  // split K until a shape gives about 2 CTAs per SM (132 SMs)
constexpr int kSeqMinCtas = 132;  // the seq schedule only when it fills the SMs

__host__ __device__ constexpr int chunk_elems(int f) {
  return f == kF32 ? 4 : f == kF16 || f == kBF16 ? 8 : f == kF8 || f == kF8F ? 16 : 32;
}
// Formats whose widened values need a low bf16 part too (a third MMA per step: W_lo x_hi).
__host__ __device__ constexpr bool has_lo(int f) { return f == kF32 || f == kF16 || f == kF8F; }
// The stored format the decoder reads.
__host__ __device__ constexpr int stored(int f) { return f == kF8F ? kF8 : f; }

struct Job {
  DevMatrix wa, wb;  // wb: the up projection under SwiGLU
  int64_t w_row0;    // first weight row of the group
  int64_t o0, n_out, K;
  const uint4* xc;   // split x of the group's first column (hi / mid records, one per 4 columns)
  const uint2* xlo;  // its lo records (same numbering)
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
// the CTA's 64 token rows, the piece's CH hi / mid records then its CH lo records; a row pitch of
// CH + 4 records (64 mod 128 bytes, 32 mod 64 for lo) keeps the fragment reads conflict-free. The
// MMAs and their order are unchanged, so the bits are too.
constexpr int kStages = 3;
constexpr int kStageRows = 64;
__host__ __device__ constexpr int stage_stride(int ch) { return ch >= 8 ? ch + 4 : 4; }
__host__ __device__ constexpr size_t stage_bytes(int f) {
  return static_cast<size_t>(kStageRows) * stage_stride(chunk_elems(f)) * (sizeof(uint4) + sizeof(uint2));
}
template <int F, int NT, int RG, bool kRaw>
constexpr size_t staged_smem() {
  return RG == 2 && NT == 8 && !kRaw ? kStages * stage_bytes(F) : 0;
}

__device__ __forceinline__ void cp_async(void* dst, const void* src, int bytes) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if (bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_stages() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2)); }

// Piece i's records (CH of them from record `first` of each row) into stage buffer `stage`, by the
// whole CTA; row_off: each of the 64 rows' first record.
template <int CH>
__device__ __forceinline__ void fill_stage(uint4* stage, const uint4* xc, const uint2* xlo, const uint32_t* row_off,
                                           int64_t first) {
  constexpr int S = stage_stride(CH);
  auto* lo = reinterpret_cast<uint2*>(stage + kStageRows * S);
  for (int i = static_cast<int>(threadIdx.x); i < kStageRows * CH; i += kThreads) {
    const int row = i / CH, l = i % CH;
    const int64_t src = row_off[row] + first + l;
    cp_async(stage + row * S + l, xc + src, 16);
    cp_async(lo + row * S + l, xlo + src, 8);
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
        xv.lo = stage_lo[at];
      } else if (valid) {
        if constexpr (kRaw) {
          xv = split4(__ldg(reinterpret_cast<const float4*>(static_cast<const float*>(xp) + xoff[n] + xi) + j));
        } else {
          xv.hm = __ldg(static_cast<const uint4*>(xp) + xoff[n] + xr + 4 * j);
          xv.lo = __ldg(xlo + xoff[n] + xr + 4 * j);
        }
      }
#pragma unroll
      for (int r = 0; r < RG; ++r) {
        mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.x, xv.hm.y);
        mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.hm.z, xv.hm.w);
        mma(cur[r][n], a[r][0], a[r][1], a[r][2], a[r][3], xv.lo.x, xv.lo.y);
        if constexpr (has_lo(F))
          if (has_l[r]) mma(cur[r][n], l[r][0], l[r][1], l[r][2], l[r][3], xv.hm.x, xv.hm.y);
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
template <int F, bool kSwiglu, int NT, int RG, bool kRaw>
__device__ __forceinline__ void tile(const Job& j, float* red, uint4* x_stage) {
  constexpr bool kStaged = staged_smem<F, NT, RG, kRaw>() > 0;
  constexpr int CH = chunk_elems(F);  // elements of one 16-byte piece
  constexpr int P = 32 / CH;          // pieces of a lane's 32 columns of a slab
  constexpr int D = NT * RG >= 16 ? 1 : NT * RG >= 8 ? 2 : 4;  // slabs in flight per warp (registers)
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ks = j.ks, kp = j.seq ? 1 : ks;
  const int ksi = warp % kp;

  // This lane's two weight rows of each group: plain, outputs o0 + 16 rg + g and + 8; SwiGLU, output
  // o0 + 8 rg + g (gate row in A row g, up row in A row g + 8).
  const DevMatrix& ma = j.wa;
  const DevMatrix& mb = kSwiglu ? j.wb : j.wa;
  const int64_t K = j.K;
  constexpr int64_t kBytes = F == kF32 ? 4 : stored(F) == kF8 ? 1 : 2;
  int64_t out_a[RG], out_b[RG], srow_a[RG], srow_b[RG];
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
  __shared__ uint32_t row_off[kStaged ? kStageRows : 1];
  const int64_t npieces = nslab * P;
  constexpr int SS = static_cast<int>(stage_bytes(F) / sizeof(uint4));  // a stage, in uint4
  if constexpr (kStaged) {
    if (threadIdx.x < kStageRows) {
      const int64_t r0 = j.rb + threadIdx.x;
      const int64_t r = r0 < j.re ? r0 : j.rb;
      row_off[threadIdx.x] = static_cast<uint32_t>((j.row_src ? static_cast<int64_t>(j.row_src[r]) : r) * j.ldxc);
    }
    __syncthreads();
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < npieces) fill_stage<CH>(x_stage + st * SS, j.xc, j.xlo, row_off, (st / P) * 32 + (st % P) * CH);
      cp_async_commit();
    }
  }

  float tot[RG][NT][4];
  const int64_t per = (nslab + ks - 1) / ks;  // slice s: slabs [s * per, (s + 1) * per)
  for (int s = ksi; s < ks; s += kp) {
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
            exact[r] = __any_sync(0xffffffffu, ex);
          }
          if constexpr (kStaged) {
            // Piece cs has landed (and every warp is done with piece cs - 1, whose buffer takes
            // piece cs + kStages - 1 now).
            cp_async_wait_stages();
            __syncthreads();
            const int64_t next = cs + kStages - 1;
            if (next < npieces)
              fill_stage<CH>(x_stage + (next % kStages) * SS, j.xc, j.xlo, row_off, (next / P) * 32 + (next % P) * CH);
            cp_async_commit();
            const uint4* hm = x_stage + (cs % kStages) * SS;
            slab_mma<F, NT, RG, kRaw, true>(ra, rb, sa, Sa, sb, Sb, exact, nullptr, nullptr, xoff, k0, 0, valid, cur, hm,
                                            reinterpret_cast<const uint2*>(hm + kStageRows * stage_stride(CH)));
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
        for (int e = 0; e < 4; ++e) tot[r][n][e] = s == ksi ? cur[r][n][e] : tot[r][n][e] + cur[r][n][e];
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
        if constexpr (kSwiglu) {
          if (out_a[r] >= j.n_out) continue;
          j.y[row * j.ldy + out_a[r]] = skinny::swiglu_clamped(tot[r][n][c], tot[r][n][c + 2], j.limit);
        } else {
          if (out_a[r] < j.n_out) j.y[row * j.ldy + out_a[r]] = tot[r][n][c];
          if (out_b[r] < j.n_out) j.y[row * j.ldy + out_b[r]] = tot[r][n][c + 2];
        }
      }
}

// Shared memory of the split schedule's partials (8 warps x NT tiles x 4 x 32 lanes).
template <int NT>
struct Red {
  float v[kWarps * NT * 4 * 32];
};

// Outputs per row group, and row groups per CTA.
__host__ __device__ constexpr int outs_per_group(bool swiglu) { return swiglu ? 8 : 16; }
__host__ __device__ constexpr int groups_per_cta(bool seq, int ks, int rg) { return seq ? kWarps * rg : kWarps / ks; }

// grid (token blocks * row tiles, 1, groups); block b: token block b % nb, row tile b / nb.
template <int F, int NT, int RG, bool kRaw>
__global__ void __launch_bounds__(kThreads, NT * RG >= 8 ? 1 : 2)
    linear_tc_kernel(DevMatrix w, int64_t groups, const uint4* xc, const float* x, int64_t tokens, float* y, int64_t nb,
                     int ks, bool seq) {
  wait_for_previous_kernel();
  __shared__ Red<RG == 1 ? NT : 1> red;  // the split schedule's (RG 1 only)
  extern __shared__ uint4 x_stage[];     // staged_smem() bytes
  const int64_t R = w.rows / groups, C = w.cols, gi = blockIdx.z;
  const int64_t b = blockIdx.x, tb = b % nb, rt = b / nb;
  Job j;
  j.wa = j.wb = w;
  j.w_row0 = gi * R;
  j.o0 = rt * groups_per_cta(seq, ks, RG) * outs_per_group(false);
  j.n_out = R;
  j.K = C;
  j.xc = kRaw ? nullptr : xc + gi * split_row_records(C);
  j.xlo = kRaw ? nullptr : reinterpret_cast<const uint2*>(xc + tokens * groups * split_row_records(C)) + gi * split_row_records(C);
  j.ldxc = groups * split_row_records(C);
  j.x = kRaw ? x + gi * C : nullptr;
  j.ldx = groups * C;
  j.row_src = nullptr;
  j.rb = tb * 8 * NT;
  j.re = j.rb + 8 * NT < tokens ? j.rb + 8 * NT : tokens;
  j.y = y + gi * R;
  j.ldy = groups * R;
  j.limit = 0.0f;
  j.ks = ks;
  j.seq = seq;
  tile<F, false, NT, RG, kRaw>(j, red.v, x_stage);
}

// grid (tiles, row tiles).
template <int F, bool kSwiglu, int NT, int RG, bool kRaw>
__global__ void __launch_bounds__(kThreads, NT * RG >= 8 ? 1 : 2)
    moe_tc_kernel(const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles, const int32_t* tile_count,
                  int64_t identity_rows, const int32_t* row_src, const uint4* xc, int64_t x_rows, const float* x,
                  int64_t K, float* y, int64_t n_out, float limit, int ks, bool seq) {
  wait_for_previous_kernel();
  __shared__ Red<RG == 1 ? NT : 1> red;
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
  j.x = x;
  j.ldx = K;
  j.row_src = row_src;
  j.rb = rb;
  j.re = re;
  j.y = y;
  j.ldy = n_out;
  j.limit = limit;
  j.ks = ks;
  j.seq = seq;
  tile<F, kSwiglu, NT, RG, kRaw>(j, red.v, x_stage);
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

// Slices of the reduction, from the weight's shape alone: row_groups of 16 rows (8 outputs under
// SwiGLU), nslab slabs of the reduction.
int split_for(int64_t row_groups, int64_t nslab) {
  int ks = 1;
  while (ks < kWarps && 2 * ks <= nslab && (row_groups * ks + kWarps - 1) / kWarps < kTargetCtas) ks *= 2;
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

// 32 (docs/perf.md, session 15; V4-Flash shape, 4K context): the tensor-core attention wins at 32
// decode tokens (15.4 against 16.6 ms a step) and 128 (45.8 against 53.6) and in prefill
// (1.24-1.32x), and loses at 8 (6.0 against 5.6) and 1 (2.8 against 2.1): a token's 32-head CTA
// cannot fill the GPU the way 128-key splits of every (token, head) do.
int64_t tc_attention_min_tokens() {
  static const int64_t n = positive_env("DEEPINFER_TC_ATTENTION_MIN_TOKENS", 32);
  return n;
}

int tc_format(const DevMatrix& w) {
  const int f = gemm_format(w);
  if (f == tc::kF8 && w.scale && w.scale_dtype != 4) return tc::kF8F;
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
  if ((a == tc::kF8 || a == tc::kF8F) && (b == tc::kF8 || b == tc::kF8F)) return tc::kF8F;
  return -1;
}

void launch_tc_split_x(const float* x, int64_t rows, int64_t groups, int64_t C, void* out) {
  const int64_t n = rows * groups * tc::split_row_records(C);
  if (n <= 0) return;
  launch(tc::split_x_kernel, blocks_for(n, 256), 256, 0, x, rows, groups, C, static_cast<uint4*>(out));
}

bool tc_reads_x(int64_t rows, const float* x) { return rows <= 8 && reinterpret_cast<uintptr_t>(x) % 16 == 0; }

#define DEEPINFER_TC_FORMATS(M) \
  switch (fmt) {                \
    case tc::kF32: M(tc::kF32) break;   \
    case tc::kF16: M(tc::kF16) break;   \
    case tc::kBF16: M(tc::kBF16) break; \
    case tc::kF8: M(tc::kF8) break;     \
    case tc::kF8F: M(tc::kF8F) break;   \
    default: M(tc::kF4) break;          \
  }

void launch_linear_tc(int fmt, const DevMatrix& w, int64_t groups, const float* x, void* xc, int64_t tokens, float* y) {
  const int64_t R = w.rows / groups;
  if (tokens <= 0 || R <= 0) return;
  const int64_t nslab = (w.cols + tc::kSlabK - 1) / tc::kSlabK;
  const int64_t rgroups = (R + 15) / 16;
  const int ks = tc::split_for(rgroups * groups, nslab);
  const int nt = tc::tiles_for(tokens);
  const int64_t nb = (tokens + 8 * nt - 1) / (8 * nt);
  const int rgw = nt == 8 ? tc::rows_per_warp() : 1;  // 16-row groups a warp holds in the seq schedule
  const bool seq =
      ks == 1 || (nt == 8 && ((rgroups + tc::kWarps * rgw - 1) / (tc::kWarps * rgw)) * nb * groups >= tc::kSeqMinCtas);
  const int rg = seq ? rgw : 1;
  const int64_t per = tc::groups_per_cta(seq, ks, rg);
  const int64_t rt = (rgroups + per - 1) / per;
  const dim3 grid(static_cast<unsigned>(rt * nb), 1, static_cast<unsigned>(groups));
  const bool raw = tc_reads_x(tokens, x);
  if (!raw) {
    launch_tc_split_x(x, tokens, groups, w.cols, xc);
    if (cudaPeekAtLastError() != cudaSuccess) return;  // the caller's check reports it
  }
  const auto* x4 = static_cast<const uint4*>(xc);
#define DEEPINFER_TC_LINEAR_K(F, NT, RG, RAW)                                                                     \
  {                                                                                                               \
    constexpr size_t smem = tc::staged_smem<F, NT, RG, RAW>();                                                    \
    if (!allow_dynamic_smem<tc::linear_tc_kernel<F, NT, RG, RAW>>(smem)) return;                                     \
    launch(tc::linear_tc_kernel<F, NT, RG, RAW>, grid, tc::kThreads, smem, w, groups, RAW ? nullptr : x4,          \
           RAW ? x : nullptr, tokens, y, nb, ks, seq);                                                            \
  }
#define DEEPINFER_TC_LINEAR(F)                 \
  if (raw) {                                   \
    DEEPINFER_TC_LINEAR_K(F, 1, 1, true)       \
  } else if (nt == 4) {                        \
    DEEPINFER_TC_LINEAR_K(F, 4, 1, false)      \
  } else if (nt == 8 && rg == 2) {             \
    DEEPINFER_TC_LINEAR_K(F, 8, 2, false)      \
  } else if (nt == 8) {                        \
    DEEPINFER_TC_LINEAR_K(F, 8, 1, false)      \
  } else {                                     \
    DEEPINFER_TC_LINEAR_K(F, 1, 1, false)      \
  }
  DEEPINFER_TC_FORMATS(DEEPINFER_TC_LINEAR)
#undef DEEPINFER_TC_LINEAR
#undef DEEPINFER_TC_LINEAR_K
}

int tc_moe_tile_rows(int64_t rows_per_expert) { return 8 * tc::tiles_for(rows_per_expert); }

void launch_moe_gemm_tc(bool swiglu, int fmt, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, int tile_rows,
                        const int32_t* row_src, const float* x, int64_t x_rows, void* xc, int64_t K, float* y,
                        int64_t n_out, float limit, bool routed) {
  if (grid_tiles <= 0 || n_out <= 0) return;
  const int64_t nslab = (K + tc::kSlabK - 1) / tc::kSlabK;
  const int64_t rgroups = (n_out + tc::outs_per_group(swiglu) - 1) / tc::outs_per_group(swiglu);
  // Routed experts: split as if 8 experts ran at once (the shape alone decides).
  const int ks = tc::split_for(routed ? 8 * rgroups : rgroups, nslab);
  const int nt = tile_rows / 8;
  const bool seq = nt == 8 || ks == 1;
  const int rg = nt == 8 ? tc::rows_per_warp() : 1;
  const int64_t per = tc::groups_per_cta(seq, ks, rg);
  const dim3 grid(static_cast<unsigned>(grid_tiles), static_cast<unsigned>((rgroups + per - 1) / per));
  const bool raw = tc_reads_x(tile_rows, x);
  if (!raw) {
    launch_tc_split_x(x, x_rows, 1, K, xc);
    if (cudaPeekAtLastError() != cudaSuccess) return;
  }
  const auto* x4 = static_cast<const uint4*>(xc);
#define DEEPINFER_TC_MOE_K(F, S, NT, RG, RAW)                                                                       \
  {                                                                                                                 \
    constexpr size_t smem = tc::staged_smem<F, NT, RG, RAW>();                                                      \
    if (!allow_dynamic_smem<tc::moe_tc_kernel<F, S, NT, RG, RAW>>(smem)) return;                                       \
    launch(tc::moe_tc_kernel<F, S, NT, RG, RAW>, grid, tc::kThreads, smem, wa, wb, tiles, tile_count, identity_rows, \
           row_src, x4, x_rows, x, K, y, n_out, limit, ks, seq);                                                    \
  }
#define DEEPINFER_TC_MOE_S(F, S)                    \
  if (raw) {                                        \
    DEEPINFER_TC_MOE_K(F, S, 1, 1, true)            \
  } else if (nt == 4) {                             \
    DEEPINFER_TC_MOE_K(F, S, 4, 1, false)           \
  } else if (nt == 8 && rg == 2) {                  \
    DEEPINFER_TC_MOE_K(F, S, 8, 2, false)           \
  } else if (nt == 8) {                             \
    DEEPINFER_TC_MOE_K(F, S, 8, 1, false)           \
  } else {                                          \
    DEEPINFER_TC_MOE_K(F, S, 1, 1, false)           \
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
}

#undef DEEPINFER_TC_FORMATS

}  // namespace deepinfer::cuda
