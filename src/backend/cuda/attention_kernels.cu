// CUDA state-op kernels (first version: straightforward, checked against the CPU reference ops of
// cpu/attention_ops.cpp, whose semantics they follow line for line). Only device_types.h,
// device_math.cuh, CUDA and std headers here (see device_types.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/indexer_lanes.cuh"
#include "backend/cuda/state_math.cuh"
#include "backend/cuda/torch_topk.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/launch_control.h"

namespace deepinfer::cuda {

namespace {

// ------------------------------------------------------------------ compress

// A compressor's view of one sequence (as CompressorRows on the CPU): rows of the step come from the
// projections, rows of the window open before the step from the slot's pending rows.
struct Rows {
  const CompressArgs& a;
  const DeviceSeq& seq;
  float* slot;

  __device__ float* pending_kv() const { return slot; }
  __device__ float* pending_gate() const { return slot + a.c.rate * a.c.width; }
  __device__ float* overlap_kv() const { return slot + 2 * a.c.rate * a.c.width; }
  __device__ float* overlap_gate() const { return slot + 2 * a.c.rate * a.c.width + a.c.rate * a.c.head_dim; }
  __device__ const float* kv_row(int64_t pos) const {
    return pos >= seq.start ? a.kv + (seq.begin + pos - seq.start) * a.c.width
                            : pending_kv() + (pos % a.c.rate) * a.c.width;
  }
  __device__ const float* gate_row(int64_t pos) const {
    return pos >= seq.start ? a.gate + (seq.begin + pos - seq.start) * a.c.width
                            : pending_gate() + (pos % a.c.rate) * a.c.width;
  }
};

// kv value and gate logit (position bias included) of softmax slot s of window `win`, channel ch.
// CSA (overlap): slots [0, rate) are window win-1's first half (channels [0, hd); none before
// window 0: kv 0, logit -inf), slots [rate, 2 rate) window win's second half (channels [hd, 2 hd)).
__device__ __forceinline__ void window_slot(const Rows& r, int64_t win, bool prior_in_slot, int64_t ch, int64_t s,
                                            float* kv_out, float* gate_out) {
  const DevCompressor& c = r.a.c;
  const int64_t rate = c.rate, hd = c.head_dim, width = c.width;
  if (c.overlap && s < rate) {
    if (win == 0) {
      *kv_out = 0.0f;
      *gate_out = neg_inf();
    } else if (prior_in_slot) {
      *kv_out = r.overlap_kv()[s * hd + ch];
      *gate_out = r.overlap_gate()[s * hd + ch];
    } else {
      const int64_t prev = (win - 1) * rate + s;
      *kv_out = r.kv_row(prev)[ch];
      *gate_out = r.gate_row(prev)[ch] + r.a.ape[s * width + ch];
    }
    return;
  }
  const int64_t si = c.overlap ? s - rate : s;
  const int64_t col = c.overlap ? hd + ch : ch;
  const int64_t pos = win * rate + si;
  *kv_out = r.kv_row(pos)[col];
  *gate_out = r.gate_row(pos)[col] + r.a.ape[si * width + col];
}

// One block per completed window: every channel's softmax-gated sum, then RMSNorm (weight), then
// rope at position win * rate, written to the entry. Dynamic shared memory: head_dim floats.
__global__ void compress_entries_kernel(CompressArgs a, const int64_t* windows) {
  wait_for_previous_kernel();
  extern __shared__ float entry[];
  __shared__ double partial[32];
  const DevCompressor& c = a.c;
  const int64_t rate = c.rate, hd = c.head_dim;
  const int64_t slots = c.overlap ? 2 * rate : rate;
  if (windows[2 * blockIdx.x] < 0) return;  // padding of a recorded step (whole block)
  const DeviceSeq seq = a.seqs[windows[2 * blockIdx.x]];
  const int64_t win = windows[2 * blockIdx.x + 1];
  const Rows rows{a, seq, a.st.slots + static_cast<int64_t>(seq.slot) * a.st.slot_elems + c.slot_offset};
  const bool prior_in_slot = win * rate <= seq.start;

  double ss = 0.0;
  for (int64_t ch = threadIdx.x; ch < hd; ch += blockDim.x) {
    // Softmax over the slots as cpu::softmax: max, exp and sum, then p = e / sum.
    float m = neg_inf();
    for (int64_t s = 0; s < slots; ++s) {
      float v, g;
      window_slot(rows, win, prior_in_slot, ch, s, &v, &g);
      m = fmaxf(m, g);
    }
    float acc = 0.0f;
    if (m != neg_inf()) {  // nothing visible: all weights zero
      float sum = 0.0f;
      for (int64_t s = 0; s < slots; ++s) {
        float v, g;
        window_slot(rows, win, prior_in_slot, ch, s, &v, &g);
        sum += expf(g - m);
      }
      const float inv = 1.0f / sum;
      for (int64_t s = 0; s < slots; ++s) {
        float v, g;
        window_slot(rows, win, prior_in_slot, ch, s, &v, &g);
        acc += v * (expf(g - m) * inv);
      }
    }
    entry[ch] = acc;
    ss += static_cast<double>(acc) * acc;
  }
  // RMSNorm: sum of squares in double over the block.
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(kFull, ss, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < nwarps; ++i) total += partial[i];
  const float inv = 1.0f / sqrtf(static_cast<float>(total / static_cast<double>(hd)) + a.eps);
  for (int64_t ch = threadIdx.x; ch < hd; ch += blockDim.x)
    entry[ch] = a.norm ? a.norm[ch] * (entry[ch] * inv) : entry[ch] * inv;
  __syncthreads();
  // Interleaved rope on the trailing 2 * half channels.
  const int64_t half = a.rope.half, r0 = hd - 2 * half;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float cs, sn;
    rope_angle(a.rope, i, win * rate, &cs, &sn);
    const float x = entry[r0 + 2 * i], y = entry[r0 + 2 * i + 1];
    entry[r0 + 2 * i] = x * cs - y * sn;
    entry[r0 + 2 * i + 1] = y * cs + x * sn;
  }
  __syncthreads();
  float* dst = dev_entry(a.st, seq, a.blocks, c, win);
  for (int64_t ch = threadIdx.x; ch < hd; ch += blockDim.x) dst[ch] = entry[ch];
}

// One block per sequence, after every entry is written (entries read the old slot): the last
// completed window's first half becomes the overlap, then the open window's new rows are kept.
// The overlap may read pending rows that the second part overwrites, hence the barrier between.
__global__ void compress_slots_kernel(CompressArgs a) {
  wait_for_previous_kernel();
  const DevCompressor& c = a.c;
  const int64_t rate = c.rate, hd = c.head_dim, width = c.width;
  const DeviceSeq seq = a.seqs[blockIdx.x];
  const Rows rows{a, seq, a.st.slots + static_cast<int64_t>(seq.slot) * a.st.slot_elems + c.slot_offset};
  const int64_t end = seq.start + seq.count, open = end / rate * rate;
  if (c.overlap && end / rate > seq.start / rate) {
    const int64_t last = end / rate - 1;
    for (int64_t i = threadIdx.x; i < rate * hd; i += blockDim.x) {
      const int64_t s = i / hd, ch = i % hd;
      const int64_t pos = last * rate + s;
      const float v = rows.kv_row(pos)[ch];
      const float g = rows.gate_row(pos)[ch] + a.ape[s * width + ch];
      rows.overlap_kv()[i] = v;
      rows.overlap_gate()[i] = g;
    }
  }
  __syncthreads();
  const int64_t first = seq.start > open ? seq.start : open;
  const int64_t n = (end - first) * width;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t pos = first + i / width, col = i % width;
    const int64_t src = (seq.begin + pos - seq.start) * width + col;
    rows.pending_kv()[(pos % rate) * width + col] = a.kv[src];
    rows.pending_gate()[(pos % rate) * width + col] = a.gate[src];
  }
}

