// Sparse attention on the tensor cores (launch_sparse_attention_tc): V4 has ONE KV head shared by
// every query head, so the heads of a token are the M side of an MMA against its key list.
//
// A CTA takes one token and 32 of its heads (kHeadsPerCta; a last group may be partial) and walks
// the token's keys (window, then entries, in the order of the CUDA-core kernels) in tiles of 32:
//  1. the tile's keys are gathered into shared memory with cp.async, one tile ahead of the MMAs
//     (two buffers; rows a selection leaves empty, or past the token's own count, are zero and
//     masked);
//  2. S = Q K^T (32 x 32) on the tensor cores; scaled, masked keys -> -inf;
//  3. an online softmax per head over the tile (max, rescale of the running sum and output);
//  4. O += P V (32 x head_dim), V being the same shared tile (K and V are one vector in V4).
// The sink logit takes mass at the end and is dropped, as in combine_splits.
//
// Key splits (sparse_attention_tc_splits, attention_kernels.h): at batch 32 the 64 CTAs (32 tokens x
// 2 head groups) filled 64 of 132 SMs, each walking 640 keys (ncu, H100: 171 us a layer, 16x its
// bytes). With splits, CTA (token, group, split) walks keys [split x split_keys, + split_keys) and
// writes its running max, sum and unnormalised output as a partial, which the CUDA-core path's
// combine kernel merges with the sink in split order.
//
// Precision: mma.sync m16n8k8 TF32 with every operand split in two TF32 parts (big = x rounded to
// TF32, small = x - big rounded again) and three MMAs per product (small*big, big*small, big*big):
// about float32's precision (the dropped small*small term is ~2^-22 relative), not its bits. The
// softmax runs in float32 on the CUDA cores. A row's result depends only on its own token's
// keys, so batching never changes it; it differs from the CUDA-core kernels in the low bits (a
// different summation order), which is why the backend only picks it where those may differ
// (ops_attention.cpp).
//
// Step 2 splits head_dim over 4 warps (each then has 8 independent MMA chains rather than one long
// one: the chains' latency, not issue, bounded a first version), and the softmax adds the four
// partials in a fixed order.
//
// Shared memory (head_dim 512): Q 32 x 516 floats (66 KB), two key tiles of 32 x 516 (132 KB), four
// 32 x 36 planes of step 2's partials (the first then holds P): 217 KB, one CTA of 8 warps per SM.
// Row strides of 4 mod 32 floats make the fragment loads of steps 2 and 4's P operand
// conflict-free; step 4's V loads see 2-way conflicts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/gemm_kernels.h"  // policy_from_env, positive_env
#include "backend/cuda/launch_control.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/state_math.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHeadsPerCta = 32;  // two 16-row MMA tiles
constexpr int kTileKeys = 32;
constexpr int kPStride = kTileKeys + 4;
constexpr int kMaxDimTilesPerWarp = static_cast<int>(kMaxAttentionHeadDim / 8 / 4);  // step 4: 4 warps share the dims

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

__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
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

// Key j of a token's list (window rows first, then entries), or null where a selection is empty.
__device__ __forceinline__ const float* key_row(const SparseAttentionArgs& a, const DeviceSeq& seq, int64_t t,
                                                int64_t p0, int64_t nwin, const float* ring, int64_t j) {
  if (j < nwin) {
    const int64_t p = p0 + j;
    return p < seq.start ? ring + (p % a.window) * a.hd : a.kv + (seq.begin + p - seq.start) * a.hd;
  }
  int64_t e = j - nwin;
  if (a.selected) {
    e = a.selected[t * a.k_sel + e];
    if (e < 0) return nullptr;
  }
  return dev_entry(a.st, seq, a.blocks, a.entries, e);
}

// hd floats of src (zeros for null) into dst (16-byte aligned) by the calling warp: cp.async, to be
// committed and waited for by the caller.
__device__ __forceinline__ void copy_row(const float* src, int64_t hd, float* dst) {
  const int lane = threadIdx.x % 32;
  if (src == nullptr) {
    for (int64_t c = lane; c < hd; c += 32) dst[c] = 0.0f;
  } else if ((hd & 3) == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    for (int64_t c = 4 * lane; c < hd; c += 128) cp_async16(dst + c, src + c);
  } else {
    for (int64_t c = lane; c < hd; c += 32) cp_async4(dst + c, src + c);
  }
}

// Step 1 for one tile: its keys [base, base + 32) into k_tile (cp.async, not yet waited for) and
// their flags into valid. Warp w takes keys w, w + 8, ...
__device__ __forceinline__ void gather_tile(const SparseAttentionArgs& a, const DeviceSeq& seq, int64_t t, int64_t p0,
                                            int64_t nwin, int64_t nkeys, const float* ring, int64_t base, float* k_tile,
                                            int32_t* valid) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t rs = row_stride(a.hd);
  for (int r = warp; r < kTileKeys; r += kWarps) {
    const int64_t j = base + r;
    const float* key = j < nkeys ? key_row(a, seq, t, p0, nwin, ring, j) : nullptr;
    copy_row(key, a.hd, k_tile + r * rs);
    if (lane == 0) valid[r] = key != nullptr;
  }
}

// Where partials go (m null: no splits, the CTA writes the normalised output).
struct SplitOut {
  float* m;
  float* l;
  float* o;
  int64_t splits, keys;
};

