// DeepSeek-V4.1 CUDA kernels that do not attend: bf16 rounding, mHC collapse, compressor pooling
// and entry stores, Engram's gate and hash, and the pieces of the bf16 MoE. Each follows its CPU
// reference (cpu/v41_ops.cpp) line for line; only the summation order of reductions differs.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/state_math.cuh"
#include "backend/cuda/v41_kernels.h"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ float* slot_of(const DevState& st, const DeviceSeq& s, int64_t offset) {
  return st.slots + static_cast<int64_t>(s.slot) * st.slot_elems + offset;
}

__global__ void round_bf16_kernel(float* x, int64_t n) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i < n) x[i] = round_bf16_f(x[i]);
}

__global__ void mhc_collapse_kernel(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D,
                                    float* out) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i >= tokens * D) return;
  const int64_t t = i / D, d = i % D;
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += pre[t * n + j] * residual[(t * n + j) * D + d];
  out[i] = s;
}

// One thread per (entry, channel): softmax over the group's gates (as cpu::softmax), then the
// weighted sum in token order. Rows of the step come from kv / gate, earlier ones from the slot.
__global__ void compress_pool_kernel(DevCompressor c, DevState st, const DeviceSeq* seqs, const int64_t* entries,
                                     int64_t count, const float* kv, const float* gate, float* out) {
  wait_for_previous_kernel();
  const int64_t i = global_index(), hd = c.head_dim, rate = c.rate;
  if (i >= count * hd) return;
  const int64_t e = i / hd, ch = i % hd;
  if (entries[2 * e] < 0) {  // padding
    out[i] = 0.0f;
    return;
  }
  const DeviceSeq seq = seqs[entries[2 * e]];
  const int64_t first = entries[2 * e + 1] * rate;
  const float* slot = slot_of(st, seq, c.slot_offset);
  auto value = [&](const float* step_rows, int64_t pending, int64_t pos) {
    return pos >= seq.start ? step_rows[(seq.begin + pos - seq.start) * hd + ch]
                            : slot[pending + (pos % rate) * hd + ch];
  };
  float m = neg_inf();
  for (int64_t s = 0; s < rate; ++s) m = fmaxf(m, value(gate, rate * hd, first + s));
  float acc = 0.0f;
  if (m != neg_inf()) {
    float sum = 0.0f;
    for (int64_t s = 0; s < rate; ++s) sum += expf(value(gate, rate * hd, first + s) - m);
    const float inv = 1.0f / sum;
    for (int64_t s = 0; s < rate; ++s)
      acc += value(kv, 0, first + s) * (expf(value(gate, rate * hd, first + s) - m) * inv);
  }
  out[i] = acc;
}

// One block per sequence: the rows of its open group (pending kv, then pending gate).
__global__ void compress_pool_slots_kernel(DevCompressor c, DevState st, const DeviceSeq* seqs, const float* kv,
                                           const float* gate) {
  wait_for_previous_kernel();
  const DeviceSeq seq = seqs[blockIdx.x];
  const int64_t hd = c.head_dim, rate = c.rate, end = seq.start + seq.count;
  const int64_t open = end / rate * rate, first = seq.start > open ? seq.start : open;
  float* slot = slot_of(st, seq, c.slot_offset);
  for (int64_t i = threadIdx.x; i < (end - first) * hd; i += blockDim.x) {
    const int64_t pos = first + i / hd, ch = i % hd, src = (seq.begin + pos - seq.start) * hd + ch;
    slot[(pos % rate) * hd + ch] = kv[src];
    slot[rate * hd + (pos % rate) * hd + ch] = gate[src];
  }
}

__global__ void store_entries_kernel(DevCompressor c, DevState st, const DeviceSeq* seqs, const int32_t* blocks,
                                     const int64_t* entries, int64_t count, const float* rows) {
  wait_for_previous_kernel();
  const int64_t i = global_index(), hd = c.head_dim;
  if (i >= count * hd) return;
  const int64_t e = i / hd;
  if (entries[2 * e] < 0) return;  // padding
  dev_entry(st, seqs[entries[2 * e]], blocks, c, entries[2 * e + 1])[i % hd] = rows[i];
}