// ------------------------------------------------------------------ indexer

__device__ __forceinline__ void token_visibility(const IndexerArgs& a, int64_t t, DeviceSeq* seq_out,
                                                 int64_t* visible) {
  const DeviceSeq seq = a.seqs[seq_of_token(a.seqs, a.nseq, t)];
  const int64_t rate = a.keys.rate;
  const int64_t held = (seq.start + seq.count) / rate;  // entries the sequence holds after the step
  const int64_t pos = seq.start + (t - seq.begin);
  const int64_t v = (pos + 1) / rate;
  *seq_out = seq;
  *visible = v < held ? v : held;
}

// Index scores, a lane per (token, entry) (indexer_lanes.cuh): sum_h relu(q[t,h] . k_j) *
// score_scale * (w[t,h] * hw_scale). The heads are cut into groups of kScoreHeads, a warp each
// (partial sums in head order), added in group order through shared memory: a fixed arithmetic for
// each (token, entry), whatever the batch. Shared memory: q [nh][q_stride], the head weights times
// their scale [nh], the partials [groups][warp entries].
using indexer_lanes::kScoreHeads;
constexpr int kScoreMaxWarps = 16;  // so at most 256 heads

int64_t score_head_groups(int64_t nh) { return (nh + kScoreHeads - 1) / kScoreHeads; }
size_t score_smem_bytes(int64_t nh, int64_t hd, int64_t groups, int64_t entry_warps) {
  return static_cast<size_t>(nh * indexer_lanes::q_stride(hd) + nh + groups * 32 * entry_warps) * sizeof(float);
}

