// The split-TF32 sparse attention kernel, the tensor-core path from session 15 to 29: kept for
// DEEPINFER_TC_ATTENTION_TF32=1 (the A/B against tc_attention.cu's f16 kernel), to be removed.
//
// A CTA takes one token and 32 of its heads and walks the token's keys in tiles of 32: the tile
// gathered into shared memory (cp.async, one tile ahead), S = Q K^T, an online softmax per head,
// O += P V from the same tile. mma.sync m16n8k8 TF32 with every operand split in two TF32 parts
// (big = x rounded to TF32, small = x - big rounded again) and three MMAs per product. Step 2
// splits head_dim over 4 warps (8 independent MMA chains a warp). Shared memory (head_dim 512): Q
// 32 x 516 floats, two key tiles of 32 x 516, four 32 x 36 planes of step 2's partials: 217 KB.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/tc_attention_keys.cuh"

namespace deepinfer::cuda::tc_attention {

namespace {

__host__ __device__ constexpr int64_t row_stride(int64_t hd) { return hd + 4; }

size_t shared_bytes(int64_t hd) {
  return static_cast<size_t>((kHeadsPerCta + 2 * kTileKeys) * row_stride(hd) + 4 * kHeadsPerCta * kPStride) * sizeof(float) +
         static_cast<size_t>(2 * kTileKeys) * sizeof(int32_t) + static_cast<size_t>(kHeadsPerCta) * sizeof(float);
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// x as big + small TF32 parts.
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An A fragment (16 x 8: rows g, g + 8, columns t, t + 4 of lane (g, t)) split once for the MMAs
// it feeds.
struct SplitA {
  uint32_t big[4], small[4];
  __device__ __forceinline__ explicit SplitA(const float (&a)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) split_tf32(a[i], big[i], small[i]);
  }
};

// d += A B for B (8 x 8: rows t, t + 4, column g) in float32: three MMAs, small terms first.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const SplitA& a, float b0, float b1) {
  uint32_t bb0, bs0, bb1, bs1;
  split_tf32(b0, bb0, bs0);
  split_tf32(b1, bb1, bs1);
  mma_tf32(d, a.small, bb0, bb1);
  mma_tf32(d, a.big, bs0, bs1);
  mma_tf32(d, a.big, bb0, bb1);
}

// Step 1 for one tile: its keys [base, base + 32) into k_tile (cp.async, not yet waited for) and
// their flags into valid. Warp w takes keys w, w + 8, ...
__device__ __forceinline__ void gather_tile(const SparseAttentionArgs& a, const TokenKeys& tk, int64_t base, float* k_tile,
                                            int32_t* valid) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t rs = row_stride(a.hd);
  for (int r = warp; r < kTileKeys; r += kWarps) {
    const int64_t j = base + r;
    const float* key = j < tk.nkeys ? key_row(a, tk, j) : nullptr;
    copy_row(key, a.hd, k_tile + r * rs);
    if (lane == 0) valid[r] = key != nullptr;
  }
}