// One block per (token, copy): three sums over D, then the gated add rounded to bf16.
__global__ void engram_gate_kernel(float* residual, const float* kv, const float* weight, int64_t n, int64_t D,
                                   float eps) {
  wait_for_previous_kernel();
  __shared__ float part[3][kThreads / 32];
  const int64_t t = blockIdx.x / n, i = blockIdx.x % n;
  float* h = residual + (t * n + i) * D;
  const float* key = kv + (t * (n + 1) + i) * D;
  const float* value = kv + (t * (n + 1) + n) * D;
  const float* w = weight + i * D;
  float hh = 0.0f, kk = 0.0f, dot = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    hh += h[d] * h[d];
    kk += key[d] * key[d];
    dot += h[d] * w[d] * key[d];
  }
  hh = warp_sum(hh), kk = warp_sum(kk), dot = warp_sum(dot);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) part[0][warp] = hh, part[1][warp] = kk, part[2][warp] = dot;
  __syncthreads();
  hh = kk = dot = 0.0f;
  for (int k = 0; k < static_cast<int>(blockDim.x) / 32; ++k) hh += part[0][k], kk += part[1][k], dot += part[2][k];
  const float fd = static_cast<float>(D);
  const float rstd = (1.0f / sqrtf(hh / fd + eps)) * (1.0f / sqrtf(kk / fd + eps));
  const float s = dot * rstd * (1.0f / sqrtf(fd));
  const float g = sigmoid_f(copysignf(sqrtf(fmaxf(fabsf(s), 1e-6f)), s));
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) h[d] = round_bf16_f(h[d] + g * value[d]);
}

// One thread per token: the ids of its n-gram (the step's own, the ring's, or below the window
// floor the given history), then the rolling hash of every layer and column.
__global__ void engram_hash_kernel(EngramHashArgs a) {
  wait_for_previous_kernel();
  const int64_t t = global_index();
  if (t >= a.tokens) return;
  const int32_t si = seq_of_token(a.seqs, a.nseq, t);
  const DeviceSeq seq = a.seqs[si];
  const int64_t pos = seq.start + (t - seq.begin), look = a.max_ngram - 1, cols = look * a.heads;
  const float* ring = slot_of(a.st, seq, a.slot_offset);
  int64_t ids[kMaxEngramNgram];
  for (int64_t s = 0; s < a.max_ngram; ++s) {
    const int64_t q = pos - s;
    if (q < 0) ids[s] = a.pad_id;
    else if (q >= seq.start) ids[s] = a.ids[seq.begin + q - seq.start];
    else if (q >= seq.window_floor) ids[s] = static_cast<int64_t>(ring[q % a.window]);
    else if (!a.floor_history) ids[s] = a.pad_id;
    else ids[s] = a.floor_history[static_cast<int64_t>(si) * look + (q - (seq.start - look))];
  }
  for (int64_t l = 0; l < a.layers; ++l) {
    const int64_t* mult = a.multipliers + l * a.max_ngram;
    int64_t rolling = ids[0] * mult[0];
    for (int64_t s = 1; s < a.max_ngram; ++s) {
      rolling ^= ids[s] * mult[s];
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t col = (s - 1) * a.heads + h;
        a.out[(l * a.tokens + t) * cols + col] =
            static_cast<int32_t>(rolling % a.primes[l * cols + col] + a.offsets[l * cols + col]);
      }
    }
  }
}

// After every token's hash: the last min(count, window) ids of each sequence into its ring.
__global__ void engram_ring_kernel(EngramHashArgs a) {
  wait_for_previous_kernel();
  const DeviceSeq seq = a.seqs[blockIdx.x];
  float* ring = slot_of(a.st, seq, a.slot_offset);
  const int64_t from = seq.count > a.window ? seq.count - a.window : 0;
  for (int64_t i = from + threadIdx.x; i < seq.count; i += blockDim.x)
    ring[(seq.start + i) % a.window] = static_cast<float>(a.ids[seq.begin + i]);
}

__global__ void gather_routed_rows_kernel(const float* x, const int32_t* row_token, const int32_t* offsets_end,
                                          int64_t rows, int64_t D, float* xr) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i >= rows * D || i / D >= *offsets_end) return;
  xr[i] = x[static_cast<int64_t>(row_token[i / D]) * D + i % D];
}

__global__ void routed_row_weights_kernel(const int32_t* row_of, const float* weights, int64_t pairs,
                                          float* row_weight) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i < pairs && row_of[i] >= 0) row_weight[row_of[i]] = weights[i];
}

__global__ void swiglu_v41_kernel(const float* g, const float* u, const float* row_weight, int64_t rows, int64_t I,
                                  float limit, float* h) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i >= rows * I) return;
  float gv = round_bf16_f(g[i]), uv = round_bf16_f(u[i]);
  if (limit > 0.0f) {
    uv = fminf(fmaxf(uv, -limit), limit);
    gv = fminf(gv, limit);
  }
  float v = gv * sigmoid_f(gv) * uv;  // cpu silu(g) * u
  if (row_weight) v = row_weight[i / I] * v;
  h[i] = round_bf16_f(v);
}