// grid (entry blocks of 32 x entry_warps, tokens); block: groups x entry_warps warps, warp w taking
// head group w / entry_warps and entries 32 (w % entry_warps) .. + 31 of the block.
__global__ void indexer_scores_kernel(IndexerArgs a, int64_t t0, float* scores, int64_t stride, int entry_warps,
                                      int groups) {
  wait_for_previous_kernel();
  extern __shared__ __align__(16) float score_smem[];
  const int64_t t = t0 + blockIdx.y;
  DeviceSeq seq;
  int64_t visible;
  token_visibility(a, t, &seq, &visible);
  const int64_t per_block = 32 * static_cast<int64_t>(entry_warps);
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * per_block;  // the block's first entry
  if (j0 >= visible) return;  // (the whole block: before its barriers)
  const int64_t nh = a.nh, hd = a.keys.head_dim;
  float* qs = score_smem;                             // [nh][q_stride]
  float* wv = qs + nh * indexer_lanes::q_stride(hd);  // [nh]
  float* part = wv + nh;                              // [groups][per_block]
  indexer_lanes::q_to_shared(a.q + t * nh * hd, nh, hd, qs);
  for (int64_t h = threadIdx.x; h < nh; h += blockDim.x) wv[h] = a.head_weights[t * nh + h] * a.head_weight_scale;
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int eg = warp % entry_warps, group = warp / entry_warps;
  const int64_t e = 32 * static_cast<int64_t>(eg) + lane, j = j0 + e;
  const bool mine = j < visible;
  const int64_t h0 = static_cast<int64_t>(group) * kScoreHeads;
  float d[kScoreHeads];
  indexer_lanes::head_group_dots(dev_entry(a.st, seq, a.blocks, a.keys, mine ? j : j0), qs, hd, h0, nh, d);
  float s = 0.0f;
#pragma unroll
  for (int h = 0; h < kScoreHeads; ++h)
    if (h0 + h < nh) s += fmaxf(d[h], 0.0f) * a.score_scale * wv[h0 + h];
  part[group * per_block + e] = s;
  __syncthreads();
  if (group == 0 && mine) {
    float total = part[e];
    for (int g = 1; g < groups; ++g) total += part[g * per_block + e];
    scores[static_cast<int64_t>(blockIdx.y) * stride + j] = total;
  }
}

