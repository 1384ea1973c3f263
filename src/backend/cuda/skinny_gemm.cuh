#pragma once
// The weight-streaming GEMM tile behind linear, grouped_linear and the MoE experts (nvcc only;
// included by gemm_kernels.cu). Decode reads each weight once and is memory bound, so a CTA owns a
// few weight rows, streams them with 16-byte loads, widens FP8 / FP4 with bit tricks in registers
// and applies every loaded weight to all (up to 8) rows of its row chunk.
//
// Fixed arithmetic (batch invariance): lane l of a warp owns the 16-byte chunk l of every 512-byte
// slab of a weight row; its float32 fmaf chain runs over its chunks' elements in ascending order,
// the 32 lanes are summed by a fixed xor butterfly, and the ks warps of a split-K (ks chosen from
// the weight's shape only) are added in ascending order. None of it depends on the call's rows.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp4_bits.h"

namespace deepinfer::cuda::skinny {

// Kernel formats: the stored dtype's DType number, or kGeneric (weight_at per element) for layouts
// the vector path does not take (see gemm_format()).
constexpr int kF32 = 0, kF16 = 1, kBF16 = 2, kF8 = 3, kF4 = 5, kGeneric = 6;
constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kRW = 4;     // weight rows per warp (linear: 4 outputs; SwiGLU: 2 gate + 2 up rows)
constexpr int kRows = 8;   // rows (tokens) per CTA pass
constexpr int kTargetCtas = 264;  // split K until a shape gives about 2 CTAs per SM (132 SMs)

// Elements per lane chunk (16 bytes; the generic path takes 4 at a time).
__host__ __device__ constexpr int chunk_elems(int fmt) {
  return fmt == kF32 ? 4 : fmt == kF16 || fmt == kBF16 ? 8 : fmt == kF8 ? 16 : fmt == kF4 ? 32 : 4;
}

// One CTA's work: outputs [o0, o0 + per CTA) of n_out for rows [rb, re) (row r reads x row
// row_src[r], or r; writes y row r).
struct Job {
  DevMatrix wa, wb;  // wb: the up projection under SwiGLU
  int64_t w_row0, o0, n_out, K;
  const float* x;
  int64_t ldx;
  const int32_t* row_src;
  int64_t rb, re;
  float* y;
  int64_t ldy;
  float limit;
  int ks;
  bool x_vec;  // x and ldx allow float4 loads (changes how x is read, not the arithmetic)
};

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint32_t shift_by(uint32_t v, int n) { return n >= 0 ? v << n : v >> -n; }

// Elements 4q .. 4q+3 of a lane chunk, scaled. FP8 goes through the hardware e4m3x2 -> f16x2
// conversion (exact: every e4m3 value, NaN included, is an f16) and is multiplied by its block scale
// as the reference does. FP4, kExact: the reference decoding (for scales whose product with 2^126
// overflows); else the bit trick, the same values (tc_gemm's operand pass; the skinny tile's FP4
// chunks take chunk_fma_f4 unless their scale is huge).
template <int F, bool kExact>
__device__ __forceinline__ void decode4(const uint4& raw, int q, float s, float S, float* out) {
  if constexpr (F == kF32) {
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = __uint_as_float(word_of(raw, j));
  } else if constexpr (F == kBF16) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t u = word_of(raw, 2 * q + h);
      out[2 * h] = __uint_as_float(u << 16);
      out[2 * h + 1] = __uint_as_float(u & 0xffff0000u);
    }
  } else if constexpr (F == kF16) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t u = word_of(raw, 2 * q + h);
      out[2 * h] = f16_bits_to_f32(static_cast<uint16_t>(u & 0xffff));
      out[2 * h + 1] = f16_bits_to_f32(static_cast<uint16_t>(u >> 16));
    }
  } else if constexpr (F == kF8) {
    const uint32_t u = word_of(raw, q);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // byte j of the word is element 4q + j
      const __half2 v = __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u >> (16 * h)), __NV_E4M3));
      const float2 f = __half22float2(v);
      out[2 * h] = f.x * s;
      out[2 * h + 1] = f.y * s;
    }
  } else if constexpr (F == kF4) {
    const uint32_t u = word_of(raw, q >> 1) >> (16 * (q & 1));  // nibble n of word w is element 8w + n
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int o = 4 * j;
      if constexpr (kExact) {
        out[j] = f4e2m1_to_f32(static_cast<uint8_t>((u >> o) & 0xf)) * s;
      } else {
        // eem into exponent bits 23-24 and mantissa bit 22: value * 2^-126, exact.
        const uint32_t bits = (shift_by(u, 22 - o) & 0x01c00000u) | (shift_by(u, 28 - o) & 0x80000000u);
        out[j] = __uint_as_float(bits) * S;
      }
    }
  }
}

