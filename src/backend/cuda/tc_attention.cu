// Sparse attention on the tensor cores (launch_sparse_attention_tc): V4 has ONE KV head shared by
// every query head, so the heads of a token are the M side of an MMA against its key list.
//
// A CTA takes one token and 32 of its heads (kHeadsPerCta; a last group may be partial) and walks
// the token's keys (window, then entries, in the order of the CUDA-core kernels) in tiles of 32:
//  1. the tile's keys, gathered into a float32 stage with cp.async one tile ahead, are split into
//     f16 hi + lo planes, each key row scaled by a power of two (below);
//  2. S = Q K^T (32 x 32) on the tensor cores; scaled, masked keys -> -inf;
//  3. an online softmax per head over the tile (max, rescale of the running sum and output), P
//     split into f16 hi + lo planes;
//  4. O += P V (32 x head_dim), V being the same planes (K and V are one vector in V4).
// The sink logit takes mass at the end and is dropped, as in combine_splits. Key pointers are
// looked up 256 at a time, one a thread (a selected entry's index, then its block: two dependent
// loads that a warp walking its rows one by one waited for 4 times a tile).
//
// Key splits (sparse_attention_tc_splits, attention_kernels.h): where a call's CTAs (token, head
// group) would leave SMs idle, CTA (token, group, split) walks keys [split x split_keys, +
// split_keys) and writes its running max, sum and unnormalised output as a partial, which the
// CUDA-core path's combine kernel merges with the sink in split order.
//
// Precision: mma.sync m16n8k16 f16 with every operand in two f16 parts (hi = x rounded to f16, lo =
// the rest rounded again: 22 significant bits) and three MMAs a product (lo hi, hi lo, hi hi; the
// dropped lo lo term is ~2^-22 relative): about float32's precision, not its bits, as the split
// TF32 kernel before it (sessions 15-28) but at half its MMAs and with every split made once
// (Q once a CTA, a key once a tile, P once by the softmax) rather than in front of each MMA. f16
// has 5 exponent bits, so each row of Q and each key is scaled by 2^-e with its largest magnitude
// in [2^14, 2^15) (mma::f16_block_exponent): S is scaled back by the row's and the key's 2^e; in
// P V the key's scale moves into P (P'[h][j] = P[h][j] 2^(e_j - E), E the tile's largest e_j, so
// P' <= P stays in [0, 1]) and O is kept in units of 2^E, rescaled with the running max when the
// next tile's E differs. The softmax runs in float32 on the CUDA cores. A row's result depends only
// on its own token's keys, so batching never changes it; it differs from the CUDA-core kernels in
// the low bits, which is why the backend only picks it where those may differ (ops_attention.cpp).
//
// Step 2 splits head_dim over 4 warps (each then has 8 independent MMA chains), and the softmax adds
// the four partials in a fixed order. Fragments come from ldmatrix (the V operand transposed).
//
// Shared memory (head_dim 512): Q hi / lo and the tile's K hi / lo, 32 x 520 f16 each (130 KB), the
// float32 stage 32 x 516 (66 KB), four 32 x 36 float planes of step 2's partials (18 KB), P hi / lo
// 32 x 40 f16 (5 KB), 256 key pointers: 220 KB, one CTA of 8 warps per SM. Plane rows of 1,040
// bytes (16 mod 128) put ldmatrix's 8 row addresses in distinct banks.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/gemm_kernels.h"  // policy_from_env, positive_env
#include "backend/cuda/launch_control.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_async.cuh"
#include "backend/cuda/state_math.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHeadsPerCta = 32;  // two 16-row MMA tiles
constexpr int kTileKeys = 32;
constexpr int kPStride = kTileKeys + 4;  // floats a row of step 2's partial planes
constexpr int kMaxDimTilesPerWarp = static_cast<int>(kMaxAttentionHeadDim / 8 / 4);  // step 4: 4 warps share the dims

// Where partials go (m null: no splits, the CTA writes the normalised output).
struct SplitOut {
  float* m;
  float* l;
  float* o;
  int64_t splits, keys;
};