// Order-preserving key of a float: larger float, larger key (-0 counts as +0).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the block (blockDim.x a multiple of 32); *total = the block's sum.
__device__ int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_sums[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  int x = v;
  for (int off = 1; off < 32; off <<= 1) {
    const int y = __shfl_up_sync(kFull, x, off);
    if (lane >= off) x += y;
  }
  __syncthreads();  // the previous call's readers are done with warp_sums
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nwarps ? warp_sums[lane] : 0;
    for (int off = 1; off < 32; off <<= 1) {
      const int y = __shfl_up_sync(kFull, w, off);
      if (lane >= off) w += y;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  *total = warp_sums[nwarps - 1];
  return (warp > 0 ? warp_sums[warp - 1] : 0) + x - v;
}

constexpr int kTopKThreads = 512;

// One block per token: the top_k of its visible entries, ties to the lower index, sorted by entry,
// -1 padded. Radix select (4 passes of 8 bits) finds the k-th largest key; every entry above it is
// chosen, and of those equal to it the lowest-indexed ones fill the rest; a block-wide scan in
// entry order writes the choice sorted.
//
// With undecided != null (TopKTies::Reference) it also flags the rows whose choice the scores alone
// do not decide: more entries equal to the k-th largest than are chosen, or a non-finite score.
// Those rows are chosen again by indexer_reference_ties_kernel (torch.topk's CPU tie order).
__global__ void indexer_topk_kernel(IndexerArgs a, int64_t t0, const float* scores, int64_t stride, int64_t top_k,
                                    int32_t* selected, int32_t* undecided) {
  wait_for_previous_kernel();
  __shared__ unsigned hist[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int s_remaining, s_nonfinite, s_tied;
  const int64_t t = t0 + blockIdx.x;
  DeviceSeq seq;
  int64_t visible;
  token_visibility(a, t, &seq, &visible);
  const float* row = scores + static_cast<int64_t>(blockIdx.x) * stride;
  int32_t* out = selected + t * top_k;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_remaining = static_cast<int>(top_k < visible ? top_k : visible);
    s_nonfinite = 0;
    s_tied = 0;
  }
  __syncthreads();
  if (visible <= top_k) {
    for (int64_t i = threadIdx.x; i < top_k; i += blockDim.x) out[i] = i < visible ? static_cast<int32_t>(i) : -1;
    // All of them, unless one is -inf (tied with the hidden entries) or NaN.
    if (undecided) {
      for (int64_t i = threadIdx.x; i < visible; i += blockDim.x)
        if (!isfinite(row[i])) s_nonfinite = 1;
      __syncthreads();
      if (threadIdx.x == 0) undecided[blockIdx.x] = s_nonfinite;
    }
    return;
  }
  const int n = static_cast<int>(visible), k = static_cast<int>(top_k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = row[i];
      if (shift == 24 && undecided && !isfinite(v)) s_nonfinite = 1;
      const uint32_t key = order_key(v);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int rem = s_remaining, b = 255;
      while (b > 0 && static_cast<int>(hist[b]) < rem) rem -= static_cast<int>(hist[b--]);
      s_prefix = prefix | (static_cast<uint32_t>(b) << shift);
      s_mask = mask | (0xffu << shift);
      s_remaining = rem;
      if (shift == 0) s_tied = static_cast<int>(hist[b]) > rem;  // equal to the k-th: more than are taken
    }
    __syncthreads();
  }
  if (undecided && threadIdx.x == 0) undecided[blockIdx.x] = s_nonfinite || s_tied;
  const uint32_t thr = s_prefix;
  const int need_eq = s_remaining;  // how many entries equal to the k-th largest are chosen
  int written = 0, eq_seen = 0;
  for (int base = 0; base < n; base += blockDim.x) {
    const int i = base + static_cast<int>(threadIdx.x);
    const uint32_t key = i < n ? order_key(row[i]) : 0u;
    const bool gt = i < n && key > thr, eq = i < n && key == thr;
    int eq_total = 0, sel_total = 0;
    const int eq_before = block_exclusive_scan(eq ? 1 : 0, &eq_total);
    const bool chosen = gt || (eq && eq_seen + eq_before < need_eq);
    const int at = block_exclusive_scan(chosen ? 1 : 0, &sel_total);
    if (chosen && written + at < k) out[written + at] = i;
    written += sel_total;
    eq_seen += eq_total;
  }
}

