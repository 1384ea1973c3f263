// Dense CUDA kernels: straightforward first versions, float32 arithmetic as the CPU ops do it.
#include "backend/cuda/dense_kernels.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const float* src, const int64_t* rows, int64_t count, int64_t width, float* dst) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * width) return;
  dst[i] = src[rows[i / width] * width + i % width];
}

__global__ void embed_kernel(DevMatrix table, const int32_t* ids, int64_t tokens, int64_t copies, float* out) {
  wait_for_previous_kernel();
  const int64_t D = table.cols;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * copies * D) return;
  const int64_t t = i / (copies * D), d = i % D;
  const int32_t id = ids[t];
  // Ids staged from the host are checked there; ids computed on the device (embed_ids) may not be.
  out[i] = id >= 0 && id < table.rows ? weight_at(table, id, d) : nan_f32();
}

// One block per row: the sum of squares in double (as the CPU op), then the scaled row. Rows of a
// multiple of 4 floats on 16-byte boundaries take float4 loads, so a thread's loads are all in flight
// at once (a batch-1 row is latency bound, not bandwidth bound).
__device__ __forceinline__ double block_sum(double s, double* partial) {
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  if ((threadIdx.x & 31) == 0) partial[warp] = s;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < warps; ++w) total += partial[w];  // every thread: the same fixed order
  return total;
}

__global__ void rms_norm_kernel(const float* x, const float* weight, float eps, int64_t n, float* out) {
  wait_for_previous_kernel();
  __shared__ double partial[kThreads / 32];
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                   (weight == nullptr || reinterpret_cast<uintptr_t>(weight) % 16 == 0);
  double s = 0.0;
  if (vec) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = x4[i];
      s += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
           static_cast<double>(v.w) * v.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(xr[i]) * xr[i];
  }
  const double total = block_sum(s, partial);
  const float inv = 1.0f / sqrtf(static_cast<float>(total / static_cast<double>(n)) + eps);
  // Every thread reads its elements before writing them (in place is safe).
  if (vec) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
    auto* o4 = reinterpret_cast<float4*>(o);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      float4 v = x4[i];
      v.x *= inv, v.y *= inv, v.z *= inv, v.w *= inv;
      if (weight) {
        const float4 w = reinterpret_cast<const float4*>(weight)[i];
        v.x *= w.x, v.y *= w.y, v.z *= w.z, v.w *= w.w;
      }
      o4[i] = v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = xr[i] * inv;
      o[i] = weight ? weight[i] * v : v;
    }
  }
}

__global__ void rope_kernel(float* x, const int64_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
                            DevRope rope, float sign) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * heads * rope.half) return;
  const int64_t pair = i % rope.half, th = i / rope.half, t = th / heads;
  float c, s;
  rope_angle(rope, pair, positions[t], &c, &s);
  s *= sign;
  float* r = x + th * head_dim + head_dim - 2 * rope.half;
  const float a = r[2 * pair], b = r[2 * pair + 1];
  r[2 * pair] = a * c - b * s;
  r[2 * pair + 1] = b * c + a * s;
}

__global__ void mhc_post_kernel(const float* old, const float* out, const float* post, const float* comb,
                                int64_t tokens, int64_t n, int64_t D, float* residual) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * n * D) return;
  const int64_t d = i % D, k = (i / D) % n, t = i / (n * D);
  float s = post[t * n + k] * out[t * D + d];
  for (int64_t j = 0; j < n; ++j) s += comb[(t * n + j) * n + k] * old[(t * n + j) * D + d];
  residual[i] = s;
}