// The CTA's token t, its heads [h0, h0 + heads), and the token's key list: nwin window rows from
// position p0, then its entries (nkeys in all), of which the CTA walks [k_begin, k_end) (all, or
// its split's: a multiple of the tile; a split past the list is empty).
struct TokenKeys {
  DeviceSeq seq;
  const float* ring;
  int64_t t, h0, heads, p0, nwin, nkeys, k_begin, k_end;
};

__device__ __forceinline__ TokenKeys token_keys(const SparseAttentionArgs& a, int64_t t0, const SplitOut& so) {
  TokenKeys k;
  const int64_t groups = (a.H + kHeadsPerCta - 1) / kHeadsPerCta;
  k.t = t0 + blockIdx.x / groups;
  k.h0 = (blockIdx.x % groups) * kHeadsPerCta;
  k.heads = a.H - k.h0 < kHeadsPerCta ? a.H - k.h0 : kHeadsPerCta;
  k.seq = a.seqs[seq_of_token(a.seqs, a.nseq, k.t)];
  const int64_t pos = k.seq.start + (k.t - k.seq.begin);
  k.p0 = pos - a.window + 1 > k.seq.window_floor ? pos - a.window + 1 : k.seq.window_floor;
  k.nwin = pos - k.p0 + 1;
  k.nkeys = k.nwin + (!a.has_entries ? 0 : a.selected ? a.k_sel : (pos + 1) / a.entries.rate);
  k.ring = a.st.slots + static_cast<int64_t>(k.seq.slot) * a.st.slot_elems + a.window_offset;
  k.k_begin = so.m ? static_cast<int64_t>(blockIdx.y) * so.keys : 0;
  k.k_end = so.m ? (k.k_begin + so.keys < k.nkeys ? k.k_begin + so.keys : k.nkeys) : k.nkeys;
  return k;
}

// Key j of the token's list (window rows first, then entries), or null where a selection is empty.
__device__ __forceinline__ const float* key_row(const SparseAttentionArgs& a, const TokenKeys& k, int64_t j) {
  if (j < k.nwin) {
    const int64_t p = k.p0 + j;
    return p < k.seq.start ? k.ring + (p % a.window) * a.hd : a.kv + (k.seq.begin + p - k.seq.start) * a.hd;
  }
  int64_t e = j - k.nwin;
  if (a.selected) {
    e = a.selected[k.t * a.k_sel + e];
    if (e < 0) return nullptr;
  }
  return dev_entry(a.st, k.seq, a.blocks, a.entries, e);
}

// hd floats of src (zeros for null) into dst (16-byte aligned) by the calling warp: cp.async, to be
// committed and waited for by the caller.
__device__ __forceinline__ void copy_row(const float* src, int64_t hd, float* dst) {
  const int lane = threadIdx.x % 32;
  if (src == nullptr) {
    for (int64_t c = lane; c < hd; c += 32) dst[c] = 0.0f;
  } else if ((hd & 3) == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    for (int64_t c = 4 * lane; c < hd; c += 128) mma::copy16_async(dst + c, src + c, true);
  } else {
    for (int64_t c = lane; c < hd; c += 32) mma::copy4_async(dst + c, src + c);
  }
}

constexpr int kPtrKeys = kThreads;        // key pointers looked up at once, one a thread
constexpr int kPPlaneStride = kTileKeys + 8;  // f16 a row of P's planes (80 bytes)
constexpr int kRowChunks = static_cast<int>(kMaxAttentionHeadDim / 128);  // float4s a lane holds of a row
constexpr int kNoExp = INT_MIN;           // no tile seen yet

// f16 a row of the Q / K planes: head_dim rounded up to the MMA's 16, then 8 more (16 bytes).
__host__ __device__ constexpr int plane_stride(int64_t hd) { return static_cast<int>((hd + 15) / 16 * 16 + 8); }
__host__ __device__ constexpr int stage_stride(int64_t hd) { return static_cast<int>(hd + 4); }

