#pragma once
// Launchers of the DeepSeek-V4.1 CUDA kernels (v41_kernels.cu, v41_attention_kernels.cu); the
// semantics are the CPU reference's (cpu/v41_ops.cpp, cpu/v41_attention_ops.cpp). Plain pointers,
// sizes and the structs of device_types.h / attention_kernels.h: shared by g++ (ops_v41.cpp) and nvcc.
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

// x[i] = bf16(x[i]) (ties to even), in place.
void launch_round_bf16(float* x, int64_t n);
// out [T, D] = sum_i pre[t, i] * residual[t, i, :], copies added in order.
void launch_mhc_collapse(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D, float* out);

// --- compressor pooling (rate > 1, no overlap, width == head_dim) ---
// entries [2 * count]: (sequence index, entry number) pairs (sequence -1: padding, a zero row).
// out [count, head_dim].
void launch_compress_pool(DevCompressor c, DevState st, const DeviceSeq* seqs, const int64_t* entries, int64_t count,
                          const float* kv, const float* gate, float* out);
// Then each sequence's open group into its slot (after the pooling read the old one).
void launch_compress_pool_slots(DevCompressor c, DevState st, const DeviceSeq* seqs, int32_t nseq, const float* kv,
                                const float* gate);
// rows [count, head_dim] into the given entries' blocks (padding entries skipped).
void launch_store_entries(DevCompressor c, DevState st, const DeviceSeq* seqs, const int32_t* blocks,
                          const int64_t* entries, int64_t count, const float* rows);

// --- Engram ---
// residual [T, n, D] += sigmoid(signed sqrt(dot)) * value per copy (cpu engram_gate), bf16 result.
void launch_engram_gate(float* residual, const float* kv, const float* weight, int64_t tokens, int64_t n, int64_t D,
                        float eps);
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
struct EngramHashArgs {
  int64_t max_ngram, layers, heads, pad_id;
  const int64_t* multipliers;  // [layers, max_ngram]
  const int64_t* primes;       // [layers, columns]
  const int64_t* offsets;      // [layers, columns]
  const int32_t* ids;          // [T] compressed ids of the step
  const int32_t* floor_history;  // [nseq, max_ngram - 1] or null
  const DeviceSeq* seqs;
  int32_t nseq;
  int32_t pad = 0;
  DevState st;
  int64_t window, slot_offset;  // the history ring (head_dim 1)
  int64_t tokens;
  int32_t* out;  // [layers, T, columns]
};
#pragma GCC diagnostic pop
constexpr int64_t kMaxEngramNgram = 16;
// The hash ids of every token, then (a second launch) each sequence's ring updated.
void launch_engram_hash(const EngramHashArgs& a);

// --- MoE experts in V4.1's bf16 semantics ---
// xr [rows, D] = x[row_token[r]] for the rows r < offsets[E] (the routed rows of the plan).
void launch_gather_routed_rows(const float* x, const int32_t* row_token, const int32_t* offsets_end, int64_t rows,
                               int64_t D, float* xr);
// row_weight[row_of[t, k]] = weights[t, k] for the routed pairs.
void launch_routed_row_weights(const int32_t* row_of, const float* weights, int64_t pairs, float* row_weight);
// h [rows, I] = bf16(w * silu(min(bf16 g, limit)) * clamp(bf16 u, -limit, limit)) (no clamps for
// limit <= 0; w = row_weight[r], or 1 with row_weight null); h may alias g.
void launch_swiglu_v41(const float* g, const float* u, const float* row_weight, int64_t rows, int64_t I, float limit,
                       float* h);
// out[t] = bf16(sum of bf16(ye[row_of[t, k]]) over k in ascending expert id (from 0), + bf16(ys[t])),
// ys null: no shared expert. top_k <= kMaxV41TopK.
constexpr int64_t kMaxV41TopK = 32;
void launch_moe_combine_v41(const float* ye, const int32_t* row_of, const int32_t* experts, const float* ys,
                            int64_t tokens, int64_t top_k, int64_t D, float* out);

// --- attention and indexer ---
// sparse_attention_v41 (block = 0) and block_attention_v41 (block = 1) over a's keys (a.selected
// with a.k_sel, or none). One block per (token, head).
void launch_attention_v41(const SparseAttentionArgs& a, bool block);
// V4.1 index scores in bf16 (cpu indexer_select_v41) into scores [tokens, stride]; with
// candidates non-null (a Filter), entries outside the token's candidate blocks score -inf.
void launch_indexer_scores_v41(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int64_t stride,
                               const int32_t* candidates, int64_t candidate_blocks, int64_t block_size);
// Whether launch_indexer_scores_v41 takes these shapes (q of a token fits an SM's shared memory).
bool indexer_scores_v41_supports(int64_t nh, int64_t hd);
// A candidate Source: the top candidate_blocks blocks of block_size entries by their best score, the
// newest block pinned, in rank order, -1 padded, into candidates [T, candidate_blocks].
// keys [tokens, block_stride] is scratch.
void launch_candidate_blocks_v41(const IndexerArgs& a, int64_t t0, int64_t tokens, const float* scores, int64_t stride,
                                 int64_t candidate_blocks, int64_t block_size, uint32_t* keys, int64_t block_stride,
                                 int32_t* candidates);

}  // namespace deepinfer::cuda