// ---------------------------------------------------------------- mHC sites
// The mixing GEMM is split over the width in chunks of kMixChunk columns, fixed by the width alone
// (never the batch), so each token's sums are the same in any step. Per (token, chunk): the chunk's
// sum of squares (double) and its dot with every fn row; the finish kernel adds the chunks in order
// and scales by the RMS factor (the reference's linear(x, fn) * rsqrt).
//
// A warp takes kMixTokens tokens of one chunk and P of the mixes at a time. Lane l sums the chunk's
// columns l, l + 32, ... (8 of them) serially for each (token, mix), then the lanes' sums are added by
// the xor tree over lane bits 16, 8, 4, 2, 1. Many tokens (P = 24, V4's (2 + hc_mult) * hc_mult): one
// butterfly that also scatters the 96 sums (lane l ends with sums 3l .. 3l + 2; 93 shuffles, where a
// tree per sum takes 480). Few tokens (P = 3): the 8 warps of a CTA take 3 mixes each of the same
// tokens, so a decode step's site has 8x the parallelism. Either way every sum is the same tree over
// the same lane sums (float addition commutes), so a token's bits depend on the width alone.
constexpr int kMixChunk = 256;
constexpr int kMixTokens = 4;
constexpr int kMixWarps = kThreads / 32;

// One step of the scattering butterfly: lanes l and l ^ Offset hold the same 2 * Half sums; each
// adds its partner's share of the half it keeps (the upper one where its Offset bit is set).
template <int Half, int Offset>
__device__ __forceinline__ void butterfly_scatter(float* a, int lane) {
  const bool upper = (lane & Offset) != 0;
#pragma unroll
  for (int i = 0; i < Half; ++i) {
    const float give = upper ? a[i] : a[i + Half];
    a[i] = (upper ? a[i + Half] : a[i]) + __shfl_xor_sync(0xffffffffu, give, Offset);
  }
  if constexpr (Offset > 1) butterfly_scatter<Half / 2, Offset / 2>(a, lane);
}

// P: mixes a warp sums at a time. Many tokens (kMixWarps groups of tokens a CTA, one slice): each
// warp its own tokens, every mix. Few tokens (one group a CTA, kMixWarps slices): warp w takes mixes
// w P .. w P + P - 1, then (w + kMixWarps) P ...
template <int P, bool kFew>
__global__ void __launch_bounds__(kThreads) mhc_mix_partials_kernel(const float* residual, int64_t tokens, int64_t width,
                                                                    const float* fn, int64_t mixes, int64_t chunks,
                                                                    double* sumsq, float* dots) {
  wait_for_previous_kernel();
  constexpr int kSums = kMixTokens * P;
  static_assert(kFew || kSums == 3 * 32, "the scattering butterfly leaves three sums a lane");
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t group = kFew ? blockIdx.x : static_cast<int64_t>(blockIdx.x) * kMixWarps + warp;
  const int slice = kFew ? warp : 0, slices = kFew ? kMixWarps : 1;
  const int64_t t0 = group * kMixTokens, chunk = blockIdx.y;  // chunks in y: at most 65535
  if (t0 >= tokens) return;
  constexpr int J = kMixChunk / 32;  // columns a lane sums
  // A column past the width reads the last one and counts as zero (loads are predicated, not
  // branched around). Few tokens: every x and fn value is loaded before any sum needs it, and a decode step's site waits
  // out one memory latency, not one per column; many tokens: x is read where it is used (registers).
  int col[J];
  bool in[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int64_t c = chunk * kMixChunk + lane + 32 * j;
    in[j] = c < width;
    col[j] = static_cast<int>(in[j] ? c : width - 1);
  }
  const float* rows[kMixTokens];
#pragma unroll
  for (int k = 0; k < kMixTokens; ++k) rows[k] = residual + (t0 + k < tokens ? t0 + k : t0) * width;
  float xs[kFew ? J : 1][kMixTokens];
  if constexpr (kFew) {
#pragma unroll
    for (int k = 0; k < kMixTokens; ++k)
#pragma unroll
      for (int j = 0; j < J; ++j) xs[j][k] = rows[k][col[j]];
  }
  const auto x_at = [&](int j, int k) {
    float v;
    if constexpr (kFew) v = xs[j][k];
    else v = rows[k][col[j]];
    return in[j] ? v : 0.0f;
  };
  if (slice == 0) {
    double ss[kMixTokens] = {};
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int k = 0; k < kMixTokens; ++k) {
        const double v = x_at(j, k);
        ss[k] += v * v;
      }
#pragma unroll
    for (int k = 0; k < kMixTokens; ++k) {
      for (int offset = 16; offset > 0; offset /= 2) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], offset);
      if (lane == 0 && t0 + k < tokens) sumsq[(t0 + k) * chunks + chunk] = ss[k];
    }
  }
  for (int64_t m0 = static_cast<int64_t>(slice) * P; m0 < mixes; m0 += static_cast<int64_t>(slices) * P) {
    float a[kSums];  // a[k * P + m]: token t0 + k, mix m0 + m
#pragma unroll
    for (int i = 0; i < kSums; ++i) a[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      // Many tokens: the branch keeps the compiler from hoisting all of the 8 x 28 loads at once,
      // which spills (8 warps an SM hide the latency instead).
      if constexpr (!kFew)
        if (!in[j]) continue;
      float x[kMixTokens], f[P];
#pragma unroll
      for (int k = 0; k < kMixTokens; ++k) x[k] = x_at(j, k);
#pragma unroll
      for (int m = 0; m < P; ++m) f[m] = in[j] && m0 + m < mixes ? __ldg(fn + (m0 + m) * width + col[j]) : 0.0f;
#pragma unroll
      for (int m = 0; m < P; ++m)
#pragma unroll
        for (int k = 0; k < kMixTokens; ++k) a[k * P + m] = fmaf(x[k], f[m], a[k * P + m]);
    }
    if constexpr (kFew) {
#pragma unroll
      for (int i = 0; i < kSums; ++i)
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) a[i] += __shfl_xor_sync(0xffffffffu, a[i], offset);
      if (lane < kSums) {  // lane i writes sum i (a register index must be static: select it)
        float v = a[0];
#pragma unroll
        for (int i = 1; i < kSums; ++i) v = lane == i ? a[i] : v;
        const int k = lane / P;
        const int64_t m = m0 + lane % P;
        if (m < mixes && t0 + k < tokens) dots[((t0 + k) * chunks + chunk) * mixes + m] = v;
      }
    } else {
      butterfly_scatter<kSums / 2, 16>(a, lane);
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        const int o = 3 * lane + r, k = o / P;
        const int64_t m = m0 + o % P;
        if (m < mixes && t0 + k < tokens) dots[((t0 + k) * chunks + chunk) * mixes + m] = a[r];
      }
    }
  }
}