// Block scale at column k of a weight row whose scale row starts at index srow (FP8 / FP4); FP8
// blocks are 2^bshift columns wide when bshift >= 0 (gemm_format takes powers of two only), else
// block_cols.
template <int F>
__device__ __forceinline__ float scale_at(const DevMatrix& w, int64_t srow, int64_t k, int bshift = -1) {
  if constexpr (F == kF8) {
    if (!w.scale) return 1.0f;
    const int64_t i = srow + (bshift >= 0 ? k >> bshift
                                          : static_cast<int64_t>(static_cast<uint32_t>(k) /
                                                                 static_cast<uint32_t>(w.block_cols)));
    return w.scale_dtype == 4 ? e8m0_to_f32(w.scale[i]) : reinterpret_cast<const float*>(w.scale)[i];
  } else {
    return e8m0_to_f32(w.scale[srow + (k >> 5)]);
  }
}

__device__ __forceinline__ float4 load_x4(const float* p, bool vec) {
  if (vec) return __ldg(reinterpret_cast<const float4*>(p));
  return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}

// Elements 4q .. 4q+3 of the lane chunk at k0: acc[r][m] += w[r] . x[m].
// xk: the column of the quad's first element.
template <int F, int RM, bool kExact>
__device__ __forceinline__ void quad_fma(const uint4* raw, const float* s, const float* S, const float* const* xr,
                                         int64_t xk, bool x_vec, int q, float (&acc)[kRW][RM]) {
  float w[kRW][4];
#pragma unroll
  for (int r = 0; r < kRW; ++r) decode4<F, kExact>(raw[r], q, s[r], S[r], w[r]);
#pragma unroll
  for (int m = 0; m < RM; ++m) {
    const float4 xv = load_x4(xr[m] + xk, x_vec);
#pragma unroll
    for (int r = 0; r < kRW; ++r) {
      acc[r][m] = fmaf(xv.x, w[r][0], acc[r][m]);
      acc[r][m] = fmaf(xv.y, w[r][1], acc[r][m]);
      acc[r][m] = fmaf(xv.z, w[r][2], acc[r][m]);
      acc[r][m] = fmaf(xv.w, w[r][3], acc[r][m]);
    }
  }
}

// FP4, the fast decoding (no huge scale): word q of the lane chunk (elements 8q .. 8q + 7, the
// quads 2q and 2q + 1). Elements i and i + 4 become one f16x2 of value * 2^-14 in four integer
// operations (fp4_bits.h), each is widened exactly and multiplied by S = s * 2^14: the element's
// value times its scale, exactly as decode4 gives it (value * 2^-126 times s * 2^126), and the
// fmaf chains run over the same elements in the same order as quad_fma's. So the same bits, for
// about one instruction an element less (the FP4 stream is issue-bound: docs/perf.md, session 7).
template <int RM>
__device__ __forceinline__ void word_fma_f4(const uint4* raw, const float* S, const float* const* xr, int64_t xk,
                                            bool x_vec, int q, float (&acc)[kRW][RM]) {
  uint32_t pair[kRW][4];
#pragma unroll
  for (int r = 0; r < kRW; ++r) {
    const uint32_t v = word_of(raw[r], q);
    f4_pairs_f16x2(v, pair[r]);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float4 xv[RM];
#pragma unroll
    for (int m = 0; m < RM; ++m) xv[m] = load_x4(xr[m] + xk + 4 * half, x_vec);
#pragma unroll
    for (int r = 0; r < kRW; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float w = __half2float(__ushort_as_half(static_cast<unsigned short>(pair[r][i] >> (16 * half)))) * S[r];
#pragma unroll
        for (int m = 0; m < RM; ++m) {
          const float x = i == 0 ? xv[m].x : i == 1 ? xv[m].y : i == 2 ? xv[m].z : xv[m].w;
          acc[r][m] = fmaf(x, w, acc[r][m]);
        }
      }
  }
}