__global__ void __launch_bounds__(kThreads, 1) sparse_attention_tc_kernel(SparseAttentionArgs a, int64_t t0, SplitOut so) {
  wait_for_previous_kernel();
  extern __shared__ float smem[];
  const int hd = static_cast<int>(a.hd), rs = static_cast<int>(row_stride(hd));  // <= 516
  float* q_s = smem;                                  // [32, rs]
  float* k_s = q_s + kHeadsPerCta * rs;               // [2][32, rs]: the tile in use and the next
  float* p_s = k_s + 2 * kTileKeys * rs;              // [4][32, kPStride]: step 2's partials, plane 0 then P
  auto* valid_s = reinterpret_cast<int32_t*>(p_s + 4 * kHeadsPerCta * kPStride);  // [2][32]
  float* corr_s = reinterpret_cast<float*>(valid_s + 2 * kTileKeys);         // [32]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tg = lane % 4;
  const int64_t groups = (a.H + kHeadsPerCta - 1) / kHeadsPerCta;
  const int64_t t = t0 + blockIdx.x / groups, h0 = (blockIdx.x % groups) * kHeadsPerCta;
  const int64_t heads = a.H - h0 < kHeadsPerCta ? a.H - h0 : kHeadsPerCta;

  const DeviceSeq seq = a.seqs[seq_of_token(a.seqs, a.nseq, t)];
  const int64_t pos = seq.start + (t - seq.begin);
  const int64_t p0 = pos - a.window + 1 > seq.window_floor ? pos - a.window + 1 : seq.window_floor;
  const int64_t nwin = pos - p0 + 1;
  const int64_t nkeys = nwin + (!a.has_entries ? 0 : a.selected ? a.k_sel : (pos + 1) / a.entries.rate);
  const float* ring = a.st.slots + static_cast<int64_t>(seq.slot) * a.st.slot_elems + a.window_offset;
  // The CTA's keys: all, or its split's (a multiple of the tile; a split past the list is empty).
  const int64_t k_begin = so.m ? static_cast<int64_t>(blockIdx.y) * so.keys : 0;
  const int64_t k_end = so.m ? (k_begin + so.keys < nkeys ? k_begin + so.keys : nkeys) : nkeys;

  // Q of the CTA's heads (rows past the last head are zero) and the first tile: one cp.async group.
  for (int r = warp; r < kHeadsPerCta; r += kWarps)
    copy_row(r < heads ? a.q + (t * a.H + h0 + r) * hd : nullptr, hd, q_s + r * rs);
  gather_tile(a, seq, t, p0, nwin, nkeys, ring, k_begin, k_s, valid_s);
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
      gather_tile(a, seq, t, p0, nwin, nkeys, ring, base + kTileKeys, k_s + (buf ^ 1) * kTileKeys * rs,
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

// The kernel for tokens [t0, t0 + tokens), so.splits CTAs a (token, head group) where it writes partials.
void launch_tc_kernel(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, const SplitOut& so) {
  const int64_t groups = (a.H + kHeadsPerCta - 1) / kHeadsPerCta;
  // Opted in once for the largest head size (the attribute is a ceiling).
  if (!allow_dynamic_smem<sparse_attention_tc_kernel>(shared_bytes(kMaxAttentionHeadDim))) return;
  const dim3 grid(static_cast<unsigned>(tokens * groups), static_cast<unsigned>(so.m ? so.splits : 1));
  launch(sparse_attention_tc_kernel, grid, kThreads, shared_bytes(a.hd), a, t0, so);
}

}  // namespace

bool sparse_attention_tc_supports(int64_t hd) { return hd >= 8 && hd % 8 == 0 && hd <= kMaxAttentionHeadDim; }

void launch_sparse_attention_tc(const SparseAttentionArgs& a, int64_t t0, int64_t tokens) {
  if (tokens <= 0 || a.H <= 0) return;
  launch_tc_kernel(a, t0, tokens, SplitOut{});
}

int64_t sparse_attention_tc_splits(int64_t tokens, int64_t H, int64_t max_keys, int64_t list_keys, bool by_call,
                                   int64_t* split_keys) {
  static const TcPolicy policy = policy_from_env("DEEPINFER_TC_ATTENTION_SPLIT");
  static const int64_t fixed = positive_env("DEEPINFER_TC_ATTENTION_SPLIT_KEYS", 0);
  auto round_to_tile = [](int64_t k) { return (k + kTileKeys - 1) / kTileKeys * kTileKeys; };
  *split_keys = 0;
  if (max_keys <= 0) return 0;
  if (fixed > 0) {  // always the split path, even for one split: its rounding differs from the direct path's
    *split_keys = round_to_tile(fixed);
    return (max_keys + *split_keys - 1) / *split_keys;
  }
  if (policy == TcPolicy::Never || !by_call) return 0;
  // As many splits as the idle SMs allow (one CTA an SM: 217 KB of shared memory), 64 keys or more
  // each. Whether to split and where follow from the call's tokens and the layer's list length
  // only, never from the keys its sequences hold now: an eager step and a recorded one (whose
  // max_keys is its tables' bound) then cut every row's keys alike, one split too.
  const int64_t ctas = tokens * ((H + kHeadsPerCta - 1) / kHeadsPerCta);
  const int64_t want = device_sm_count() / std::max<int64_t>(ctas, 1);
  if (want < 2) return 0;
  *split_keys = std::max<int64_t>(2 * kTileKeys, round_to_tile((std::max<int64_t>(list_keys, 1) + want - 1) / want));
  return (max_keys + *split_keys - 1) / *split_keys;
}

void launch_sparse_attention_tc_split(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits,
                                      int64_t split_keys, float* part_m, float* part_l, float* part_o) {
  if (tokens <= 0 || a.H <= 0 || splits <= 0) return;
  launch_tc_kernel(a, t0, tokens, SplitOut{part_m, part_l, part_o, splits, split_keys});
  launch_sparse_attention_combine(a, t0, tokens, splits, part_m, part_l, part_o);
}

}  // namespace deepinfer::cuda