struct MhcFinishArgs {
  const double* sumsq;
  const float* dots;
  int64_t chunks, width, mixes, n, D, iters;
  float norm_eps, hc_eps;
  const float *base, *scale, *residual;
  float *input, *post, *comb;  // post / comb null for the head; input null: coefficients only
  int64_t slice;               // premix columns per block
  float* pre_out = nullptr;    // [T, n] or null (DeepSeek-V4.1's mhc_coefficients)
};

// One warp's Sinkhorn when the n x n matrix fits its lanes (lane j * n + k holds c[j][k]); each sum
// is taken in ascending order, as the serial loop below, so both give the same bits.
__device__ void sinkhorn_warp(float* c, int64_t n, int64_t iters, float eps) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int j = lane / static_cast<int>(n), k = lane % static_cast<int>(n);
  const bool mine = lane < n * n;
  float v = mine ? c[lane] : 0.0f;
  for (int64_t it = 0; it < (iters > 1 ? iters : 1); ++it) {
    if (it > 0) {
      float s = 0.0f;
      for (int q = 0; q < n; ++q) s += __shfl_sync(0xffffffffu, v, mine ? j * static_cast<int>(n) + q : 0);
      v /= (s + eps);
    }
    float s = 0.0f;
    for (int q = 0; q < n; ++q) s += __shfl_sync(0xffffffffu, v, mine ? q * static_cast<int>(n) + k : 0);
    v /= (s + eps);
  }
  if (mine) c[lane] = v;
}

__device__ void sinkhorn_serial(float* c, int64_t n, int64_t iters, float eps) {
  for (int64_t it = 0; it < (iters > 1 ? iters : 1); ++it) {  // columns at least once, as the CPU op
    if (it > 0)  // rows, then columns; the first round normalises columns only
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < n; ++k) s += c[j * n + k];
        for (int64_t k = 0; k < n; ++k) c[j * n + k] /= (s + eps);
      }
    for (int64_t k = 0; k < n; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < n; ++j) s += c[j * n + k];
      for (int64_t j = 0; j < n; ++j) c[j * n + k] /= (s + eps);
    }
  }
}