// Byte offsets in shared memory. The K planes sit in front of the stage: step 4's last V loads at
// a head size below 512 may read up to 48 bytes past a row (into columns never stored).
struct Layout {
  size_t q_hi, q_lo, k_hi, k_lo, stage, part, p_hi, p_lo, ptr, valid, kexp, qexp, corr, total;
};
__host__ __device__ constexpr Layout layout(int64_t hd) {
  Layout l{};
  const size_t plane = static_cast<size_t>(kHeadsPerCta) * plane_stride(hd) * 2;
  l.q_hi = 0;
  l.q_lo = plane;
  l.k_hi = 2 * plane;
  l.k_lo = 3 * plane;
  l.stage = 4 * plane;
  l.part = l.stage + static_cast<size_t>(kTileKeys) * stage_stride(hd) * 4;
  l.p_hi = l.part + static_cast<size_t>(4 * kHeadsPerCta * kPStride) * 4;
  l.p_lo = l.p_hi + static_cast<size_t>(kHeadsPerCta * kPPlaneStride) * 2;
  l.ptr = l.p_lo + static_cast<size_t>(kHeadsPerCta * kPPlaneStride) * 2;
  l.valid = l.ptr + static_cast<size_t>(kPtrKeys) * sizeof(void*);
  l.kexp = l.valid + 2 * kTileKeys * 4;
  l.qexp = l.kexp + kTileKeys * 4;
  l.corr = l.qexp + kHeadsPerCta * 4;
  l.total = l.corr + kHeadsPerCta * 4;
  return l;
}
static_assert(kHeadsPerCta == kTileKeys, "the Q and K planes share one shape");
static_assert(layout(kMaxAttentionHeadDim).total <= 227 * 1024, "one CTA an SM");

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// d += A B with A and B in hi + lo parts: the small terms first.
__device__ __forceinline__ void mma_split(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0,
                                          uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  mma::mma_f16(d, al[0], al[1], al[2], al[3], bh0, bh1);
  mma::mma_f16(d, ah[0], ah[1], ah[2], ah[3], bl0, bl1);
  mma::mma_f16(d, ah[0], ah[1], ah[2], ah[3], bh0, bh1);
}
// 2^e for e <= 0 (1 above: only a masked key, whose P is 0, can have e > 0), 0 below float's normal
// range (a key 2^126 below the tile's largest adds nothing).
__device__ __forceinline__ float pow2_down(int e) { return e < -126 ? 0.0f : mma::pow2f(min(e, 0)); }

// Row src of the stage (hd floats) times 2^-e as f16 hi + lo parts into the planes' rows, zeros
// from hd up to the next multiple of 16, by the calling warp; returns e (mma::f16_block_exponent of
// the row's largest magnitude).
__device__ __forceinline__ int split_row(const float* src, int hd, int hd16, __half* hi, __half* lo) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float4 v[kRowChunks];
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int c = 4 * lane + 128 * i;
    v[i] = c < hd ? *reinterpret_cast<const float4*>(src + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    m = fmaxf(m, fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w))));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, off));
  const int e = mma::f16_block_exponent(m);
  const float s = mma::pow2f(-e);
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int c = 4 * lane + 128 * i;
    if (c >= hd16) continue;
    __half h[4], l[4];
    mma::split2_f16(v[i].x * s, h[0], l[0]);
    mma::split2_f16(v[i].y * s, h[1], l[1]);
    mma::split2_f16(v[i].z * s, h[2], l[2]);
    mma::split2_f16(v[i].w * s, h[3], l[3]);
    *reinterpret_cast<uint2*>(hi + c) = make_uint2(mma::pack_f16(h[0], h[1]), mma::pack_f16(h[2], h[3]));
    *reinterpret_cast<uint2*>(lo + c) = make_uint2(mma::pack_f16(l[0], l[1]), mma::pack_f16(l[2], l[3]));
  }
  return e;
}