// The rows indexer_topk_kernel flagged, chosen as cpu::torch_top_k_indices chooses: every entry
// the sequence holds ranked (the hidden ones at -inf), the picks that are visible kept, sorted.
// `row` (the scores) and `ids` are overwritten. Rows not flagged return at once.
__global__ void indexer_reference_ties_kernel(IndexerArgs a, int64_t t0, float* scores, int32_t* ids, int64_t stride,
                                              int64_t top_k, int32_t* selected, const int32_t* undecided) {
  wait_for_previous_kernel();
  if (!undecided[blockIdx.x]) return;
  const int64_t t = t0 + blockIdx.x;
  DeviceSeq seq;
  int64_t visible;
  token_visibility(a, t, &seq, &visible);
  const int64_t held = (seq.start + seq.count) / a.keys.rate;
  float* row = scores + static_cast<int64_t>(blockIdx.x) * stride;
  int32_t* id = ids + static_cast<int64_t>(blockIdx.x) * stride;
  int32_t* out = selected + t * top_k;
  const int64_t k = top_k < held ? top_k : held;
  for (int64_t j = threadIdx.x; j < held; j += blockDim.x) {
    if (j >= visible) row[j] = -INFINITY;
    id[j] = static_cast<int32_t>(j);
  }
  __syncthreads();
  if (threadIdx.x == 0) TorchTopK(row, id).select(held, k);
  __syncthreads();
  // Mark the visible picks in `row` (no longer needed as scores), then write them in entry order.
  for (int64_t j = threadIdx.x; j < held; j += blockDim.x) row[j] = 0.0f;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < k; p += blockDim.x)
    if (id[p] < visible) row[id[p]] = 1.0f;
  __syncthreads();
  int written = 0;
  for (int64_t base = 0; base < visible; base += blockDim.x) {
    const int64_t j = base + threadIdx.x;
    const bool chosen = j < visible && row[j] != 0.0f;
    int total = 0;
    const int at = block_exclusive_scan(chosen ? 1 : 0, &total);
    if (chosen) out[written + at] = static_cast<int32_t>(j);
    written += total;
  }
  for (int64_t i = written + threadIdx.x; i < top_k; i += blockDim.x) out[i] = -1;
}

// ------------------------------------------------------------------ store_window

__global__ void store_window_kernel(const DeviceSeq* seqs, int32_t nseq, int64_t tokens, const float* kv, DevState st,
                                    int64_t window, int64_t hd, int64_t slot_offset) {
  wait_for_previous_kernel();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= tokens * hd) return;
  const int64_t t = idx / hd, c = idx % hd;
  const DeviceSeq seq = seqs[seq_of_token(seqs, nseq, t)];
  const int64_t i = t - seq.begin;
  if (i < seq.count - window) return;  // only the last min(count, window) rows
  float* ring = st.slots + static_cast<int64_t>(seq.slot) * st.slot_elems + slot_offset;
  ring[((seq.start + i) % window) * hd + c] = kv[idx];
}

// ------------------------------------------------------------------ sparse attention

constexpr int kAttnWarps = 8;
constexpr int kAttnPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);
constexpr int64_t kSplitKeys = kAttentionSplitKeys;

// The keys of a token: the window in position order (positions before the step from the ring row
// p % W, the rest from the step's kv rows), then the selected entries (-1 skipped) or, without a
// selection, every completed entry. They are cut into splits of kSplitKeys (a token's own count
// decides how many, never the batch). In a split each warp runs an online softmax over keys
// split * kSplitKeys + warp + 8 i and the block merges its warps in order into (max, sum,
// unnormalised output); the splits are then merged in order with the sink logit, which takes mass
// and is dropped. Two schedules (step_plan.h) run the same device functions, so they give the same
// bits: one block per (token, head, split) writing partials to global memory and a combine kernel
// (many blocks per token keep a batch-1 step's loads in flight), or one block per (token, head)
// running its splits in turn with the partials in shared memory (enough pairs to fill the GPU).
__device__ __forceinline__ int64_t attention_keys(const SparseAttentionArgs& a, const DeviceSeq& seq, int64_t pos,
                                                  int64_t* p0) {
  *p0 = pos - a.window + 1 > seq.window_floor ? pos - a.window + 1 : seq.window_floor;
  const int64_t nent = !a.has_entries ? 0 : a.selected ? a.k_sel : (pos + 1) / a.entries.rate;
  return pos - *p0 + 1 + nent;
}

// What a block needs to attend one (token, head).
struct AttendPair {
  DeviceSeq seq;
  int64_t t, h, p0, nkeys, nwin;
  const float* ring;
};

__device__ __forceinline__ AttendPair attend_pair(const SparseAttentionArgs& a, int64_t t, int64_t h) {
  AttendPair p;
  p.seq = a.seqs[seq_of_token(a.seqs, a.nseq, t)];
  p.t = t;
  p.h = h;
  const int64_t pos = p.seq.start + (t - p.seq.begin);
  p.nkeys = attention_keys(a, p.seq, pos, &p.p0);
  p.nwin = pos - p.p0 + 1;
  p.ring = a.st.slots + static_cast<int64_t>(p.seq.slot) * a.st.slot_elems + a.window_offset;
  return p;
}