// Sinkhorn for a compile-time n (V4's hc_mult 4): lane j * N + k holds c[j][k] in a register and
// each sum fetches its N terms with independent shuffles, then adds them in ascending order as the
// serial loop does, so the bits are the same with a fraction of the dependent latency.
template <int N>
__device__ float sinkhorn_lanes(float v, int64_t iters, float eps) {
  const int lane = static_cast<int>(threadIdx.x) & 31, j = (lane / N) % N, k = lane % N;
  // v / (the sum of the N values at lanes first, first + stride, ...), added in that order.
  auto normalise = [&](int first, int stride) {
    float r[N];
#pragma unroll
    for (int q = 0; q < N; ++q) r[q] = __shfl_sync(0xffffffffu, v, first + q * stride);
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < N; ++q) s += r[q];
    v /= (s + eps);
  };
  for (int64_t it = 0; it < (iters > 1 ? iters : 1); ++it) {
    if (it > 0) normalise(j * N, 1);  // row j
    normalise(k, N);                  // column k
  }
  return v;
}

// grid (tokens, column slices): every block of a token derives the same coefficients (the same
// arithmetic), slice 0 writes post / comb, and each block mixes its columns of the copies. At one
// token this is a chain of dependent steps (sums, coefficients, Sinkhorn, premix), so the constants
// are loaded before the sums, each coefficient's pre-activation is formed where its mix is summed,
// and the common n = 4 Sinkhorn runs in registers.
__global__ void __launch_bounds__(kThreads) mhc_finish_kernel(MhcFinishArgs a) {
  wait_for_previous_kernel();
  extern __shared__ float sm[];
  float* z = sm;                 // [mixes]: mix * scale + base, what the sigmoids / softmax take
  float* c = sm + a.mixes;       // [n * n]
  float* pre = c + a.n * a.n;    // [n]
  __shared__ float inv;
  const int64_t t = blockIdx.x, n = a.n;
  const bool head = a.post == nullptr, writer = blockIdx.y == 0;
  // The chunks' partials, added in a fixed shape (lane l takes chunks l, l + 32, ... in order, then a
  // fixed butterfly): warp 0 the sum of squares, then warp w the mixes w, w + 8, ... All loads of a
  // lane are independent, so a sum costs one memory latency, not one per chunk.
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) & 31;
  auto scale_index = [&](int64_t m) { return m < n ? 0 : m < 2 * n ? 1 : 2; };  // pre, post, comb
  constexpr int kMaxMixesPerWarp = 8;  // (2 + n) n <= 64 mixes for n <= 6; more take a second pass
  float base_of[kMaxMixesPerWarp], scale_of[kMaxMixesPerWarp];