// Pointers to keys [first, first + kPtrKeys) of the CTA's range (null: an empty selection, or past
// the range), one a thread.
__device__ __forceinline__ void look_up_keys(const SparseAttentionArgs& a, const TokenKeys& tk, int64_t first,
                                             const float** ptr) {
  const int64_t j = first + threadIdx.x;
  ptr[threadIdx.x] = j < tk.k_end ? key_row(a, tk, j) : nullptr;
}

// Step 1's copies for the tile at `base`: its keys into the stage (cp.async, not yet waited for)
// and their flags into valid. Warp w takes keys w, w + 8, ...
__device__ __forceinline__ void gather_tile(const SparseAttentionArgs& a, const TokenKeys& tk, int64_t base,
                                            const float* const* ptr, float* stage, int ss, int32_t* valid) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t first = (base - tk.k_begin) % kPtrKeys;
  for (int r = warp; r < kTileKeys; r += kWarps) {
    const float* key = ptr[first + r];
    copy_row(key, a.hd, stage + r * ss);
    if (lane == 0) valid[r] = key != nullptr;
  }
}

__global__ void __launch_bounds__(kThreads, 1) sparse_attention_tc_kernel(SparseAttentionArgs a, int64_t t0, SplitOut so) {
  wait_for_previous_kernel();
  extern __shared__ __align__(16) unsigned char smem[];
  const Layout L = layout(a.hd);
  auto* q_hi = reinterpret_cast<__half*>(smem + L.q_hi);
  auto* q_lo = reinterpret_cast<__half*>(smem + L.q_lo);
  auto* k_hi = reinterpret_cast<__half*>(smem + L.k_hi);
  auto* k_lo = reinterpret_cast<__half*>(smem + L.k_lo);
  auto* stage = reinterpret_cast<float*>(smem + L.stage);  // [32, ss]
  auto* part_s = reinterpret_cast<float*>(smem + L.part);  // [4][32, kPStride]
  auto* p_hi = reinterpret_cast<__half*>(smem + L.p_hi);   // [32, kPPlaneStride]
  auto* p_lo = reinterpret_cast<__half*>(smem + L.p_lo);
  auto* ptr_s = reinterpret_cast<const float**>(smem + L.ptr);  // [kPtrKeys]
  auto* valid_s = reinterpret_cast<int32_t*>(smem + L.valid);   // [2][32]
  auto* kexp_s = reinterpret_cast<int32_t*>(smem + L.kexp);     // [32]: key j is its plane rows times 2^kexp
  auto* qexp_s = reinterpret_cast<int32_t*>(smem + L.qexp);     // [32]: the same for Q's rows
  auto* corr_s = reinterpret_cast<float*>(smem + L.corr);       // [32]

  const int hd = static_cast<int>(a.hd), hd16 = (hd + 15) / 16 * 16, ps = plane_stride(hd), ss = stage_stride(hd);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane / 4, tg = lane % 4;
  const TokenKeys tk = token_keys(a, t0, so);

  // Q of the CTA's heads (rows past the last head are zero) through the stage into its planes, and
  // the first keys' pointers, then the first tile's copies.
  for (int r = warp; r < kHeadsPerCta; r += kWarps)
    copy_row(r < tk.heads ? a.q + (tk.t * a.H + tk.h0 + r) * hd : nullptr, hd, stage + r * ss);
  mma::copies_commit();
  look_up_keys(a, tk, tk.k_begin, ptr_s);
  mma::copies_wait<0>();
  __syncthreads();
  for (int r = warp; r < kHeadsPerCta; r += kWarps) {
    const int e = split_row(stage + r * ss, hd, hd16, q_hi + r * ps, q_lo + r * ps);
    if (lane == 0) qexp_s[r] = e;
  }
  __syncthreads();
  if (tk.k_begin < tk.k_end) gather_tile(a, tk, tk.k_begin, ptr_s, stage, ss, valid_s);
  mma::copies_commit();

  // Warp (mh, kq): heads 16 mh .. + 15; in step 2 head_dim's 16-column k-steps kq + 4 i, in step 4
  // its dim tiles nd + 4 i (nd = kq).
  const int mh = warp & 1, kq = warp >> 1, nd = kq;
  const int dim_tiles = hd / 8, ksteps = hd16 / 16;
  float o[kMaxDimTilesPerWarp][4];
#pragma unroll
  for (int i = 0; i < kMaxDimTilesPerWarp; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  // The running max and sum of head threadIdx.x / 8 (held by its 8 threads alike), and the power
  // of two O is kept in (the same in every thread: the keys' flags and scales are the tile's).
  float m_run = neg_inf(), l_run = 0.0f;
  int e_run = kNoExp;

  // ldmatrix row addresses of this lane. A operands (Q, P): matrices (rows 0-7, k 0-7), (rows
  // 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15). K as B: (keys 0-7, k 0-7), (keys 0-7,
  // k 8-15), (keys 8-15, k 0-7), (keys 8-15, k 8-15). V as B, transposed: (keys 0-7, dims d0),
  // (keys 8-15, d0), (keys 0-7, d1), (keys 8-15, d1).
  const int a_row = 16 * mh + (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4);
  const int b_key = 8 * (lane >> 4) + (lane & 7), b_col = 8 * ((lane >> 3) & 1);
  const int v_key = (lane & 7) + 8 * ((lane >> 3) & 1), v_dim = 8 * (nd + 4 * (lane >> 4));
  const uint32_t qa_hi = smem_u32(q_hi + a_row * ps + a_col), qa_lo = smem_u32(q_lo + a_row * ps + a_col);
  const uint32_t kb_hi = smem_u32(k_hi + b_key * ps + b_col), kb_lo = smem_u32(k_lo + b_key * ps + b_col);
  const uint32_t pa_hi = smem_u32(p_hi + a_row * kPPlaneStride + a_col);
  const uint32_t pa_lo = smem_u32(p_lo + a_row * kPPlaneStride + a_col);
  const uint32_t vb_hi = smem_u32(k_hi + v_key * ps + v_dim), vb_lo = smem_u32(k_lo + v_key * ps + v_dim);
  const uint32_t key_rows16 = 16 * ps * 2;  // bytes from key j to key j + 16

  // Step 3's row (head threadIdx.x / 8): its Q plane rows times 2^q_exp are Q's.
  const float q_back = mma::pow2f(qexp_s[threadIdx.x / 8]);

  int par = 0;
  for (int64_t base = tk.k_begin; base < tk.k_end; base += kTileKeys, par ^= 1) {
    // 1. Wait for this tile's copies, split its keys into the K planes (free: the barrier at the
    // end of the last tile), look up the pointers of the next 256 keys where the next tile starts
    // them, then copy the next tile into the stage (free once the splits are done).
    mma::copies_wait<0>();
    __syncthreads();
    for (int r = warp; r < kTileKeys; r += kWarps) {
      const int e = split_row(stage + r * ss, hd, hd16, k_hi + r * ps, k_lo + r * ps);
      if (lane == 0) kexp_s[r] = e;
    }
    const int64_t next = base + kTileKeys;
    if (next < tk.k_end && (next - tk.k_begin) % kPtrKeys == 0) look_up_keys(a, tk, next, ptr_s);
    __syncthreads();
    if (next < tk.k_end) gather_tile(a, tk, next, ptr_s, stage, ss, valid_s + (par ^ 1) * kTileKeys);
    mma::copies_commit();
    const int32_t* valid = valid_s + par * kTileKeys;

    // 2. S = Q K^T: warp (mh, kq) sums its 16 heads x the tile's 32 keys over the k-steps kq,
    // kq + 4, ... of head_dim (8 independent MMA chains: 4 key tiles x even / odd steps), then
    // the four partials go to part_s[kq].
    {
      float acc[2][4][4];
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int n = 0; n < 4; ++n) acc[e][n][0] = acc[e][n][1] = acc[e][n][2] = acc[e][n][3] = 0.0f;
      auto step = [&](int ks, float (&d)[4][4]) {
        const uint32_t k_off = 32u * ks;  // 16 f16
        uint32_t ah[4], al[4], bh[2][4], bl[2][4];
        ldsm_x4(ah, qa_hi + k_off);
        ldsm_x4(al, qa_lo + k_off);
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          ldsm_x4(bh[p], kb_hi + p * key_rows16 + k_off);
          ldsm_x4(bl[p], kb_lo + p * key_rows16 + k_off);
        }
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const int p = n >> 1, j = 2 * (n & 1);
          mma_split(d[n], ah, al, bh[p][j], bh[p][j + 1], bl[p][j], bl[p][j + 1]);
        }
      };
      for (int ks = kq; ks < ksteps; ks += 8) {
        step(ks, acc[0]);
        if (ks + 4 < ksteps) step(ks + 4, acc[1]);
      }
      float* part = part_s + kq * kHeadsPerCta * kPStride;
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          part[(16 * mh + g + 8 * (i / 2)) * kPStride + 8 * n + 2 * tg + i % 2] = acc[0][n][i] + acc[1][n][i];
    }
    __syncthreads();

    // 3. Online softmax: head threadIdx.x / 8, keys 4 (threadIdx.x % 8) .. + 3; the scores are the
    // partials summed in order, scaled back by the row's and the key's powers of two, scaled,
    // masked. P' = P 2^(e_j - E) goes to the P planes; O's factor for this tile is corr 2^(E_run - E).
    {
      constexpr int kPer = kTileKeys / 8;
      const int row = static_cast<int>(threadIdx.x) / 8, c0 = kPer * (static_cast<int>(threadIdx.x) % 8);
      const float* pr = part_s + row * kPStride + c0;
      float sc[kPer];
      int ke[kPer];
      float mx = neg_inf();
      int e_tile = kNoExp;
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        float v = pr[c];
#pragma unroll
        for (int q = 1; q < 4; ++q) v += pr[q * kHeadsPerCta * kPStride + c];
        ke[c] = kexp_s[c0 + c];
        const bool ok = valid[c0 + c] != 0;
        sc[c] = ok ? v * q_back * mma::pow2f(ke[c]) * a.scale : neg_inf();
        if (ok) e_tile = max(e_tile, ke[c]);
        mx = fmaxf(mx, sc[c]);
      }
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
        e_tile = max(e_tile, __shfl_xor_sync(kFull, e_tile, off));
      }
      if (e_tile == kNoExp) e_tile = e_run == kNoExp ? 0 : e_run;  // no key in this tile
      const float m_new = fmaxf(m_run, mx);
      // A tile with no key of this head's row yet (m_new = -inf) leaves everything as it is.
      const float corr = m_new == neg_inf() ? 1.0f : expf(m_run - m_new);
      float sum = 0.0f;
      __half h[kPer], l[kPer];
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        const float p = m_new == neg_inf() ? 0.0f : expf(sc[c] - m_new);
        sum += p;
        mma::split2_f16(p * pow2_down(ke[c] - e_tile), h[c], l[c]);
      }
      *reinterpret_cast<uint2*>(p_hi + row * kPPlaneStride + c0) = make_uint2(mma::pack_f16(h[0], h[1]), mma::pack_f16(h[2], h[3]));
      *reinterpret_cast<uint2*>(p_lo + row * kPPlaneStride + c0) = make_uint2(mma::pack_f16(l[0], l[1]), mma::pack_f16(l[2], l[3]));
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(kFull, sum, off);
      l_run = l_run * corr + sum;
      m_run = m_new;
      // O from units of 2^E_run to 2^E (its e's are within [-110, 113]; clamped to float's normal
      // range, which only keys 2^126 apart in magnitude reach).
      const float units = e_run == kNoExp ? 1.0f : mma::pow2f(min(max(e_run - e_tile, -126), 127));
      e_run = e_tile;
      if (threadIdx.x % 8 == 0) corr_s[row] = corr * units;
    }
    __syncthreads();

    // 4. O = O * corr + P' V for the warp's 16 heads x dim tiles nd, nd + 4, ... (pairs nd + 8 j,
    // nd + 8 j + 4 from one transposed load).
    {
      const float c_lo = corr_s[16 * mh + g], c_hi = corr_s[16 * mh + g + 8];
#pragma unroll
      for (int i = 0; i < kMaxDimTilesPerWarp; ++i) {
        o[i][0] *= c_lo;
        o[i][1] *= c_lo;
        o[i][2] *= c_hi;
        o[i][3] *= c_hi;
      }
#pragma unroll
      for (int kk = 0; kk < kTileKeys; kk += 16) {
        uint32_t ph[4], pl[4];
        ldsm_x4(ph, pa_hi + 2u * kk);
        ldsm_x4(pl, pa_lo + 2u * kk);
        const uint32_t v_off = kk * ps * 2;
#pragma unroll
        for (int j = 0; j < kMaxDimTilesPerWarp / 2; ++j) {
          if (nd + 8 * j >= dim_tiles) continue;
          uint32_t vh[4], vl[4];
          ldsm_x4_trans(vh, vb_hi + v_off + 128u * j);  // 64 dims on
          ldsm_x4_trans(vl, vb_lo + v_off + 128u * j);
          mma_split(o[2 * j], ph, pl, vh[0], vh[1], vl[0], vl[1]);
          if (nd + 8 * j + 4 < dim_tiles) mma_split(o[2 * j + 1], ph, pl, vh[2], vh[3], vl[2], vl[3]);
        }
      }
    }
    __syncthreads();  // the K planes, P and the stage's flags are rewritten next
  }

  // Each head's running max and sum for every thread of the CTA (P's hi plane is free now).
  auto* l_s = reinterpret_cast<float*>(p_hi);
  if (threadIdx.x % 8 == 0) {
    corr_s[threadIdx.x / 8] = m_run;
    l_s[threadIdx.x / 8] = l_run;
  }
  __syncthreads();
  const float units = e_run == kNoExp ? 1.0f : mma::pow2f(e_run);  // O back from units of 2^E
  // A split writes its partial: its max, its sum and O relative to that max (combine_splits' input).
  // The whole list gives the sink its share of the mass: out = O e^(m - M) / (l e^(m - M) + e^(sink - M)).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * mh + g + 8 * half;
    if (row >= tk.heads) continue;
    const int64_t h = tk.h0 + row;
    const float m = corr_s[row], l = l_s[row];
    float* out;
    float scale = 1.0f;
    if (so.m) {
      const int64_t slot = ((tk.t - t0) * a.H + h) * so.splits + blockIdx.y;
      if (kq == 0 && tg == 0) {
        so.m[slot] = m;
        so.l[slot] = l;
      }
      out = so.o + slot * hd;
    } else {
      const float sink = a.sink[h], M = fmaxf(m, sink);
      const float f = m == neg_inf() ? 0.0f : expf(m - M);
      scale = f / (l * f + expf(sink - M));
      out = a.out + (tk.t * a.H + h) * hd;
    }
#pragma unroll
    for (int i = 0; i < kMaxDimTilesPerWarp; ++i) {
      const int tile = nd + 4 * i;
      if (tile >= dim_tiles) continue;
      const int64_t c = 8 * tile + 2 * tg;
      out[c] = o[i][2 * half] * units * scale;
      out[c + 1] = o[i][2 * half + 1] * units * scale;
    }
  }
}

// The kernel for tokens [t0, t0 + tokens), so.splits CTAs a (token, head group) where it writes partials.
void launch_tc_kernel(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, const SplitOut& so) {
  const int64_t groups = (a.H + kHeadsPerCta - 1) / kHeadsPerCta;
  // Opted in once for the largest head size (the attribute is a ceiling).
  if (!allow_dynamic_smem<sparse_attention_tc_kernel>(layout(kMaxAttentionHeadDim).total)) return;
  const dim3 grid(static_cast<unsigned>(tokens * groups), static_cast<unsigned>(so.m ? so.splits : 1));
  launch(sparse_attention_tc_kernel, grid, kThreads, layout(a.hd).total, a, t0, so);
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
