#pragma once
// What the tensor-core sparse attention kernels share (tc_attention.cu, tc_attention_tf32.cu; nvcc
// only): the CTA's token, heads and key range, where key j of a token's list lives, and the copies
// of key rows into shared memory.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/state_math.cuh"

namespace deepinfer::cuda::tc_attention {

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

// The split-TF32 kernel (tc_attention_tf32.cu), kept for DEEPINFER_TC_ATTENTION_TF32=1's A/B.
void launch_tf32_kernel(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, const SplitOut& so);

}  // namespace deepinfer::cuda::tc_attention