#pragma unroll
  for (int q = 0; q < kMaxMixesPerWarp; ++q) {
    const int64_t m = warp + q * (kThreads / 32);
    base_of[q] = m < a.mixes ? a.base[m] : 0.0f;
    scale_of[q] = m < a.mixes ? a.scale[scale_index(m)] : 0.0f;
  }
  if (warp == 0) {
    double ss = 0.0;
    for (int64_t s = lane; s < a.chunks; s += 32) ss += a.sumsq[t * a.chunks + s];
    for (int offset = 16; offset > 0; offset /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
    if (lane == 0) inv = 1.0f / sqrtf(static_cast<float>(ss / static_cast<double>(a.width)) + a.norm_eps);
  }
  __syncthreads();
  auto mix_of = [&](int64_t m) {  // lane 0's sum is the mix
    float v = 0.0f;
    for (int64_t s = lane; s < a.chunks; s += 32) v += a.dots[(t * a.chunks + s) * a.mixes + m];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v * inv;
  };
#pragma unroll
  for (int q = 0; q < kMaxMixesPerWarp; ++q) {
    const int64_t m = warp + q * (kThreads / 32);
    if (m >= a.mixes) break;
    const float mix = mix_of(m);
    if (lane == 0) z[m] = __fmaf_rn(mix, scale_of[q], base_of[q]);
  }
  for (int64_t m = warp + kMaxMixesPerWarp * (kThreads / 32); m < a.mixes; m += kThreads / 32) {
    const float mix = mix_of(m);
    if (lane == 0) z[m] = __fmaf_rn(mix, a.scale[scale_index(m)], a.base[m]);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    pre[i] = sigmoid_f(z[i]) + a.hc_eps;
    if (!head && writer) a.post[t * n + i] = 2.0f * sigmoid_f(z[n + i]);
    if (a.pre_out && writer) a.pre_out[t * n + i] = pre[i];
  }
  if (!head && writer) {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {  // row j: softmax over k, then + eps
      float* row = c + j * n;
      const float* zr = z + 2 * n + j * n;
      float mx = -INFINITY;
      for (int64_t k = 0; k < n; ++k) mx = fmaxf(mx, zr[k]);
      float sum = 0.0f;
      for (int64_t k = 0; k < n; ++k) {
        row[k] = expf(zr[k] - mx);
        sum += row[k];
      }
      const float r = 1.0f / sum;
      for (int64_t k = 0; k < n; ++k) row[k] = row[k] * r + a.hc_eps;
    }
    __syncthreads();
    if (n == 4) {
      if (threadIdx.x < 32) {
        const float v = sinkhorn_lanes<4>(c[lane & 15], a.iters, a.hc_eps);
        if (lane < 16) a.comb[t * 16 + lane] = v;
      }
    } else {
      if (n * n <= 32) {
        if (threadIdx.x < 32) sinkhorn_warp(c, n, a.iters, a.hc_eps);
      } else if (threadIdx.x == 0) {
        sinkhorn_serial(c, n, a.iters, a.hc_eps);
      }
      __syncthreads();
      for (int64_t i = threadIdx.x; i < n * n; i += blockDim.x) a.comb[t * n * n + i] = c[i];
    }
  }
  __syncthreads();
  if (!a.input) return;
  const int64_t d0 = blockIdx.y * a.slice, d1 = d0 + a.slice < a.D ? d0 + a.slice : a.D;
  const float* x = a.residual + t * n * a.D;
  for (int64_t d = d0 + threadIdx.x; d < d1; d += blockDim.x) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += pre[j] * x[j * a.D + d];
    a.input[t * a.D + d] = s;
  }
}

// In place: one thread per (token, column) reads every copy before writing any (hc_mult <= 8).
constexpr int kPostMaxCopies = 8;
__global__ void mhc_post_inplace_kernel(float* residual, const float* out, const float* post, const float* comb,
                                        int64_t tokens, int64_t n, int64_t D) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * D) return;
  const int64_t t = i / D, d = i % D;
  float old[kPostMaxCopies];
#pragma unroll
  for (int j = 0; j < kPostMaxCopies; ++j) old[j] = j < n ? residual[(t * n + j) * D + d] : 0.0f;
  const float o = out[t * D + d];
#pragma unroll
  for (int k = 0; k < kPostMaxCopies; ++k) {
    if (k >= n) break;
    float s = post[t * n + k] * o;
#pragma unroll
    for (int j = 0; j < kPostMaxCopies; ++j)
      if (j < n) s += comb[(t * n + j) * n + k] * old[j];
    residual[(t * n + k) * D + d] = s;
  }
}

}  // namespace

void launch_gather_rows(const float* src, const int64_t* rows, int64_t count, int64_t width, float* dst) {
  if (count * width == 0) return;
  launch(gather_rows_kernel, blocks_for(count * width, kThreads), kThreads, 0, src, rows, count, width, dst);
}

void launch_embed(DevMatrix table, const int32_t* ids, int64_t tokens, int64_t copies, float* out) {
  const int64_t n = tokens * copies * table.cols;
  if (n == 0) return;
  launch(embed_kernel, blocks_for(n, kThreads), kThreads, 0, table, ids, tokens, copies, out);
}

void launch_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out) {
  if (rows == 0) return;
  launch(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x, weight, eps, n, out);
}

void launch_rope(float* x, const int64_t* positions, int64_t tokens, int64_t heads, int64_t head_dim, DevRope rope,
                 bool inverse) {
  const int64_t n = tokens * heads * rope.half;
  if (n == 0) return;
  launch(rope_kernel, blocks_for(n, kThreads), kThreads, 0, x, positions, tokens, heads, head_dim, rope, inverse ? -1.0f : 1.0f);
}