__global__ void __launch_bounds__(kThreads, 1) sparse_attention_tf32_kernel(SparseAttentionArgs a, int64_t t0, SplitOut so) {
  wait_for_previous_kernel();
  extern __shared__ float smem[];
  const int hd = static_cast<int>(a.hd), rs = static_cast<int>(row_stride(hd));  // <= 516
  float* q_s = smem;                                  // [32, rs]
  float* k_s = q_s + kHeadsPerCta * rs;               // [2][32, rs]: the tile in use and the next
  float* p_s = k_s + 2 * kTileKeys * rs;              // [4][32, kPStride]: step 2's partials, plane 0 then P
  auto* valid_s = reinterpret_cast<int32_t*>(p_s + 4 * kHeadsPerCta * kPStride);  // [2][32]
  float* corr_s = reinterpret_cast<float*>(valid_s + 2 * kTileKeys);         // [32]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tg = lane % 4;
  const TokenKeys tk = token_keys(a, t0, so);
  const int64_t t = tk.t, h0 = tk.h0, heads = tk.heads, k_begin = tk.k_begin, k_end = tk.k_end;

  // Q of the CTA's heads (rows past the last head are zero) and the first tile: one cp.async group.
  for (int r = warp; r < kHeadsPerCta; r += kWarps)
    copy_row(r < heads ? a.q + (t * a.H + h0 + r) * hd : nullptr, hd, q_s + r * rs);
  gather_tile(a, tk, k_begin, k_s, valid_s);
  cp_async_commit();

  // Warp (mh, kq): heads 16 mh .. + 15; in step 2 head_dim's k-steps kq + 4 i, in step 4 its dim
  // tiles nd + 4 i (nd = kq).
  const int mh = warp & 1, kq = warp >> 1, nd = kq;
  const int dim_tiles = static_cast<int>(hd / 8), ksteps = dim_tiles;
  float o[kMaxDimTilesPerWarp][4];
#pragma unroll
  for (int i = 0; i < kMaxDimTilesPerWarp; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  // The running max and sum of head threadIdx.x / 8 (held by its 8 threads alike).
  float m_run = neg_inf(), l_run = 0.0f;

  int buf = 0;
  for (int64_t base = k_begin; base < k_end; base += kTileKeys, buf ^= 1) {
    // 1. The next tile into the other buffer (free: the barrier at the end of the last tile), then
    // wait for this one.
    if (base + kTileKeys < k_end)
      gather_tile(a, tk, base + kTileKeys, k_s + (buf ^ 1) * kTileKeys * rs,
                  valid_s + (buf ^ 1) * kTileKeys);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* k_tile = k_s + buf * kTileKeys * rs;
    const int32_t* valid = valid_s + buf * kTileKeys;

    // 2. S = Q K^T: warp (mh, kq) sums its 16 heads x the tile's 32 keys over the k-steps kq,
    // kq + 4, ... of head_dim (8 independent MMA chains: 4 key tiles x even / odd steps), then
    // the four partials go to part_s[kq] (part_s[0] is P).
    {
      float acc[2][4][4];
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int n = 0; n < 4; ++n) acc[e][n][0] = acc[e][n][1] = acc[e][n][2] = acc[e][n][3] = 0.0f;
      const float* qa = q_s + (16 * mh + g) * rs + tg;
      const float* kb = k_tile + g * rs + tg;
      auto step = [&](int ks, float (&d)[4][4]) {
        const int k = 8 * ks;
        const SplitA qa_frag({qa[k], qa[8 * rs + k], qa[k + 4], qa[8 * rs + k + 4]});
#pragma unroll
        for (int n = 0; n < 4; ++n) mma_3xtf32(d[n], qa_frag, kb[8 * n * rs + k], kb[8 * n * rs + k + 4]);
      };
      for (int ks = kq; ks < ksteps; ks += 8) {
        step(ks, acc[0]);
        if (ks + 4 < ksteps) step(ks + 4, acc[1]);
      }
      float* part = p_s + kq * kHeadsPerCta * kPStride;
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          part[(16 * mh + g + 8 * (i / 2)) * kPStride + 8 * n + 2 * tg + i % 2] = acc[0][n][i] + acc[1][n][i];
    }
    __syncthreads();

    // 3. Online softmax: head threadIdx.x / 8, keys 4 (threadIdx.x % 8) .. + 3; the scores are the
    // partials summed in order, scaled, masked.
    {
      constexpr int kPer = kTileKeys / 8;
      const int row = threadIdx.x / 8, c0 = kPer * (threadIdx.x % 8);
      float* pr = p_s + row * kPStride + c0;
      float sc[kPer];
      float mx = neg_inf();
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        float v = pr[c];
#pragma unroll
        for (int q = 1; q < 4; ++q) v += pr[q * kHeadsPerCta * kPStride + c];
        sc[c] = valid[c0 + c] ? v * a.scale : neg_inf();
        mx = fmaxf(mx, sc[c]);
      }
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
      const float m_new = fmaxf(m_run, mx);
      // A tile with no key of this head's row yet (m_new = -inf) leaves everything as it is.
      const float corr = m_new == neg_inf() ? 1.0f : expf(m_run - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        const float p = m_new == neg_inf() ? 0.0f : expf(sc[c] - m_new);
        pr[c] = p;
        sum += p;
      }
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(kFull, sum, off);
      l_run = l_run * corr + sum;
      m_run = m_new;
      if (threadIdx.x % 8 == 0) corr_s[row] = corr;
    }
    __syncthreads();

    // 4. O = O * corr + P V for the warp's 16 heads x dim tiles nd, nd + 4, ...
    {
      const float c_lo = corr_s[16 * mh + g], c_hi = corr_s[16 * mh + g + 8];
#pragma unroll
      for (int i = 0; i < kMaxDimTilesPerWarp; ++i) {
        o[i][0] *= c_lo;
        o[i][1] *= c_lo;
        o[i][2] *= c_hi;
        o[i][3] *= c_hi;
      }
      const float* pa = p_s + (16 * mh + g) * kPStride + tg;
#pragma unroll
      for (int k = 0; k < kTileKeys; k += 8) {
        const SplitA pa_frag({pa[k], pa[8 * kPStride + k], pa[k + 4], pa[8 * kPStride + k + 4]});
        const float* vb = k_tile + (k + tg) * rs + g;
#pragma unroll
        for (int i = 0; i < kMaxDimTilesPerWarp; ++i) {
          const int tile = nd + 4 * i;
          if (tile < dim_tiles) mma_3xtf32(o[i], pa_frag, vb[8 * tile], vb[4 * rs + 8 * tile]);
        }
      }
    }
    __syncthreads();  // this tile's buffer and P are rewritten next
  }

  // Each head's running max and sum for every thread of the CTA.
  if (threadIdx.x % 8 == 0) {
    corr_s[threadIdx.x / 8] = m_run;
    p_s[threadIdx.x / 8] = l_run;  // P is free now
  }
  __syncthreads();
  // A split writes its partial: its max, its sum and O relative to that max (combine_splits' input).
  // The whole list gives the sink its share of the mass: out = O e^(m - M) / (l e^(m - M) + e^(sink - M)).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * mh + g + 8 * half;
    if (row >= heads) continue;
    const int64_t h = h0 + row;
    const float m = corr_s[row], l = p_s[row];
    float* out;
    float scale = 1.0f;
    if (so.m) {
      const int64_t slot = ((t - t0) * a.H + h) * so.splits + blockIdx.y;
      if (kq == 0 && tg == 0) {
        so.m[slot] = m;
        so.l[slot] = l;
      }
      out = so.o + slot * hd;
    } else {
      const float sink = a.sink[h], M = fmaxf(m, sink);
      const float f = m == neg_inf() ? 0.0f : expf(m - M);
      scale = f / (l * f + expf(sink - M));
      out = a.out + (t * a.H + h) * hd;
    }
#pragma unroll
    for (int i = 0; i < kMaxDimTilesPerWarp; ++i) {
      const int tile = nd + 4 * i;
      if (tile >= dim_tiles) continue;
      const int64_t c = 8 * tile + 2 * tg;
      out[c] = o[i][2 * half] * scale;
      out[c + 1] = o[i][2 * half + 1] * scale;
    }
  }
}

}  // namespace

void launch_tf32_kernel(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, const SplitOut& so) {
  const int64_t groups = (a.H + kHeadsPerCta - 1) / kHeadsPerCta;
  if (!allow_dynamic_smem<sparse_attention_tf32_kernel>(shared_bytes(kMaxAttentionHeadDim))) return;
  const dim3 grid(static_cast<unsigned>(tokens * groups), static_cast<unsigned>(so.m ? so.splits : 1));
  launch(sparse_attention_tf32_kernel, grid, kThreads, shared_bytes(a.hd), a, t0, so);
}

}  // namespace deepinfer::cuda::tc_attention