struct AttendShared {
  float m[kAttnWarps], l[kAttnWarps];
  float o[kAttnWarps][kMaxAttentionHeadDim];
};

// One split of a (token, head), by the whole block: thread 0 writes its (max, sum) to *out_m /
// *out_l, the block its unnormalised output to out_o[hd]. Ends with a barrier, so the shared
// arrays are free again.
__device__ __forceinline__ void attend_split(const SparseAttentionArgs& a, const AttendPair& pr, int64_t split,
                                             AttendShared& sh, float* out_m, float* out_l, float* out_o) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = a.hd, W = a.window;
  const int64_t j_end = (split + 1) * kSplitKeys < pr.nkeys ? (split + 1) * kSplitKeys : pr.nkeys;
  float q[kAttnPerLane], o[kAttnPerLane];
  const float* qh = a.q + (pr.t * a.H + pr.h) * hd;
#pragma unroll
  for (int i = 0; i < kAttnPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    q[i] = c < hd ? qh[c] : 0.0f;
    o[i] = 0.0f;
  }
  float m = neg_inf(), l = 0.0f;
  // The warp's keys are j0 + 8 i. Their addresses (a selected entry's takes two dependent loads)
  // are found at once, lane i for key i, and each key's values are loaded while the one before is
  // used: the arithmetic and its order are the plain loop's, only the loads move earlier.
  static_assert(kSplitKeys / kAttnWarps <= 32, "a warp's keys of a split fit its lanes");
  const int64_t j0 = split * kSplitKeys + warp;
  const int nk = j0 < j_end ? static_cast<int>((j_end - j0 + kAttnWarps - 1) / kAttnWarps) : 0;
  const float* my_key = nullptr;  // lane i: key j0 + 8 i, null when a selection leaves it empty
  if (lane < nk) {
    const int64_t j = j0 + static_cast<int64_t>(kAttnWarps) * lane;
    if (j < pr.nwin) {
      const int64_t p = pr.p0 + j;
      my_key = p < pr.seq.start ? pr.ring + (p % W) * hd : a.kv + (pr.seq.begin + p - pr.seq.start) * hd;
    } else {
      int64_t e = j - pr.nwin;
      if (a.selected) e = a.selected[pr.t * a.k_sel + e];
      if (e >= 0) my_key = dev_entry(a.st, pr.seq, a.blocks, a.entries, e);
    }
  }
  auto key_at = [&](int i) {
    return reinterpret_cast<const float*>(static_cast<uintptr_t>(__shfl_sync(0xffffffffu, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(my_key)), i)));
  };
  auto load_key = [&](const float* key, float (&v)[kAttnPerLane]) {
#pragma unroll
    for (int i = 0; i < kAttnPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      v[i] = key && c < hd ? key[c] : 0.0f;
    }
  };
  float cur[kAttnPerLane], next[kAttnPerLane];
  const float* key = nk > 0 ? key_at(0) : nullptr;
  load_key(key, cur);
  for (int i = 0; i < nk; ++i) {
    const float* key_next = i + 1 < nk ? key_at(i + 1) : nullptr;
    load_key(key_next, next);
    if (key) {
      float d = 0.0f;
#pragma unroll
      for (int k = 0; k < kAttnPerLane; ++k) {
        const int64_t c = lane + 32 * k;
        if (c < hd) d += q[k] * cur[k];
      }
      const float x = warp_sum(d) * a.scale;
      const float m_new = fmaxf(m, x);
      const float corr = expf(m - m_new), p = expf(x - m_new);
      l = l * corr + p;
#pragma unroll
      for (int k = 0; k < kAttnPerLane; ++k) {
        const int64_t c = lane + 32 * k;
        o[k] = o[k] * corr + (c < hd ? p * cur[k] : 0.0f);
      }
      m = m_new;
    }
    key = key_next;
#pragma unroll
    for (int k = 0; k < kAttnPerLane; ++k) cur[k] = next[k];
  }
  if (lane == 0) {
    sh.m[warp] = m;
    sh.l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kAttnPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < hd) sh.o[warp][c] = o[i];
  }
  __syncthreads();
  float M = neg_inf(), f[kAttnWarps], L = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, sh.m[w]);
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = sh.l[w] > 0.0f ? expf(sh.m[w] - M) : 0.0f;
    L += sh.l[w] * f[w];
  }
  if (threadIdx.x == 0) {
    *out_m = M;
    *out_l = L;
  }
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float acc = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) acc += sh.o[w][c] * f[w];
    out_o[c] = acc;
  }
  __syncthreads();
}