// The FP4 lane chunk by words (word_fma_f4), for one or two rows (more rows take quad_fma, whose
// decoding is shared by the rows: the same bits).
template <int RM>
__device__ __forceinline__ void chunk_fma_f4(const uint4* raw, const float* S, const float* const* xr, int64_t k0,
                                             bool x_vec, float (&acc)[kRW][RM]) {
  static_assert(RM <= 2, "the FP4 word path is for one or two rows");
#pragma unroll
  for (int q = 0; q < 4; ++q) word_fma_f4<RM>(raw, S, xr, k0 + 8 * q, x_vec, q, acc);
}

// acc[r][m] += the lane chunk at k0 of weight rows wrow[r] times x rows xr[m] (vector formats).
// One or two rows: unrolled, so the chunk's x loads are all in flight at once (a chain of
// dependent x loads would bound the decode GEMV); more rows: a loop (unrolled, the compiler hoists
// every x load of the chunk and spills), their arithmetic hides the latency.
template <int F, int RM, bool kExact>
__device__ __forceinline__ void chunk_fma(const uint4* raw, const float* s, const float* S, const float* const* xr,
                                          int64_t k0, bool x_vec, float (&acc)[kRW][RM]) {
  constexpr int CH = chunk_elems(F);
  if constexpr (RM <= 2) {
#pragma unroll
    for (int q = 0; q < CH / 4; ++q) quad_fma<F, RM, kExact>(raw, s, S, xr, k0 + 4 * q, x_vec, q, acc);
  } else {
#pragma unroll 1
    for (int q = 0; q < CH / 4; ++q) quad_fma<F, RM, kExact>(raw, s, S, xr, k0 + 4 * q, x_vec, q, acc);
  }
}

__device__ __forceinline__ float silu_f(float x) { return x * (1.0f / (1.0f + expf(-x))); }

// V4's clamped SwiGLU of gate g and up u, as the CPU reference: silu(std::min(g, limit)) *
// std::clamp(u, -limit, limit). Every SwiGLU epilogue of the backend goes through it.
__device__ __forceinline__ float swiglu_clamped(float g, float u, float limit) {
  const float gl = limit < g ? limit : g;
  const float uc = u < -limit ? -limit : (limit < u ? limit : u);
  return silu_f(gl) * uc;
}

// Lanes: a fixed butterfly (every lane ends with the same sum).
template <int RM>
__device__ __forceinline__ void lane_sums(float (&acc)[kRW][RM]) {
#pragma unroll
  for (int r = 0; r < kRW; ++r)
#pragma unroll
    for (int m = 0; m < RM; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int d = 16; d >= 1; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
      acc[r][m] = v;
    }
}

// The epilogue of output oi (of the CTA's) for row m of the chunk: v the sum of its weight row,
// u that of its up row under SwiGLU.
template <bool kSwiglu>
__device__ __forceinline__ void store_out(const Job& j, int oi, int m, float v, float u) {
  const int64_t row = j.rb + m, o = j.o0 + oi;
  if (row >= j.re || o >= j.n_out) return;
  if constexpr (kSwiglu) v = swiglu_clamped(v, u, j.limit);
  j.y[row * j.ldy + o] = v;
}

