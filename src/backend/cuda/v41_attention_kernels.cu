// DeepSeek-V4.1 attention and indexer kernels (first version: the CPU reference's arithmetic,
// cpu/v41_attention_ops.cpp, one block per (token, head); #13 makes V4's kernels fast, these
// follow once V4.1 serves). Only device headers here (see device_types.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/indexer_lanes.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/launch_control.h"
#include "backend/cuda/state_math.cuh"
#include "backend/cuda/v41_kernels.h"

namespace deepinfer::cuda {

namespace {

constexpr int kAttnThreads = 128;
constexpr int kAttnWarpsV41 = kAttnThreads / 32;
constexpr int kBlockKeys = 64;  // kernel.py sparse_attn's block of keys
constexpr int kChannelsPerThread = static_cast<int>(kMaxAttentionHeadDim / kAttnThreads);

// Row `k` of a (token, head)'s keys. Sparse: the window in position order (ring rows before the
// step, then the step's kv rows), then the valid selected entries in order (sel: their indices).
// Block: the ring's first min(W, start) slots in slot order, then the sequence's kv rows.
struct KeyList {
  const SparseAttentionArgs* a;
  DeviceSeq seq;
  const float* ring;
  const int32_t* sel;  // shared: the valid selected entries
  int64_t p0, nwin, nkeys;
  bool block;
  __device__ const float* row(int64_t k) const {
    const int64_t hd = a->hd;
    if (block) return k < nwin ? ring + k * hd : a->kv + (seq.begin + k - nwin) * hd;
    if (k < nwin) {
      const int64_t p = p0 + k;
      return p < seq.start ? ring + (p % a->window) * hd : a->kv + (seq.begin + p - seq.start) * hd;
    }
    return dev_entry(a->st, seq, a->blocks, a->entries, sel[k - nwin]);
  }
};

// Online softmax over blocks of 64 keys from a finite floor; each block's probabilities rounded to
// bf16 before they weight the values; the sink joins the denominator; the output rounded to bf16.
// Every thread keeps the same running max and sum (computed from the same shared scores in the
// same order); thread c owns channels c, c + 128, ...
__global__ void __launch_bounds__(kAttnThreads) attention_v41_kernel(SparseAttentionArgs a, int block_mode) {
  wait_for_previous_kernel();
  extern __shared__ int32_t sel[];  // [k_sel]
  __shared__ float scores[kBlockKeys];
  __shared__ int32_t nsel;
  const int64_t t = blockIdx.x / a.H, h = blockIdx.x % a.H, hd = a.hd;
  KeyList keys;
  keys.a = &a;
  keys.seq = a.seqs[seq_of_token(a.seqs, a.nseq, t)];
  keys.ring = a.st.slots + static_cast<int64_t>(keys.seq.slot) * a.st.slot_elems + a.window_offset;
  keys.sel = sel;
  keys.block = block_mode != 0;
  const int64_t pos = keys.seq.start + (t - keys.seq.begin);
  if (keys.block) {
    keys.p0 = 0;
    keys.nwin = a.window < keys.seq.start ? a.window : keys.seq.start;
    keys.nkeys = keys.nwin + keys.seq.count;
  } else {
    keys.p0 = pos - a.window + 1 > keys.seq.window_floor ? pos - a.window + 1 : keys.seq.window_floor;
    keys.nwin = pos - keys.p0 + 1;
    if (threadIdx.x == 0) {
      int32_t n = 0;
      if (a.has_entries && a.selected)
        for (int64_t j = 0; j < a.k_sel; ++j) {
          const int32_t e = a.selected[t * a.k_sel + j];
          if (e >= 0) sel[n++] = e;
        }
      nsel = n;
    }
    __syncthreads();
    keys.nkeys = keys.nwin + nsel;
  }
  const float* qh = a.q + (t * a.H + h) * hd;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  float acc[kChannelsPerThread];
#pragma unroll
  for (int i = 0; i < kChannelsPerThread; ++i) acc[i] = 0.0f;
  float running_max = -1e30f, sum = 0.0f;
  for (int64_t k0 = 0; k0 < keys.nkeys; k0 += kBlockKeys) {
    const int64_t k1 = k0 + kBlockKeys < keys.nkeys ? k0 + kBlockKeys : keys.nkeys;
    __syncthreads();  // the previous block's scores are read
    for (int64_t k = k0 + warp; k < k1; k += kAttnWarpsV41) {
      const float* kr = keys.row(k);
      float d = 0.0f;
      for (int64_t c = lane; c < hd; c += 32) d += qh[c] * kr[c];
      d = warp_sum(d);
      if (lane == 0) scores[k - k0] = d * a.scale;
    }
    __syncthreads();
    float block_max = neg_inf();
    for (int64_t k = k0; k < k1; ++k) block_max = fmaxf(block_max, scores[k - k0]);
    const float new_max = fmaxf(running_max, block_max);
    const float rescale = expf(running_max - new_max);
    sum *= rescale;
#pragma unroll
    for (int i = 0; i < kChannelsPerThread; ++i) acc[i] *= rescale;
    float block_sum = 0.0f;
    for (int64_t k = k0; k < k1; ++k) {
      const float pk = expf(scores[k - k0] - new_max);
      block_sum += pk;
      const float pb = round_bf16_f(pk);
      const float* v = keys.row(k);
#pragma unroll
      for (int i = 0; i < kChannelsPerThread; ++i) {
        const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kAttnThreads;
        if (c < hd) acc[i] += pb * v[c];
      }
    }
    sum += block_sum;
    running_max = new_max;
  }
  sum += expf(a.sink[h] - running_max);
  float* o = a.out + (t * a.H + h) * hd;
#pragma unroll
  for (int i = 0; i < kChannelsPerThread; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kAttnThreads;
    if (c < hd) o[c] = round_bf16_f(acc[i] / sum);
  }
}

__device__ __forceinline__ void visibility(const IndexerArgs& a, int64_t t, DeviceSeq* seq, int64_t* visible) {
  *seq = a.seqs[seq_of_token(a.seqs, a.nseq, t)];
  const int64_t held = (seq->start + seq->count) / a.keys.rate, pos = seq->start + (t - seq->begin);
  const int64_t v = (pos + 1) / a.keys.rate;
  *visible = v < held ? v : held;
}

// Index scores, a lane per (token, entry) (indexer_lanes.cuh): score = bf16(sum_h bf16(relu(bf16(q_h
// . k)) * bf16(w_h * scale))), the heads added in order in float32 by the lane itself (group after
// group, as the CPU adds them); -inf outside a Filter's candidate blocks. grid (entry blocks of
// 32 x warps, tokens). Shared memory: q [nh][q_stride], the rounded head weights [nh].
constexpr int kScoreMaxWarpsV41 = 8;

size_t score_smem_bytes_v41(int64_t nh, int64_t hd) {
  return static_cast<size_t>(nh * indexer_lanes::q_stride(hd) + nh) * sizeof(float);
}

__global__ void indexer_scores_v41_kernel(IndexerArgs a, int64_t t0, float* scores, int64_t stride,
                                          const int32_t* candidates, int64_t cb, int64_t bs) {
  wait_for_previous_kernel();
  extern __shared__ __align__(16) float score_smem_v41[];
  const int64_t t = t0 + blockIdx.y;
  DeviceSeq seq;
  int64_t visible;
  visibility(a, t, &seq, &visible);
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * blockDim.x;  // the block's first entry
  if (j0 >= visible) return;  // (the whole block: before its barrier)
  const int64_t nh = a.nh, hd = a.keys.head_dim;
  float* qs = score_smem_v41;                         // [nh][q_stride]
  float* wv = qs + nh * indexer_lanes::q_stride(hd);  // [nh]
  indexer_lanes::q_to_shared(a.q + t * nh * hd, nh, hd, qs);
  for (int64_t h = threadIdx.x; h < nh; h += blockDim.x)
    wv[h] = round_bf16_f(a.head_weights[t * nh + h] * a.head_weight_scale);
  __syncthreads();
  const int64_t j = j0 + threadIdx.x;
  if (j >= visible) return;
  float* out = scores + static_cast<int64_t>(blockIdx.y) * stride + j;
  if (candidates) {
    bool inside = false;
    for (int64_t c = 0; c < cb; ++c) inside = inside || candidates[t * cb + c] == j / bs;
    if (!inside) {
      *out = neg_inf();
      return;
    }
  }
  const float* k = dev_entry(a.st, seq, a.blocks, a.keys, j);
  float s = 0.0f;
  for (int64_t h0 = 0; h0 < nh; h0 += indexer_lanes::kScoreHeads) {
    float d[indexer_lanes::kScoreHeads];
    indexer_lanes::head_group_dots(k, qs, hd, h0, nh, d);
#pragma unroll
    for (int h = 0; h < indexer_lanes::kScoreHeads; ++h)
      if (h0 + h < nh) s += round_bf16_f(fmaxf(round_bf16_f(d[h]), 0.0f) * wv[h0 + h]);
  }
  *out = round_bf16_f(s);
}

// Order-preserving key of a float, 0 reserved for "taken" (-0 counts as +0, as the CPU's compare).
__device__ __forceinline__ uint32_t rank_key(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t u = __float_as_uint(v);
  const uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return k == 0u ? 1u : k;
}

constexpr int kCandidateThreads = 256;

// One block per token: block keys (best entry, newest block pinned at +inf), then candidate_blocks
// rounds of a block-wide argmax (higher key, then lower block) until only -inf blocks remain.
__global__ void candidate_blocks_kernel(IndexerArgs a, int64_t t0, const float* scores, int64_t stride, int64_t cb,
                                        int64_t bs, uint32_t* keys_all, int64_t block_stride, int32_t* candidates) {
  wait_for_previous_kernel();
  __shared__ unsigned long long best;
  const int64_t t = t0 + blockIdx.x;
  DeviceSeq seq;
  int64_t visible;
  visibility(a, t, &seq, &visible);
  const float* row = scores + static_cast<int64_t>(blockIdx.x) * stride;
  uint32_t* keys = keys_all + static_cast<int64_t>(blockIdx.x) * block_stride;
  const int64_t nb = (visible + bs - 1) / bs;
  for (int64_t b = threadIdx.x; b < nb; b += blockDim.x) {
    float m = neg_inf();
    for (int64_t j = b * bs; j < (b + 1) * bs && j < visible; ++j) m = fmaxf(m, row[j]);
    keys[b] = rank_key(b == (visible - 1) / bs ? __int_as_float(0x7f800000) : m);
  }
  const uint32_t floor_key = rank_key(neg_inf());
  int32_t* out = candidates + t * cb;
  for (int64_t r = 0; r < cb; ++r) {
    if (threadIdx.x == 0) best = 0ull;
    __syncthreads();
    unsigned long long mine = 0ull;
    for (int64_t b = threadIdx.x; b < nb; b += blockDim.x) {
      const unsigned long long v = (static_cast<unsigned long long>(keys[b]) << 32) | (0xffffffffull - b);
      mine = v > mine ? v : mine;
    }
    atomicMax(&best, mine);
    __syncthreads();
    const uint32_t key = static_cast<uint32_t>(best >> 32);
    const bool found = key > floor_key;
    if (threadIdx.x == 0) {
      const int64_t b = static_cast<int64_t>(0xffffffffull - (best & 0xffffffffull));
      out[r] = found ? static_cast<int32_t>(b) : -1;
      if (found) keys[b] = 0u;
    }
    __syncthreads();
  }
}

}  // namespace

void launch_attention_v41(const SparseAttentionArgs& a, bool block) {
  if (a.T <= 0 || a.H <= 0) return;
  const size_t smem = static_cast<size_t>(block || !a.selected ? 0 : a.k_sel) * sizeof(int32_t);
  launch(attention_v41_kernel, static_cast<unsigned>(a.T * a.H), kAttnThreads, smem, a, block ? 1 : 0);
}

void launch_indexer_scores_v41(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int64_t stride,
                               const int32_t* candidates, int64_t candidate_blocks, int64_t block_size) {
  if (tokens <= 0 || stride <= 0) return;
  const int64_t warps = indexer_lanes::entry_warps_for(tokens, stride, kScoreMaxWarpsV41, device_sm_count());
  const dim3 grid(static_cast<unsigned>((stride + 32 * warps - 1) / (32 * warps)), static_cast<unsigned>(tokens));
  const size_t smem = score_smem_bytes_v41(a.nh, a.keys.head_dim);
  // A refused size stays in cudaGetLastError for the caller's launch check.
  if (allow_dynamic_smem<indexer_scores_v41_kernel>(smem))
    launch(indexer_scores_v41_kernel, grid, static_cast<unsigned>(32 * warps), smem, a, t0, scores, stride, candidates,
           candidate_blocks, block_size);
}

bool indexer_scores_v41_supports(int64_t nh, int64_t hd) {
  return nh >= 1 && score_smem_bytes_v41(nh, hd) + 1024 <= device_smem_per_sm();
}

void launch_candidate_blocks_v41(const IndexerArgs& a, int64_t t0, int64_t tokens, const float* scores, int64_t stride,
                                 int64_t candidate_blocks, int64_t block_size, uint32_t* keys, int64_t block_stride,
                                 int32_t* candidates) {
  if (tokens <= 0 || candidate_blocks <= 0) return;
  launch(candidate_blocks_kernel, static_cast<unsigned>(tokens), kCandidateThreads, 0, a, t0, scores, stride,
         candidate_blocks, block_size, keys, block_stride, candidates);
}

}  // namespace deepinfer::cuda