// Merges `splits` partials (m[s], l[s], o[s * hd ..]) with the sink logit, in split order, into
// out[hd]. `weight_of_split` [splits] and `inv` are shared memory; the partials are visible to
// every thread of the block.
__device__ __forceinline__ void combine_splits(float sink, const float* m, const float* l, const float* o,
                                               int64_t splits, int64_t hd, float* weight_of_split, float* inv,
                                               float* out) {
  if (threadIdx.x == 0) {
    float M = sink;
    for (int64_t s = 0; s < splits; ++s) M = fmaxf(M, m[s]);
    float total = expf(sink - M);
    for (int64_t s = 0; s < splits; ++s) {
      const float L = l[s];
      const float f = L > 0.0f ? expf(m[s] - M) : 0.0f;
      weight_of_split[s] = f;
      total += L * f;
    }
    *inv = 1.0f / total;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s) acc += o[s * hd + c] * weight_of_split[s];
    out[c] = acc * *inv;
  }
}

__global__ void __launch_bounds__(kAttnWarps * 32, 2) sparse_attention_partial_kernel(SparseAttentionArgs a, int64_t t0, int64_t splits, float* part_m,
                                                float* part_l, float* part_o) {
  wait_for_previous_kernel();
  __shared__ AttendShared sh;
  const int64_t tt = blockIdx.x / a.H, h = blockIdx.x % a.H, split = blockIdx.y;
  const AttendPair pr = attend_pair(a, t0 + tt, h);
  const int64_t slot = (tt * a.H + h) * splits + split;
  attend_split(a, pr, split, sh, part_m + slot, part_l + slot, part_o + slot * a.hd);
}

__global__ void sparse_attention_combine_kernel(SparseAttentionArgs a, int64_t t0, int64_t splits, const float* part_m,
                                                const float* part_l, const float* part_o) {
  wait_for_previous_kernel();
  extern __shared__ float weight_of_split[];  // [splits]
  __shared__ float inv;
  const int64_t tt = blockIdx.x / a.H, h = blockIdx.x % a.H, t = t0 + tt, hd = a.hd;
  const int64_t base = (tt * a.H + h) * splits;
  combine_splits(a.sink[h], part_m + base, part_l + base, part_o + base * hd, splits, hd, weight_of_split, &inv,
                 a.out + (t * a.H + h) * hd);
}

// Every split of a (token, head) in one block, then the combine, with the partials in shared
// memory: the same functions, in the same order, as the two kernels above.
__global__ void __launch_bounds__(kAttnWarps * 32, 2) sparse_attention_fused_kernel(SparseAttentionArgs a, int64_t t0, int64_t splits) {
  wait_for_previous_kernel();
  __shared__ AttendShared sh;
  __shared__ float s_m[kMaxFusedAttentionSplits], s_l[kMaxFusedAttentionSplits];
  __shared__ float weight_of_split[kMaxFusedAttentionSplits];
  __shared__ float inv;
  extern __shared__ float split_o[];  // [splits, hd]
  const int64_t tt = blockIdx.x / a.H, h = blockIdx.x % a.H, t = t0 + tt, hd = a.hd;
  const AttendPair pr = attend_pair(a, t, h);
  for (int64_t split = 0; split < splits; ++split) attend_split(a, pr, split, sh, s_m + split, s_l + split, split_o + split * hd);
  combine_splits(a.sink[h], s_m, s_l, split_o, splits, hd, weight_of_split, &inv, a.out + (t * a.H + h) * hd);
}

}  // namespace

void launch_compress_entries(const CompressArgs& a, const int64_t* windows, int64_t count) {
  if (count <= 0) return;
  const size_t smem = static_cast<size_t>(a.c.head_dim) * sizeof(float);
  launch(compress_entries_kernel, static_cast<unsigned>(count), 256, smem, a, windows);
}