int64_t mhc_mix_chunks(int64_t width) { return (width + kMixChunk - 1) / kMixChunk; }

void launch_mhc_mix_partials(const float* residual, int64_t tokens, int64_t width, const float* fn, int64_t mixes,
                             double* sumsq, float* dots) {
  if (tokens == 0) return;
  const int64_t chunks = mhc_mix_chunks(width), groups = (tokens + kMixTokens - 1) / kMixTokens;
  // Up to 128 tokens (decode steps) the warps of a CTA split the mixes of a token group; prefill's
  // warps each take a group and every mix (8 groups of one chunk share its fn columns in L1).
  if (tokens <= 128)
    launch(mhc_mix_partials_kernel<3, true>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(chunks)), kThreads,
           0, residual, tokens, width, fn, mixes, chunks, sumsq, dots);
  else
    launch(mhc_mix_partials_kernel<24, false>,
           dim3(static_cast<unsigned>((groups + kMixWarps - 1) / kMixWarps), static_cast<unsigned>(chunks)), kThreads, 0,
           residual, tokens, width, fn, mixes, chunks, sumsq, dots);
}

namespace {
void launch_finish(MhcFinishArgs a, int64_t tokens) {
  // Few tokens: spread each token's columns over 16 blocks (the coefficients are derived the same
  // way in each, so the split changes no bit); many tokens: one block each.
  const int64_t slices = tokens < 64 && a.input ? 16 : 1;
  a.slice = (a.D + slices - 1) / slices;
  const size_t smem = static_cast<size_t>(a.mixes + a.n * a.n + a.n) * sizeof(float);
  launch(mhc_finish_kernel, dim3(static_cast<unsigned>(tokens), static_cast<unsigned>(slices)), kThreads, smem, a);
}
}  // namespace

void launch_mhc_pre_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D, float norm_eps,
                           const float* base, const float* scale, float hc_eps, int64_t sinkhorn_iters,
                           const float* residual, float* input, float* post, float* comb) {
  if (tokens == 0) return;
  launch_finish({sumsq, dots, mhc_mix_chunks(n * D), n * D, (2 + n) * n, n, D, sinkhorn_iters, norm_eps, hc_eps, base,
                 scale, residual, input, post, comb, 0},
                tokens);
}

void launch_mhc_coefficients_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D,
                                    float norm_eps, const float* base, const float* scale, float hc_eps,
                                    int64_t sinkhorn_iters, const float* residual, float* pre, float* post,
                                    float* comb) {
  if (tokens == 0) return;
  launch_finish({sumsq, dots, mhc_mix_chunks(n * D), n * D, (2 + n) * n, n, D, sinkhorn_iters, norm_eps, hc_eps, base,
                 scale, residual, nullptr, post, comb, 0, pre},
                tokens);
}

void launch_mhc_head_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D,
                            float norm_eps, const float* base, const float* scale, float hc_eps, const float* residual,
                            float* hidden) {
  if (tokens == 0) return;
  launch_finish({sumsq, dots, mhc_mix_chunks(n * D), n * D, n, n, D, 0, norm_eps, hc_eps, base, scale, residual, hidden,
                 nullptr, nullptr, 0},
                tokens);
}

bool launch_mhc_post_inplace(float* residual, const float* out, const float* post, const float* comb, int64_t tokens,
                             int64_t n, int64_t D) {
  if (n > kPostMaxCopies) return false;
  if (tokens * D == 0) return true;
  launch(mhc_post_inplace_kernel, blocks_for(tokens * D, kThreads), kThreads, 0, residual, out, post, comb, tokens, n, D);
  return true;
}

void launch_mhc_post(const float* old, const float* out, const float* post, const float* comb, int64_t tokens,
                     int64_t n, int64_t D, float* residual) {
  if (tokens * n * D == 0) return;
  launch(mhc_post_kernel, blocks_for(tokens * n * D, kThreads), kThreads, 0, old, out, post, comb, tokens, n, D, residual);
}

}  // namespace deepinfer::cuda