__global__ void moe_combine_v41_kernel(const float* ye, const int32_t* row_of, const int32_t* experts, const float* ys,
                                       int64_t tokens, int64_t top_k, int64_t D, float* out) {
  wait_for_previous_kernel();
  const int64_t i = global_index();
  if (i >= tokens * D) return;
  const int64_t t = i / D, d = i % D;
  // The token's routed rows in ascending expert id (ties: ascending k), as the CPU's expert loop.
  int32_t order[kMaxV41TopK];
  int64_t n = 0;
  for (int64_t k = 0; k < top_k; ++k) {
    if (row_of[t * top_k + k] < 0) continue;
    int64_t at = n++;
    while (at > 0 && experts[t * top_k + order[at - 1]] > experts[t * top_k + k]) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = static_cast<int32_t>(k);
  }
  float acc = 0.0f;
  for (int64_t j = 0; j < n; ++j) acc += round_bf16_f(ye[static_cast<int64_t>(row_of[t * top_k + order[j]]) * D + d]);
  out[i] = round_bf16_f(ys ? acc + round_bf16_f(ys[i]) : acc);
}

}  // namespace

void launch_round_bf16(float* x, int64_t n) {
  if (n <= 0) return;
  launch(round_bf16_kernel, blocks_for(n, kThreads), kThreads, 0, x, n);
}

void launch_mhc_collapse(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D, float* out) {
  if (tokens * D <= 0) return;
  launch(mhc_collapse_kernel, blocks_for(tokens * D, kThreads), kThreads, 0, residual, pre, tokens, n, D, out);
}

void launch_compress_pool(DevCompressor c, DevState st, const DeviceSeq* seqs, const int64_t* entries, int64_t count,
                          const float* kv, const float* gate, float* out) {
  if (count * c.head_dim <= 0) return;
  launch(compress_pool_kernel, blocks_for(count * c.head_dim, kThreads), kThreads, 0, c, st, seqs, entries, count, kv,
         gate, out);
}

void launch_compress_pool_slots(DevCompressor c, DevState st, const DeviceSeq* seqs, int32_t nseq, const float* kv,
                                const float* gate) {
  if (nseq <= 0) return;
  launch(compress_pool_slots_kernel, static_cast<unsigned>(nseq), kThreads, 0, c, st, seqs, kv, gate);
}

void launch_store_entries(DevCompressor c, DevState st, const DeviceSeq* seqs, const int32_t* blocks,
                          const int64_t* entries, int64_t count, const float* rows) {
  if (count * c.head_dim <= 0) return;
  launch(store_entries_kernel, blocks_for(count * c.head_dim, kThreads), kThreads, 0, c, st, seqs, blocks, entries,
         count, rows);
}

void launch_engram_gate(float* residual, const float* kv, const float* weight, int64_t tokens, int64_t n, int64_t D,
                        float eps) {
  if (tokens * n <= 0) return;
  launch(engram_gate_kernel, static_cast<unsigned>(tokens * n), kThreads, 0, residual, kv, weight, n, D, eps);
}

void launch_engram_hash(const EngramHashArgs& a) {
  if (a.tokens <= 0) return;
  launch(engram_hash_kernel, blocks_for(a.tokens, 128), 128, 0, a);
  launch(engram_ring_kernel, static_cast<unsigned>(a.nseq), 128, 0, a);
}

void launch_gather_routed_rows(const float* x, const int32_t* row_token, const int32_t* offsets_end, int64_t rows,
                               int64_t D, float* xr) {
  if (rows * D <= 0) return;
  launch(gather_routed_rows_kernel, blocks_for(rows * D, kThreads), kThreads, 0, x, row_token, offsets_end, rows, D,
         xr);
}

void launch_routed_row_weights(const int32_t* row_of, const float* weights, int64_t pairs, float* row_weight) {
  if (pairs <= 0) return;
  launch(routed_row_weights_kernel, blocks_for(pairs, kThreads), kThreads, 0, row_of, weights, pairs, row_weight);
}

void launch_swiglu_v41(const float* g, const float* u, const float* row_weight, int64_t rows, int64_t I, float limit,
                       float* h) {
  if (rows * I <= 0) return;
  launch(swiglu_v41_kernel, blocks_for(rows * I, kThreads), kThreads, 0, g, u, row_weight, rows, I, limit, h);
}

void launch_moe_combine_v41(const float* ye, const int32_t* row_of, const int32_t* experts, const float* ys,
                            int64_t tokens, int64_t top_k, int64_t D, float* out) {
  if (tokens * D <= 0) return;
  launch(moe_combine_v41_kernel, blocks_for(tokens * D, kThreads), kThreads, 0, ye, row_of, experts, ys, tokens, top_k,
         D, out);
}

}  // namespace deepinfer::cuda