// After the slabs: lane sums, split-K partials added in ascending order through shared memory,
// then the epilogue, one thread per (output, row).
template <bool kSwiglu, int RM>
__device__ __forceinline__ void finish(const Job& j, float (&acc)[kRW][RM], float (&red)[kWarps][kRW][kRows]) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int ks = j.ks;
  lane_sums<RM>(acc);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRW; ++r)
#pragma unroll
      for (int m = 0; m < RM; ++m) red[warp][r][m] = acc[r][m];
  }
  __syncthreads();
  const int outs = (kSwiglu ? 2 : kRW) * (kWarps / ks);
  const int t = static_cast<int>(threadIdx.x);
  if (t < outs * RM) {
    const int oi = t / RM, m = t % RM;
    const int g = oi / (kSwiglu ? 2 : kRW), r = oi % (kSwiglu ? 2 : kRW);
    float v = red[g * ks][r][m], u = 0.0f;
    for (int i = 1; i < ks; ++i) v += red[g * ks + i][r][m];
    if constexpr (kSwiglu) {
      u = red[g * ks][r + 2][m];
      for (int i = 1; i < ks; ++i) u += red[g * ks + i][r + 2][m];
    }
    store_out<kSwiglu>(j, oi, m, v, u);
  }
}

// Weight row r (of kRW) of warp row group rg in job j: SwiGLU warps take 2 gate rows (r 0-1, wa)
// and the same 2 up rows (r 2-3, wb). Rows past the end compute row 0, never stored.
template <bool kSwiglu>
__device__ __forceinline__ int64_t weight_row(const Job& j, int rg, int r) {
  const int64_t o = kSwiglu ? j.o0 + rg * 2 + (r & 1) : j.o0 + rg * kRW + r;
  return j.w_row0 + (o < j.n_out ? o : 0);
}
// The x rows of a chunk of RM rows (missing rows repeat the first, never stored).
template <int RM>
__device__ __forceinline__ void x_rows(const Job& j, const float* (&xr)[RM]) {
#pragma unroll
  for (int m = 0; m < RM; ++m) {
    const int64_t row = j.rb + m < j.re ? j.rb + m : j.rb;
    xr[m] = j.x + (j.row_src ? static_cast<int64_t>(j.row_src[row]) : row) * j.ldx;
  }
}
// Vector formats: log2 of the FP8 block width, a row's first byte, its first scale index (block
// row for FP8).
template <int F>
__device__ __forceinline__ int block_shift(const DevMatrix& w) {
  return F == kF8 && w.block_cols > 0 ? __ffs(static_cast<int>(w.block_cols)) - 1 : 0;
}
// Bytes of `cols` elements of format F (FP4: two a byte): a row's pitch, or a column's offset in it.
template <int F>
__host__ __device__ constexpr int64_t cols_bytes(int64_t cols) {
  return F == kF4 ? cols / 2 : cols * (F == kF32 ? 4 : F == kF8 ? 1 : 2);
}
template <int F>
__device__ __forceinline__ const uint8_t* row_bytes(const DevMatrix& w, int64_t row, int64_t K) {
  return w.data + row * cols_bytes<F>(K);
}
template <int F>
__device__ __forceinline__ int64_t scale_row(const DevMatrix& w, int64_t row) {
  return F == kF8 ? (row / (w.block_rows > 0 ? w.block_rows : 1)) * w.scale_cols : row * w.scale_cols;
}
// FP4 chunks of 1-2 rows take word_fma_f4, more rows quad_fma (the same bits).
template <int F, int RM>
constexpr bool kFp4Words = F == kF4 && RM <= 2;

// The scale of the lane chunk at k0 (s) and, for FP4, s times the decoding's constant (S: 2^14 for
// word_fma_f4's f16 pairs, 2^126 for decode4's bit trick); true when that product overflowed (the
// chunk then takes the exact decoding).
template <int F, bool kWords>
__device__ __forceinline__ bool chunk_scale(const DevMatrix& w, int64_t srow, int64_t k0, int bshift, float& s,
                                            float& S) {
  s = S = 1.0f;
  if constexpr (F == kF8) {
    s = S = scale_at<F>(w, srow, k0, bshift);
  } else if constexpr (F == kF4) {
    s = scale_at<F>(w, srow, k0, 0);
    S = s * (kWords ? 0x1p14f : 0x1p126f);
    return fabsf(S) == INFINITY && fabsf(s) != INFINITY;
  }
  return false;
}

