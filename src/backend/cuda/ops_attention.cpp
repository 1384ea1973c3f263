// CUDA state ops: compressors, indexer, window ring, sparse attention. Host side: shape checks,
// staging and launches of the kernels in attention_kernels.cu (semantics: cpu/attention_ops.cpp).
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include <fmt/core.h>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/gemm_kernels.h"  // the tensor-core policy
#include "backend/cuda/cuda_backend.h"

namespace deepinfer::cuda {

namespace {

// The small float arrays of these ops (ape, norm, rope frequencies, sinks) are staged per call
// rather than mirrored once with floats(): the state-op tests build them per case without keep(),
// so a freed and reused host address would hand floats() a stale mirror. (They are a few KB.)
const float* stage_floats(CudaBackend& be, const float* host, size_t count) {
  return be.stage(std::span<const float>(host, count));
}

void check_pools(const backend::StateStorage& state, const char* op) {
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "cuda {}: the state pools must be F32", op);
}

}  // namespace

void CudaBackend::compress(const backend::CompressorLayout& c, const backend::CompressorWeights& w,
                           const backend::RopeFreqs& freqs, TensorView kv, TensorView gate,
                           std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state) {
  begin_op();
  const int64_t T = kv.numel() / std::max<int64_t>(c.width, 1);
  DEEPINFER_CHECK(c.rate >= 1 && c.head_dim >= 1 && c.width >= (c.overlap ? 2 * c.head_dim : c.head_dim),
                  "cuda compress: bad compressor layout (rate {}, head_dim {}, width {})", c.rate, c.head_dim,
                  c.width);
  DEEPINFER_CHECK(kv.numel() == T * c.width && gate.numel() == T * c.width,
                  "cuda compress: projections must be [T, {}]", c.width);
  DEEPINFER_CHECK(w.ape, "cuda compress: no position bias");
  DEEPINFER_CHECK(2 * freqs.half() <= c.head_dim, "cuda compress: rope wider than the entry");
  check_pools(state, "compress");
  if (T == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  std::vector<int64_t> windows;  // (sequence, window) of every window completing in this step
  for (size_t i = 0; i < staged.host.size(); ++i) {
    const DeviceSeq& s = staged.host[i];
    // Windows ending inside cached blocks already have their entries there (bounded replay).
    for (int64_t win = std::max(s.start, s.cached_until) / c.rate; win < (s.start + s.count) / c.rate; ++win) {
      windows.push_back(static_cast<int64_t>(i));
      windows.push_back(win);
    }
  }
  CompressArgs a{};
  a.c = dev_compressor(c);
  a.st = dev_state(state);
  a.seqs = staged.seqs;
  a.blocks = staged.blocks;
  a.kv = kv.f32();
  a.gate = gate.f32();
  a.ape = stage_floats(*this, w.ape, static_cast<size_t>(c.rate * c.width));
  a.norm = w.norm ? stage_floats(*this, w.norm, static_cast<size_t>(c.head_dim)) : nullptr;
  a.eps = w.norm_eps;
  a.rope = {stage_floats(*this, freqs.inv_freq.data(), freqs.inv_freq.size()), freqs.half(), freqs.attention_factor, 0};
  if (step_block_capacity() > 0) {
    // A recorded step launches the same grid every time: padded to the most windows the step's
    // sequences can complete (count / rate + 1 each); the kernel skips sequence -1.
    int64_t bound = 0;
    for (const DeviceSeq& s : staged.host) bound += s.count / c.rate + 1;
    windows.resize(static_cast<size_t>(2 * bound), -1);
  }
  const int64_t count = static_cast<int64_t>(windows.size() / 2);
  if (count > 0) {
    const int64_t* d_windows = stage(std::span<const int64_t>(windows));
    launch_compress_entries(a, d_windows, count);
    DEEPINFER_CUDA_LAUNCHED();
  }
  // Entries read the old slots: the slot update is launched after them (same stream).
  launch_compress_slots(a, staged.count);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::indexer_select(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                                 float head_weight_scale, float score_scale, int64_t top_k, backend::TopKTies ties,
                                 std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                                 TensorView selected) {
  begin_op();
  // The top-k kernel breaks ties to the lower index over the visible entries; under
  // TopKTies::Reference the rows where ties decide are chosen again on the device as the CPU op
  // chooses them (torch_topk.cuh).
  DEEPINFER_CHECK(q.rank == 3, "cuda indexer_select: q must be [T, heads, head_dim]");
  const int64_t T = q.dim(0), nh = q.dim(1), hd = q.dim(2), rate = keys.rate;
  DEEPINFER_CHECK(hd == keys.head_dim && head_weights.numel() == T * nh && selected.numel() == T * top_k,
                  "cuda indexer_select: shapes do not match (T = {}, heads = {}, head_dim = {} vs keys {}, top_k = {})",
                  T, nh, hd, keys.head_dim, top_k);
  DEEPINFER_CHECK(rate >= 1 && top_k >= 0, "cuda indexer_select: bad rate {} / top_k {}", rate, top_k);
  DEEPINFER_CHECK(indexer_scores_supports(nh, hd),
                  "cuda indexer_select: {} heads of {} values are past the scoring kernel (at most 256 heads, q in "
                  "one SM's shared memory)", nh, hd);
  check_pools(state, "indexer_select");
  if (T == 0 || top_k == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  int64_t max_held = 0;
  const IndexerArgs a =
      indexer_args(keys, staged, state, q, head_weights, head_weight_scale, score_scale, &max_held);
  // Score rows [tokens, max_held] in groups of tokens that fit the budget (and as many entry ids
  // for TopKTies::Reference), chosen on the device under both tie policies: no host round trip.
  constexpr int64_t kScoreBudget = int64_t{1} << 25;  // floats (128 MB)
  const int64_t group = std::clamp<int64_t>(kScoreBudget / max_held, 1, std::min<int64_t>(T, 65535));
  const size_t row_bytes = static_cast<size_t>(group * max_held) * sizeof(float);
  auto* scores = static_cast<float*>(scratch(row_bytes, 0));
  const bool reference = ties == backend::TopKTies::Reference;
  auto* ids = reference ? static_cast<int32_t*>(scratch(row_bytes, 1)) : nullptr;
  auto* undecided = reference ? static_cast<int32_t*>(scratch(static_cast<size_t>(group) * sizeof(int32_t), 2)) : nullptr;
  int32_t* out = selected.i32();
  for (int64_t t0 = 0; t0 < T; t0 += group) {
    const int64_t n = std::min(group, T - t0);
    launch_indexer_scores(a, t0, n, scores, max_held);
    DEEPINFER_CUDA_LAUNCHED();
    if (reference) {
      launch_indexer_topk_reference(a, t0, n, scores, ids, undecided, max_held, top_k, out);
    } else {
      launch_indexer_topk(a, t0, n, scores, max_held, top_k, out);
    }
    DEEPINFER_CUDA_LAUNCHED();
  }
}

IndexerArgs CudaBackend::indexer_args(const backend::CompressorLayout& keys, const StagedSeqs& staged,
                                      const backend::StateStorage& state, TensorView q, TensorView head_weights,
                                      float head_weight_scale, float score_scale, int64_t* max_held) {
  int64_t held = 1;
  for (const DeviceSeq& s : staged.host) held = std::max(held, (s.start + s.count) / keys.rate);
  // A recorded step sizes its rows for the tokens its tables can hold, not this step's.
  if (step_token_capacity(state) > 0) held = std::max<int64_t>(1, step_token_capacity(state) / keys.rate);
  DEEPINFER_CHECK(held < (int64_t{1} << 31), "cuda indexer: {} entries are too many", held);
  *max_held = held;
  IndexerArgs a{};
  a.keys = dev_compressor(keys);
  a.st = dev_state(state);
  a.seqs = staged.seqs;
  a.blocks = staged.blocks;
  a.nseq = staged.count;
  a.q = q.f32();
  a.head_weights = head_weights.f32();
  a.nh = q.dim(1);
  a.head_weight_scale = head_weight_scale;
  a.score_scale = score_scale;
  return a;
}

void CudaBackend::store_window(const backend::WindowLayout& wl, TensorView kv, std::span<const backend::SeqSlice> seqs,
                               const backend::StateStorage& state) {
  begin_op();
  const int64_t hd = wl.head_dim, W = wl.window, T = kv.numel() / std::max<int64_t>(hd, 1);
  DEEPINFER_CHECK(kv.numel() == T * hd, "cuda store_window: kv must be [T, {}]", hd);
  DEEPINFER_CHECK(W >= 1, "cuda store_window: window {}", W);
  check_pools(state, "store_window");
  if (T == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  launch_store_window(staged.seqs, staged.count, T, kv.f32(), dev_state(state), W, hd, wl.slot_offset);
  DEEPINFER_CUDA_LAUNCHED();
}

// A pinned schedule decides; otherwise the GEMM policy's rule (DEEPINFER_TC_GEMM, batch invariance:
// CudaBackend::tensor_cores_when) with a threshold of its own.
bool CudaBackend::attention_on_tensor_cores(int64_t tokens, int64_t hd) const {
  if (!sparse_attention_tc_supports(hd)) return false;
  switch (plan().attention) {
    case backend::AttentionSchedule::TensorCores: return true;
    case backend::AttentionSchedule::Split:
    case backend::AttentionSchedule::Fused: return false;
    default: return tensor_cores_when(tokens >= tc_attention_min_tokens());
  }
}

void CudaBackend::sparse_attention(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                                   const backend::CompressorLayout* entries, TensorView selected, const float* sink,
                                   float scale, std::span<const backend::SeqSlice> seqs,
                                   const backend::StateStorage& state, TensorView out) {
  begin_op();
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == wl.head_dim, "cuda sparse_attention: q must be [T, heads, {}]",
                  wl.head_dim);
  const int64_t T = q.dim(0), H = q.dim(1), hd = q.dim(2);
  DEEPINFER_CHECK(kv.numel() == T * hd && out.numel() == T * H * hd,
                  "cuda sparse_attention: kv / out shapes do not match");
  DEEPINFER_CHECK(hd <= kMaxAttentionHeadDim, "cuda sparse_attention: head_dim {} above {}", hd,
                  kMaxAttentionHeadDim);
  DEEPINFER_CHECK(wl.window >= 1, "cuda sparse_attention: window {}", wl.window);
  DEEPINFER_CHECK(!entries || entries->head_dim == hd, "cuda sparse_attention: entries of width {}, heads of {}",
                  entries ? entries->head_dim : 0, hd);
  DEEPINFER_CHECK(sink, "cuda sparse_attention: no sink logits");
  check_pools(state, "sparse_attention");
  if (T == 0 || H == 0) return;
  const bool use_selection = entries && !selected.empty();
  const int64_t k_sel = use_selection ? selected.numel() / T : 0;
  DEEPINFER_CHECK(!use_selection || selected.numel() == T * k_sel, "cuda sparse_attention: selected must be [T, k]");
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  SparseAttentionArgs a{};
  a.seqs = staged.seqs;
  a.blocks = staged.blocks;
  a.nseq = staged.count;
  a.st = dev_state(state);
  a.q = q.f32();
  a.kv = kv.f32();
  a.out = out.f32();
  a.sink = stage_floats(*this, sink, static_cast<size_t>(H));
  a.scale = scale;
  a.T = T;
  a.H = H;
  a.hd = hd;
  a.window = wl.window;
  a.window_offset = wl.slot_offset;
  a.has_entries = entries != nullptr;
  if (entries) a.entries = dev_compressor(*entries);
  a.selected = use_selection ? selected.i32() : nullptr;
  a.k_sel = k_sel;
  // The step's longest key list (each token's own count decides which splits it fills).
  int64_t max_keys = 1;
  for (const DeviceSeq& sq : staged.host) {
    const int64_t pos = sq.start + sq.count - 1;
    const int64_t nwin = pos - std::max(pos - wl.window + 1, sq.window_floor) + 1;
    const int64_t nent = !entries ? 0 : use_selection ? k_sel : (pos + 1) / entries->rate;
    max_keys = std::max(max_keys, nwin + nent);
  }
  if (step_token_capacity(state) > 0)  // a recorded step: the bound for the tokens its tables can hold
    max_keys = wl.window + (!entries ? 0 : use_selection ? k_sel : step_token_capacity(state) / entries->rate);
  if (attention_on_tensor_cores(T, hd)) {
    int64_t split_keys = 0;
    const int64_t list_keys = wl.window + (use_selection ? k_sel : 0);
    const int64_t tc_splits = sparse_attention_tc_splits(T, H, max_keys, list_keys, !batching_keeps_bits(), &split_keys);
    if (tc_splits == 0) {
      launch_sparse_attention_tc(a, 0, T);
    } else {
      static std::once_flag logged;  // tools/gpu/test.sh checks that it ran where asked for (named)
      std::call_once(logged, [] {
        if (std::getenv("DEEPINFER_TC_ATTENTION_SPLIT") || std::getenv("DEEPINFER_TC_ATTENTION_SPLIT_KEYS"))
          fmt::print(stderr, "deepinfer: tensor-core attention in key splits\n");
      });
      auto* part_o = static_cast<float*>(scratch(static_cast<size_t>(T * H * tc_splits * hd) * sizeof(float), 0));
      auto* part_ml = static_cast<float*>(scratch(static_cast<size_t>(2 * T * H * tc_splits) * sizeof(float), 1));
      launch_sparse_attention_tc_split(a, 0, T, tc_splits, split_keys, part_ml, part_ml + T * H * tc_splits, part_o);
    }
    DEEPINFER_CUDA_LAUNCHED();
    return;
  }
  // Splits in token groups whose partials fit the budget.
  const int64_t splits = (max_keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys;
  // The plan spreads them over the GPU (the same bits either way); split partials go through
  // global memory in token groups that fit the budget.
  if (plan().fused_attention(T * H, splits)) {
    launch_sparse_attention(a, 0, T, splits, true, nullptr, nullptr, nullptr);
    DEEPINFER_CUDA_LAUNCHED();
    return;
  }
  constexpr int64_t kPartialBudget = int64_t{1} << 26;  // floats (256 MB)
  const int64_t group = std::clamp<int64_t>(kPartialBudget / (H * splits * (hd + 2)), 1, T);
  auto* part_o = static_cast<float*>(scratch(static_cast<size_t>(group * H * splits * hd) * sizeof(float), 0));
  auto* part_ml = static_cast<float*>(scratch(static_cast<size_t>(2 * group * H * splits) * sizeof(float), 1));
  for (int64_t t0 = 0; t0 < T; t0 += group) {
    launch_sparse_attention(a, t0, std::min(group, T - t0), splits, false, part_ml, part_ml + group * H * splits,
                            part_o);
    DEEPINFER_CUDA_LAUNCHED();
  }
}

}  // namespace deepinfer::cuda
