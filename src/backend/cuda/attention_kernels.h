#pragma once
// Launchers of the CUDA state-op kernels (attention_kernels.cu): compressors, indexer, window ring
// and sparse attention. Plain functions over device pointers, callable from g++ code; each launches
// on the calling thread's stream (launch_control.h) and returns without synchronising (the caller
// checks the launch).
#include <cstdint>

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

// No padding in argument structs (see device_types.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"

// The arguments shared by the two compress kernels.
struct CompressArgs {
  DevCompressor c;
  DevState st;
  const DeviceSeq* seqs;  // [nseq]
  const int32_t* blocks;  // concatenated block tables
  const float* kv;        // [T, width]
  const float* gate;      // [T, width]
  const float* ape;       // [rate, width]
  const float* norm;      // [head_dim] or null (unweighted)
  float eps;
  int32_t pad = 0;
  DevRope rope;
};

// Writes the entry of every completed window: windows[2 i] = sequence index, windows[2 i + 1] =
// window number. Reads the old slots.
void launch_compress_entries(const CompressArgs& a, const int64_t* windows, int64_t count);
// Then the slot update of every sequence (overlap half of the last completed window, pending rows).
void launch_compress_slots(const CompressArgs& a, int32_t nseq);

struct IndexerArgs {
  DevCompressor keys;
  DevState st;
  const DeviceSeq* seqs;
  const int32_t* blocks;
  int32_t nseq;
  int32_t pad = 0;
  const float* q;             // [T, nh, hd]
  const float* head_weights;  // [T, nh]
  int64_t nh;
  float head_weight_scale, score_scale;
};

// scores[(t - t0) * stride + j] for tokens t0 .. t0 + tokens and the entries j each may see.
void launch_indexer_scores(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int64_t stride);
// Whether it takes nh heads of head_dim hd (at most 256 heads, and q in one SM's shared memory).
bool indexer_scores_supports(int64_t nh, int64_t hd);
// selected[t * top_k ...]: the top_k visible entries (ties to the lower index), sorted, -1 padded.
void launch_indexer_topk(const IndexerArgs& a, int64_t t0, int64_t tokens, const float* scores, int64_t stride,
                         int64_t top_k, int32_t* selected);
// The same under TopKTies::Reference: rows where equal scores make the choice (or a score is not
// finite) are chosen as cpu::torch_top_k_indices does (torch_topk.cuh), on the device. `scores` and
// `ids` ([tokens, stride]) are overwritten, `undecided` holds a flag per row.
void launch_indexer_topk_reference(const IndexerArgs& a, int64_t t0, int64_t tokens, float* scores, int32_t* ids,
                                   int32_t* undecided, int64_t stride, int64_t top_k, int32_t* selected);

// Ring rows of the last min(count, window) tokens of each sequence.
void launch_store_window(const DeviceSeq* seqs, int32_t nseq, int64_t tokens, const float* kv, DevState st,
                         int64_t window, int64_t head_dim, int64_t slot_offset);

struct SparseAttentionArgs {
  const DeviceSeq* seqs;
  const int32_t* blocks;
  int32_t nseq;
  int32_t pad0 = 0;
  DevState st;
  const float* q;   // [T, H, hd]
  const float* kv;  // [T, hd]
  float* out;       // [T, H, hd]
  const float* sink;  // [H] (device)
  float scale;
  int32_t pad1 = 0;
  int64_t T, H, hd;
  int64_t window, window_offset;
  int64_t has_entries;  // 0 / 1
  DevCompressor entries;
  const int32_t* selected;  // [T, k_sel] or null: every completed entry
  int64_t k_sel;
};

#pragma GCC diagnostic pop

constexpr int64_t kMaxAttentionHeadDim = 512;
// Keys per split (a block per token, head and split; the split count follows the token's own keys).
constexpr int64_t kAttentionSplitKeys = 128;
// At most this many splits per (token, head) run in one block (fused: their partial outputs sit in
// shared memory, 12 x 2 KB at head_dim 512, next to the 16 KB of the warps' outputs).
constexpr int64_t kMaxFusedAttentionSplits = 12;
// Tokens [t0, t0 + tokens) with `splits` splits each. fused (splits <= kMaxFusedAttentionSplits):
// one block per (token, head) runs them all and combines; else part_m / part_l [tokens, H, splits]
// and part_o [tokens, H, splits, hd] are scratch for a block per split and a combine kernel. The
// same bits either way (step_plan.h).
void launch_sparse_attention(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits, bool fused,
                             float* part_m, float* part_l, float* part_o);

// The same attention on the tensor cores (tc_attention.cu): tokens [t0, t0 + tokens), 32 heads a
// CTA, float32 precision through split TF32 operands but not the CUDA-core kernels' bits. For head
// sizes with sparse_attention_tc_supports.
bool sparse_attention_tc_supports(int64_t hd);
void launch_sparse_attention_tc(const SparseAttentionArgs& a, int64_t t0, int64_t tokens);
// Key splits for the tensor-core kernel: where its CTAs (a token's 32-head groups) would leave SMs
// idle, each CTA walks split_keys keys of its token's list (a multiple of the 32-key tile) and writes
// a partial for sparse_attention_combine_kernel, as the CUDA-core splits do. By default where that
// fills SMs and by_call (the backend lets a call's size change its rows' bits: not when batching
// keeps bits), from the call's tokens and list_keys (the layer's window plus its selection, the
// same for every step) alone; DEEPINFER_TC_ATTENTION_SPLIT=0 never. DEEPINFER_TC_ATTENTION_SPLIT_KEYS=N
// splits every call at N keys (rounded up to 32), whatever the batch: each row's bits then depend
// on its own keys only (tools/gpu/test.sh runs the attention op tests so). Every call the rule
// splits takes the split path, one split too. Returns the splits (0: none, the direct kernel;
// enough for max_keys) and sets *split_keys.
int64_t sparse_attention_tc_splits(int64_t tokens, int64_t H, int64_t max_keys, int64_t list_keys, bool by_call,
                                   int64_t* split_keys);
// Tokens [t0, t0 + tokens) in `splits` splits of split_keys keys: partials part_m / part_l [tokens, H,
// splits] and part_o [tokens, H, splits, hd], then their combine with the sink into a.out.
void launch_sparse_attention_tc_split(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits,
                                      int64_t split_keys, float* part_m, float* part_l, float* part_o);
// The CUDA-core path's combine of split partials (the layout above) into a.out.
void launch_sparse_attention_combine(const SparseAttentionArgs& a, int64_t t0, int64_t tokens, int64_t splits,
                                     const float* part_m, const float* part_l, const float* part_o);

}  // namespace deepinfer::cuda