// The lane chunks at column k0 of the kRW rows starting at bs[r] (zeros past K: K is a multiple
// of the chunk, so a chunk is whole or absent).
template <int F>
__device__ __forceinline__ void load_chunks(const uint8_t* const (&bs)[kRW], int64_t k0, int64_t K, uint4 (&raw)[kRW]) {
  constexpr int64_t kBytes = F == kF32 ? 4 : F == kF8 ? 1 : 2;  // FP4: pitch K / 2
#pragma unroll
  for (int r = 0; r < kRW; ++r)
    raw[r] = k0 < K ? __ldg(reinterpret_cast<const uint4*>(bs[r] + (F == kF4 ? k0 / 2 : k0 * kBytes)))
                    : make_uint4(0, 0, 0, 0);
}

// One slab's lane chunk of the kRW rows (vector formats): its scales, then the fmaf chains.
// mat(r): weight row r's matrix; srow / bshift as scale_row / block_shift give them.
template <int F, int RM, typename MatOf>
__device__ __forceinline__ void slab_fma(const MatOf& mat, const uint4* raw, const int64_t* srow, const int* bshift,
                                         const float* const* xr, int64_t k0, bool x_vec, float (&acc)[kRW][RM]) {
  float s[kRW], S[kRW];
  bool exact = false;
#pragma unroll
  for (int r = 0; r < kRW; ++r)
    exact |= chunk_scale<F, kFp4Words<F, RM>>(mat(r), srow[r], k0, bshift[r], s[r], S[r]);
  if constexpr (kFp4Words<F, RM>) {
    if (!exact)
      chunk_fma_f4<RM>(raw, S, xr, k0, x_vec, acc);
    else
      chunk_fma<F, RM, true>(raw, s, S, xr, k0, x_vec, acc);
  } else {
    if (!exact)
      chunk_fma<F, RM, false>(raw, s, S, xr, k0, x_vec, acc);
    else
      chunk_fma<F, RM, true>(raw, s, S, xr, k0, x_vec, acc);
  }
}

// The CTA's tile for a row chunk of RM rows or fewer.
template <int F, bool kSwiglu, int RM>
__device__ __forceinline__ void tile(const Job& j, float (&red)[kWarps][kRW][kRows]) {
  constexpr int CH = chunk_elems(F);
  constexpr int64_t kSlab = 32 * CH;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int ks = j.ks, ksi = warp % ks, rg = warp / ks;
  const DevMatrix* wm[kRW];
  int64_t wrow[kRW];
#pragma unroll
  for (int r = 0; r < kRW; ++r) {
    wm[r] = (kSwiglu && r >= 2) ? &j.wb : &j.wa;
    wrow[r] = weight_row<kSwiglu>(j, rg, r);
  }
  const float* xr[RM];
  x_rows<RM>(j, xr);
  float acc[kRW][RM];
#pragma unroll
  for (int r = 0; r < kRW; ++r)
#pragma unroll
    for (int m = 0; m < RM; ++m) acc[r][m] = 0.0f;

  const int64_t K = j.K, nslab = (K + kSlab - 1) / kSlab;
  if constexpr (F == kGeneric) {
    for (int64_t sl = ksi; sl < nslab; sl += ks) {
      const int64_t k0 = sl * kSlab + lane * CH;
#pragma unroll
      for (int e = 0; e < CH; ++e) {
        const int64_t k = k0 + e;
        if (k >= K) break;
        float w[kRW];
#pragma unroll
        for (int r = 0; r < kRW; ++r) w[r] = weight_at(*wm[r], wrow[r], k);
#pragma unroll
        for (int m = 0; m < RM; ++m) {
          const float xv = __ldg(xr[m] + k);
#pragma unroll
          for (int r = 0; r < kRW; ++r) acc[r][m] = fmaf(xv, w[r], acc[r][m]);
        }
      }
    }
  } else {
    const uint8_t* base[kRW];
    int64_t srow[kRW];  // first scale index of each row (block row for FP8)
    int bshift[kRW];    // log2 of the FP8 block width
#pragma unroll
    for (int r = 0; r < kRW; ++r) {
      bshift[r] = block_shift<F>(*wm[r]);
      base[r] = row_bytes<F>(*wm[r], wrow[r], K);
      srow[r] = scale_row<F>(*wm[r], wrow[r]);
    }
    auto load = [&](int64_t sl, uint4 (&raw)[kRW]) { load_chunks<F>(base, sl * kSlab + lane * CH, K, raw); };
    uint4 raw[kRW];
    if (ksi < nslab) load(ksi, raw);
#pragma unroll 1
    for (int64_t sl = ksi; sl < nslab; sl += ks) {
      // The next slab's loads are in flight during this slab's arithmetic.
      uint4 next[kRW];
      if (sl + ks < nslab) load(sl + ks, next);
      const int64_t k0 = sl * kSlab + lane * CH;
      if (k0 < K) {
        slab_fma<F, RM>([&](int r) -> const DevMatrix& { return *wm[r]; }, raw, srow, bshift, xr, k0, j.x_vec, acc);
      }
#pragma unroll
      for (int r = 0; r < kRW; ++r) raw[r] = next[r];
    }
  }
  finish<kSwiglu, RM>(j, acc, red);
}