void launch_compress_slots(const CompressArgs& a, int32_t nseq) {
  if (nseq <= 0) return;
  launch(compress_slots_kernel, static_cast<unsigned>(nseq), 256, 0, a);
}

void launch_indexer_scores(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int64_t stride) {
  if (tokens <= 0 || stride <= 0) return;
  const int64_t groups = score_head_groups(a.nh);
  // Up to 8 warps in all.
  const int64_t entry_warps = indexer_lanes::entry_warps_for(tokens, stride, 8 / groups, device_sm_count());
  const size_t smem = score_smem_bytes(a.nh, a.keys.head_dim, groups, entry_warps);
  const dim3 grid(static_cast<unsigned>((stride + 32 * entry_warps - 1) / (32 * entry_warps)), static_cast<unsigned>(tokens));
  // A refused size stays in cudaGetLastError for the caller's launch check.
  if (allow_dynamic_smem<indexer_scores_kernel>(smem))
    launch(indexer_scores_kernel, grid, static_cast<unsigned>(32 * groups * entry_warps), smem, a, t0, scores, stride,
           static_cast<int>(entry_warps), static_cast<int>(groups));
}

// Whether launch_indexer_scores takes these shapes: the heads' groups fit one block, and q the
// shared memory an SM has.
bool indexer_scores_supports(int64_t nh, int64_t hd) {
  return nh >= 1 && score_head_groups(nh) <= kScoreMaxWarps &&
         score_smem_bytes(nh, hd, score_head_groups(nh), 1) + 1024 <= device_smem_per_sm();
}

void launch_indexer_topk(const IndexerArgs& a, int64_t t0, int64_t tokens, const float* scores, int64_t stride,
                         int64_t top_k, int32_t* selected) {
  if (tokens <= 0 || top_k <= 0) return;
  launch(indexer_topk_kernel, static_cast<unsigned>(tokens), kTopKThreads, 0, a, t0, scores, stride, top_k, selected,
                                                                             nullptr);
}

void launch_indexer_topk_reference(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int32_t* ids,
                                   int32_t* undecided, int64_t stride, int64_t top_k, int32_t* selected) {
  if (tokens <= 0 || top_k <= 0) return;
  launch(indexer_topk_kernel, static_cast<unsigned>(tokens), kTopKThreads, 0, a, t0, scores, stride, top_k, selected,
                                                                             undecided);
  launch(indexer_reference_ties_kernel, static_cast<unsigned>(tokens), 256, 0, a, t0, scores, ids, stride, top_k,
                                                                              selected, undecided);
}

void launch_store_window(const DeviceSeq* seqs, int32_t nseq, int64_t tokens, const float* kv, DevState st,
                         int64_t window, int64_t head_dim, int64_t slot_offset) {
  const int64_t n = tokens * head_dim;
  if (n <= 0 || window <= 0) return;
  launch(store_window_kernel, blocks_for(n, 256), 256, 0, seqs, nseq, tokens, kv, st, window, head_dim, slot_offset);
}

void launch_sparse_attention(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits, bool fused,
                             float* part_m, float* part_l, float* part_o) {
  if (tokens <= 0 || a.H <= 0 || a.hd <= 0 || splits <= 0) return;
  const auto blocks = static_cast<unsigned>(tokens * a.H);
  if (fused) {
    launch(sparse_attention_fused_kernel, blocks, kAttnWarps * 32, static_cast<size_t>(splits * a.hd) * sizeof(float), a,
           t0, splits);
    return;
  }
  launch(sparse_attention_partial_kernel, dim3(blocks, static_cast<unsigned>(splits)), kAttnWarps * 32, 0, 
      a, t0, splits, part_m, part_l, part_o);
  launch_sparse_attention_combine(a, t0, tokens, splits, part_m, part_l, part_o);
}

void launch_sparse_attention_combine(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits,
                                     const float* part_m, const float* part_l, const float* part_o) {
  if (tokens <= 0 || a.H <= 0 || splits <= 0) return;
  launch(sparse_attention_combine_kernel, static_cast<unsigned>(tokens * a.H), 128,
         static_cast<size_t>(splits) * sizeof(float), a, t0, splits, part_m, part_l, part_o);
}

}  // namespace deepinfer::cuda