// Runs the tile with the smallest row template that holds the chunk (the arithmetic is the same).
// kMaxRows 2: a kernel for chunks of 1-2 rows only (decode at batch 1-2), which holds fewer
// registers than one that also inlines the 4- and 8-row tiles.
template <int F, bool kSwiglu, int kMaxRows>
__device__ __forceinline__ void run(const Job& j) {
  static_assert(kMaxRows == 2 || kMaxRows == kRows, "1-2 row kernels or all row counts");
  __shared__ float red[kWarps][kRW][kRows];
  const int64_t n = j.re - j.rb;
  if (n <= 1) {
    tile<F, kSwiglu, 1>(j, red);
  } else if constexpr (kMaxRows <= 2) {
    tile<F, kSwiglu, 2>(j, red);
  } else {
    if (n <= 2)
      tile<F, kSwiglu, 2>(j, red);
    else if (n <= 4)
      tile<F, kSwiglu, 4>(j, red);
    else
      tile<F, kSwiglu, 8>(j, red);
  }
}

// The tile for many jobs in one CTA (decode: chunks of 1-2 rows, vector formats): the CTA takes
// jobs blockIdx.x, + gridDim.x, ... (job(b) builds job b; all share K and ks), and each warp's loads
// of its next slab, in this job or the next, are in flight during this slab's arithmetic, so the
// memory pipe does not drain between jobs (a short-K decode GEMV is one or two slabs a warp: as
// separate CTAs, each waited for its loads once and then retired). Every job's arithmetic is
// tile()'s: the same lanes, slabs, split and order, so the same bits. Rows of a job beyond its
// re - rb are skipped (tile() computes them as copies of the first and never stores them).
template <int F, bool kSwiglu, int RM, typename JobOf>
__device__ __forceinline__ void stream(int64_t jobs, const JobOf& job, float (&red)[kWarps][kRW][kRows]) {
  static_assert(F != kGeneric, "the streaming form takes the vector formats");
  constexpr int CH = chunk_elems(F);
  constexpr int64_t kSlab = 32 * CH;
  int64_t b = blockIdx.x;
  if (b >= jobs) return;  // whole CTA
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  Job j = job(b);
  const int ks = j.ks, ksi = warp % ks, rg = warp / ks;
  const int64_t K = j.K, nslab = (K + kSlab - 1) / kSlab;  // ks <= nslab / 2 (split_for), so ksi < nslab
  auto mat = [&](const Job& jj, int r) -> const DevMatrix& { return (kSwiglu && r >= 2) ? jj.wb : jj.wa; };
  const uint8_t* base[kRW];
  auto set_base = [&](const Job& jj, const uint8_t* (&out)[kRW]) {
#pragma unroll
    for (int r = 0; r < kRW; ++r) out[r] = row_bytes<F>(mat(jj, r), weight_row<kSwiglu>(jj, rg, r), K);
  };
  auto load = [&](const uint8_t* const (&bs)[kRW], int64_t sl, uint4 (&raw)[kRW]) {
    load_chunks<F>(bs, sl * kSlab + lane * CH, K, raw);
  };
  int64_t srow[kRW];
  int bshift[kRW];
  const float* xr[RM];
  int rows = 0;
  float acc[kRW][RM];
  auto begin_job = [&]() {
#pragma unroll
    for (int r = 0; r < kRW; ++r) {
      bshift[r] = block_shift<F>(mat(j, r));
      srow[r] = scale_row<F>(mat(j, r), weight_row<kSwiglu>(j, rg, r));
#pragma unroll
      for (int m = 0; m < RM; ++m) acc[r][m] = 0.0f;
    }
    x_rows<RM>(j, xr);
    rows = static_cast<int>(j.re - j.rb);
  };
  set_base(j, base);
  begin_job();
  uint4 raw[kRW];
  load(base, ksi, raw);
  int64_t sl = ksi;
#pragma unroll 1
  for (;;) {
    // What comes after slab sl: the next slab of this job, or the first of the next job.
    int64_t nsl = sl + ks, nb = b;
    const bool last = nsl >= nslab;
    const uint8_t* nbase[kRW];
#pragma unroll
    for (int r = 0; r < kRW; ++r) nbase[r] = base[r];
    if (last) {
      nb = b + gridDim.x;
      nsl = ksi;
      if (nb < jobs) set_base(job(nb), nbase);  // built again at the switch: fewer live registers
    }
    uint4 next[kRW];
    if (nb < jobs) load(nbase, nsl, next);
    const int64_t k0 = sl * kSlab + lane * CH;
    if (k0 < K) {
      auto mj = [&](int r) -> const DevMatrix& { return mat(j, r); };
      if (RM == 1 || rows >= RM) {
        slab_fma<F, RM>(mj, raw, srow, bshift, xr, k0, j.x_vec, acc);
      } else {  // a 1-row job in a 2-row launch: row 0 only (row 1 would never be stored)
        float a1[kRW][1];
#pragma unroll
        for (int r = 0; r < kRW; ++r) a1[r][0] = acc[r][0];
        const float* x1[1] = {xr[0]};
        slab_fma<F, 1>(mj, raw, srow, bshift, x1, k0, j.x_vec, a1);
#pragma unroll
        for (int r = 0; r < kRW; ++r) acc[r][0] = a1[r][0];
      }
    }
    if (last) {
      if (ks == 1) {  // no split: the warp holds whole sums; lane r * RM + m stores (r, m)
        lane_sums<RM>(acc);
        constexpr int kOuts = kSwiglu ? 2 : kRW;
#pragma unroll
        for (int r = 0; r < kOuts; ++r)
#pragma unroll
          for (int m = 0; m < RM; ++m)
            if (lane == r * RM + m) store_out<kSwiglu>(j, rg * kOuts + r, m, acc[r][m], kSwiglu ? acc[r + 2][m] : 0.0f);
      } else {
        finish<kSwiglu, RM>(j, acc, red);
        __syncthreads();  // red is written again by the next job
      }
      if (nb >= jobs) break;
      b = nb;
      j = job(b);
#pragma unroll
      for (int r = 0; r < kRW; ++r) base[r] = nbase[r];
      begin_job();
    }
    sl = nsl;
#pragma unroll
    for (int r = 0; r < kRW; ++r) raw[r] = next[r];
  }
}

// Outputs per CTA under split ks.
__host__ __device__ constexpr int outs_per_cta(bool swiglu, int ks) { return (swiglu ? 2 : kRW) * (kWarps / ks); }

}  // namespace deepinfer::cuda::skinny
