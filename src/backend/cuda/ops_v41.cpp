// CUDA DeepSeek-V4.1 ops, host side: the checks of the CPU reference ops (cpu/v41_ops.cpp,
// cpu/v41_attention_ops.cpp), staging, and the kernels of v41_kernels.cu / v41_attention_kernels.cu.
// The MoE reuses V4's expert plan and CUDA-core expert GEMMs (gemm_kernels.h), with V4.1's bf16
// roundings and FP8 activation quantisation between them.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dense_kernels.h"
#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/quant_kernels.h"
#include "backend/cuda/v41_kernels.h"

namespace deepinfer::cuda {

namespace {

void check_pools(const backend::StateStorage& state, const char* op) {
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "cuda {}: the state pools must be F32", op);
}

int64_t step_tokens(std::span<const backend::SeqSlice> seqs) {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.count;
  return n;
}

// (sequence, entry) pairs as int64 for the kernels, each checked against the step's sequences.
std::vector<int64_t> entry_pairs(std::span<const backend::EntryRef> entries, std::span<const backend::SeqSlice> seqs,
                                 const char* op) {
  std::vector<int64_t> pairs;
  pairs.reserve(2 * entries.size());
  for (const backend::EntryRef& e : entries) {
    DEEPINFER_CHECK(e.seq == -1 || (e.seq >= 0 && static_cast<size_t>(e.seq) < seqs.size() && e.entry >= 0),
                    "cuda {}: entry {} of sequence {} outside the step's {} sequences", op, e.entry, e.seq, seqs.size());
    pairs.push_back(e.seq);
    pairs.push_back(e.entry);
  }
  return pairs;
}

// FP8 activation quantisation in place (groups of 32 along rows of `width`).
void quantize_fp8(float* x, int64_t rows, int64_t width) {
  launch_quantize_dequantize(x, rows * width / 32, 0);
  DEEPINFER_CUDA_LAUNCHED();
}

}  // namespace

void CudaBackend::round_bf16(TensorView x) {
  begin_op();
  check_device(x, DType::F32, "round_bf16");
  launch_round_bf16(x.f32(), x.numel());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::mhc_coefficients(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                                   TensorView pre, TensorView post, TensorView comb) {
  begin_op();
  for (const auto* t : {&residual, &pre, &post, &comb}) check_device(*t, DType::F32, "mhc_coefficients tensor");
  const int64_t n = p.hc_mult, D = residual.last_dim(), T = residual.rows() / n, mix = (2 + n) * n;
  DEEPINFER_CHECK(residual.numel() == T * n * D && pre.numel() == T * n && post.numel() == T * n &&
                      comb.numel() == T * n * n,
                  "mhc_coefficients: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  if (T == 0) return;
  // mhc_pre's kernels (so the same bits), without the pre-mix.
  const auto [sumsq, dots] = mhc_partials(w, residual, T, n * D, mix);
  launch_mhc_coefficients_finish(sumsq, dots, T, n, D, p.norm_eps, floats(w.base, static_cast<size_t>(mix)),
                                 floats(w.scale, 3), p.hc_eps, p.sinkhorn_iters, residual.f32(), pre.f32(), post.f32(),
                                 comb.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::mhc_collapse(TensorView residual, TensorView pre, TensorView out) {
  begin_op();
  for (const auto* t : {&residual, &pre, &out}) check_device(*t, DType::F32, "mhc_collapse tensor");
  const int64_t D = out.last_dim(), T = out.rows(), n = pre.numel() / std::max<int64_t>(T, 1);
  DEEPINFER_CHECK(residual.numel() == T * n * D && pre.numel() == T * n,
                  "mhc_collapse: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  launch_mhc_collapse(residual.f32(), pre.f32(), T, n, D, out.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::compress_pool(const backend::CompressorLayout& c, TensorView kv, TensorView gate,
                                std::span<const backend::EntryRef> entries, std::span<const backend::SeqSlice> seqs,
                                const backend::StateStorage& state, TensorView out) {
  begin_op();
  check_device(kv, DType::F32, "compress_pool kv");
  check_device(gate, DType::F32, "compress_pool gate");
  check_device(out, DType::F32, "compress_pool out");
  const int64_t rate = c.rate, hd = c.head_dim, T = kv.rows();
  DEEPINFER_CHECK(rate >= 1 && !c.overlap && c.width == hd && kv.last_dim() == hd && gate.numel() == kv.numel() &&
                      out.numel() == static_cast<int64_t>(entries.size()) * hd,
                  "compress_pool: expected kv / gate [T, {}] and out [{}, {}]", hd, entries.size(), hd);
  check_pools(state, "compress_pool");
  const std::vector<int64_t> pairs = entry_pairs(entries, seqs, "compress_pool");
  for (const backend::EntryRef& e : entries) {
    if (e.seq < 0) continue;  // padding
    const backend::SeqSlice& s = seqs[static_cast<size_t>(e.seq)];
    DEEPINFER_CHECK((e.entry + 1) * rate <= s.start + s.count, "compress_pool: entry {} is not complete after the step",
                    e.entry);
  }
  if (T == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  if (!entries.empty()) {
    launch_compress_pool(dev_compressor(c), dev_state(state), staged.seqs, stage(std::span<const int64_t>(pairs)),
                         static_cast<int64_t>(entries.size()), kv.f32(), gate.f32(), out.f32());
    DEEPINFER_CUDA_LAUNCHED();
  }
  // The open groups replace the slots' pending rows after the pooling has read them.
  launch_compress_pool_slots(dev_compressor(c), dev_state(state), staged.seqs, staged.count, kv.f32(), gate.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::store_entries(const backend::CompressorLayout& c, TensorView rows,
                                std::span<const backend::EntryRef> entries, std::span<const backend::SeqSlice> seqs,
                                const backend::StateStorage& state) {
  begin_op();
  check_device(rows, DType::F32, "store_entries rows");
  DEEPINFER_CHECK(rows.numel() == static_cast<int64_t>(entries.size()) * c.head_dim,
                  "store_entries: rows hold {} values, {} entries of {} need {}", rows.numel(), entries.size(),
                  c.head_dim, static_cast<int64_t>(entries.size()) * c.head_dim);
  check_pools(state, "store_entries");
  const std::vector<int64_t> pairs = entry_pairs(entries, seqs, "store_entries");
  for (const backend::EntryRef& e : entries)
    DEEPINFER_CHECK(e.seq < 0 || (e.entry + 1) * c.rate <=
                        static_cast<int64_t>(seqs[static_cast<size_t>(e.seq)].blocks.size()) * state.block_tokens,
                    "store_entries: entry {} beyond the block table", e.entry);
  if (entries.empty()) return;
  const StagedSeqs staged = stage_seqs(seqs, step_tokens(seqs), state);
  launch_store_entries(dev_compressor(c), dev_state(state), staged.seqs, staged.blocks,
                       stage(std::span<const int64_t>(pairs)), static_cast<int64_t>(entries.size()), rows.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::indexer_select_v41(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                                     const backend::IndexerV41Params& p, std::span<const backend::SeqSlice> seqs,
                                     const backend::StateStorage& state, TensorView candidates, TensorView selected) {
  begin_op();
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == keys.head_dim, "indexer_select_v41: q must be [T, heads, {}]",
                  keys.head_dim);
  check_device(q, DType::F32, "indexer_select_v41 q");
  check_device(head_weights, DType::F32, "indexer_select_v41 head weights");
  check_device(selected, DType::I32, "indexer_select_v41 selected");
  const int64_t T = q.dim(0), nh = q.dim(1), K = p.top_k, CB = p.candidate_blocks, bs = p.candidate_block_size;
  DEEPINFER_CHECK(head_weights.numel() == T * nh && selected.numel() == T * K,
                  "indexer_select_v41: head weights must be [T, {}] and selected I32 [T, {}]", nh, K);
  const bool with_candidates = p.candidates != backend::CandidateRole::None;
  DEEPINFER_CHECK(!with_candidates || (CB > 0 && bs > 0 && candidates.numel() == T * CB),
                  "indexer_select_v41: candidates must be I32 [T, {}] with a block size", CB);
  if (with_candidates) check_device(candidates, DType::I32, "indexer_select_v41 candidates");
  DEEPINFER_CHECK(keys.rate >= 1 && K >= 0, "indexer_select_v41: bad rate {} / top_k {}", keys.rate, K);
  check_pools(state, "indexer_select_v41");
  DEEPINFER_CHECK(indexer_scores_v41_supports(nh, keys.head_dim),
                  "indexer_select_v41: {} heads of {} values are past the scoring kernel (q of a token must fit an "
                  "SM's shared memory)",
                  nh, keys.head_dim);
  if (T == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  int64_t max_held = 0;  // score_scale: unused by the V4.1 scores
  const IndexerArgs a = indexer_args(keys, staged, state, q, head_weights, p.head_weight_scale, 1.0f, &max_held);
  const int64_t max_blocks = with_candidates ? (max_held + bs - 1) / bs : 0;
  constexpr int64_t kScoreBudget = int64_t{1} << 25;  // floats (128 MB)
  const int64_t group = std::clamp<int64_t>(kScoreBudget / max_held, 1, std::min<int64_t>(T, 65535));
  auto* scores = static_cast<float*>(scratch(static_cast<size_t>(group * max_held) * sizeof(float), 0));
  auto* block_keys = p.candidates == backend::CandidateRole::Source
                         ? static_cast<uint32_t*>(scratch(static_cast<size_t>(group * std::max<int64_t>(max_blocks, 1)) *
                                                              sizeof(uint32_t),
                                                          1))
                         : nullptr;
  const bool filter = p.candidates == backend::CandidateRole::Filter;
  for (int64_t t0 = 0; t0 < T; t0 += group) {
    const int64_t n = std::min(group, T - t0);
    launch_indexer_scores_v41(a, t0, n, scores, max_held, filter ? candidates.i32() : nullptr, CB, bs);
    DEEPINFER_CUDA_LAUNCHED();
    if (block_keys) {
      launch_candidate_blocks_v41(a, t0, n, scores, max_held, CB, bs, block_keys, std::max<int64_t>(max_blocks, 1),
                                  candidates.i32());
      DEEPINFER_CUDA_LAUNCHED();
    }
    // V4's top-k: the top_k visible entries, ties to the lower entry, sorted, -1 padded (-inf
    // scores rank too, as the CPU's stable top-k).
    launch_indexer_topk(a, t0, n, scores, max_held, K, selected.i32());
    DEEPINFER_CUDA_LAUNCHED();
  }
}

namespace {

SparseAttentionArgs attention_args(CudaBackend& be, TensorView q, TensorView kv, const backend::WindowLayout& wl,
                                   const float* sink, float scale, std::span<const backend::SeqSlice> seqs,
                                   const backend::StateStorage& state, TensorView out, const char* op) {
  check_device(q, DType::F32, op);
  check_device(kv, DType::F32, op);
  check_device(out, DType::F32, op);
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == wl.head_dim, "{}: q must be [T, heads, {}]", op, wl.head_dim);
  const int64_t T = q.dim(0), H = q.dim(1), hd = q.dim(2);
  DEEPINFER_CHECK(kv.numel() == T * hd && out.numel() == T * H * hd, "{}: kv / out shapes do not match", op);
  DEEPINFER_CHECK(hd <= kMaxAttentionHeadDim, "{}: head_dim {} above {}", op, hd, kMaxAttentionHeadDim);
  DEEPINFER_CHECK(wl.window >= 1 && sink, "{}: window {} / no sink logits", op, wl.window);
  check_pools(state, op);
  const CudaBackend::StagedSeqs staged = be.stage_seqs(seqs, T, state);
  SparseAttentionArgs a{};
  a.seqs = staged.seqs;
  a.blocks = staged.blocks;
  a.nseq = staged.count;
  a.st = CudaBackend::dev_state(state);
  a.q = q.f32();
  a.kv = kv.f32();
  a.out = out.f32();
  a.sink = be.stage(std::span<const float>(sink, static_cast<size_t>(H)));
  a.scale = scale;
  a.T = T;
  a.H = H;
  a.hd = hd;
  a.window = wl.window;
  a.window_offset = wl.slot_offset;
  return a;
}

}  // namespace

void CudaBackend::sparse_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                                       const backend::CompressorLayout* entries, TensorView selected, const float* sink,
                                       float scale, std::span<const backend::SeqSlice> seqs,
                                       const backend::StateStorage& state, TensorView out) {
  begin_op();
  SparseAttentionArgs a = attention_args(*this, q, kv, wl, sink, scale, seqs, state, out, "sparse_attention_v41");
  if (a.T == 0 || a.H == 0) return;
  if (entries && !selected.empty()) {
    check_device(selected, DType::I32, "sparse_attention_v41 selected");
    DEEPINFER_CHECK(entries->head_dim == a.hd && selected.numel() % a.T == 0,
                    "sparse_attention_v41: entries of width {} for heads of {}, selected must be [T, k]",
                    entries->head_dim, a.hd);
    a.has_entries = 1;
    a.entries = dev_compressor(*entries);
    a.selected = selected.i32();
    a.k_sel = selected.numel() / a.T;
  }
  launch_attention_v41(a, false);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::block_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl, const float* sink,
                                      float scale, std::span<const backend::SeqSlice> seqs,
                                      const backend::StateStorage& state, TensorView out) {
  begin_op();
  const SparseAttentionArgs a =
      attention_args(*this, q, kv, wl, sink, scale, seqs, state, out, "block_attention_v41");
  if (a.T == 0 || a.H == 0) return;
  launch_attention_v41(a, true);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::moe_experts_v41(const backend::MoeWeights& w, const backend::MoeV41Quant& quant, TensorView x,
                                  TensorView experts, TensorView weights, TensorView out) {
  begin_op();
  check_device(x, DType::F32, "moe_experts_v41 input");
  check_device(out, DType::F32, "moe_experts_v41 output");
  check_device(experts, DType::I32, "moe_experts_v41 experts");
  check_device(weights, DType::F32, "moe_experts_v41 weights");
  const int64_t T = x.rows(), D = x.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  const auto E = static_cast<int64_t>(w.experts.size());
  DEEPINFER_CHECK(out.numel() == T * D && experts.numel() == T * K && weights.numel() == T * K,
                  "moe_experts_v41: input [{}, {}], experts / weights of {} / {} values, output of {}", T, D,
                  experts.numel(), weights.numel(), out.numel());
  DEEPINFER_CHECK(K <= kMaxV41TopK, "moe_experts_v41: {} experts per token above {}", K, kMaxV41TopK);
  if (T == 0) return;
  const float limit = w.swiglu_limit;
  const int64_t I = E > 0 && w.experts[0].w1 ? w.experts[0].w1->rows : 0;
  const int64_t Is = w.shared.w1 ? w.shared.w1->rows : 0;
  const int64_t routed = E > 0 ? T * K : 0;
  DEEPINFER_CHECK(!(quant.routed || quant.shared) || D % 32 == 0, "moe_experts_v41: FP8 activations need D % 32 == 0");
  DEEPINFER_CHECK(!quant.routed || I % 32 == 0, "moe_experts_v41: FP8 activations need I % 32 == 0 (I = {})", I);
  DEEPINFER_CHECK(!quant.shared || Is % 32 == 0, "moe_experts_v41: FP8 activations need I % 32 == 0 (I = {})", Is);
  const ExpertTable* table = routed > 0 ? &expert_table(w.experts, D) : nullptr;
  std::vector<DevMatrix> s1, s3, s2;
  if (w.shared.w1) {
    DEEPINFER_CHECK(w.shared.w3 && w.shared.w2 && w.shared.w1->cols == D && w.shared.w3->rows == Is &&
                        w.shared.w3->cols == D && w.shared.w2->rows == D && w.shared.w2->cols == Is,
                    "moe_experts_v41: shared expert does not fit D = {}", D);
    s1 = {weight(*w.shared.w1).dev()};
    s3 = {weight(*w.shared.w3).dev()};
    s2 = {weight(*w.shared.w2).dev()};
  }
  const bool routed_few = routed <= 2 * std::max<int64_t>(E, 1);
  const int tile_rows = routed_few ? 2 : kGemmTileRows;
  const int64_t max_tiles = routed > 0 ? moe_max_tiles(routed, E, tile_rows) : 0;
  const size_t index_ints = moe_index_ints(E, routed, max_tiles);

  // Every scratch buffer first (a growing scratch() synchronises and frees the old buffer).
  auto f32_scratch = [&](int64_t n, int which) {
    return static_cast<float*>(scratch(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float), which));
  };
  const int64_t inter = std::max(routed * I, T * Is);
  float* g = f32_scratch(inter, 0);
  float* u = f32_scratch(inter, 1);
  float* xq_routed = quant.routed && routed > 0 ? f32_scratch(T * D, 2) : nullptr;
  float* xq_shared = quant.shared && w.shared.w1 ? f32_scratch(T * D, 3) : nullptr;
  float* ys = w.shared.w1 ? f32_scratch(T * D, 4) : nullptr;
  float* xr = routed > 0 ? f32_scratch(routed * D, 5) : nullptr;
  float* ye = routed > 0 ? f32_scratch(routed * D, 6) : nullptr;
  float* row_weight = routed > 0 ? f32_scratch(routed, 7) : nullptr;
  auto* ints = routed > 0 ? static_cast<int32_t*>(scratch(index_ints * sizeof(int32_t), 8)) : nullptr;

  auto quantized_copy = [&](float* dst) {
    DEEPINFER_CUDA_CHECK(stream_copy(dst, x.data, static_cast<size_t>(T * D) * sizeof(float), cudaMemcpyDeviceToDevice));
    quantize_fp8(dst, T, D);
    return static_cast<const float*>(dst);
  };

  // The shared expert: ys [T, D] = bf16(w2 q(bf16(silu(bf16 w1 x) * bf16 w3 x))).
  if (w.shared.w1) {
    const float* xs = xq_shared ? quantized_copy(xq_shared) : x.f32();
    const DevMatrix* d1 = stage(std::span<const DevMatrix>(s1));
    const DevMatrix* d3 = stage(std::span<const DevMatrix>(s3));
    const DevMatrix* d2 = stage(std::span<const DevMatrix>(s2));
    const int64_t tiles = (T + kGemmTileRows - 1) / kGemmTileRows;
    const bool few = T <= 2;
    launch_moe_down(gemm_format(s1[0]), d1, nullptr, nullptr, tiles, T, xs, D, Is, g, few);
    DEEPINFER_CUDA_LAUNCHED();
    launch_moe_down(gemm_format(s3[0]), d3, nullptr, nullptr, tiles, T, xs, D, Is, u, few);
    DEEPINFER_CUDA_LAUNCHED();
    launch_swiglu_v41(g, u, nullptr, T, Is, limit, g);
    DEEPINFER_CUDA_LAUNCHED();
    if (quant.shared) quantize_fp8(g, T, Is);
    launch_moe_down(gemm_format(s2[0]), d2, nullptr, nullptr, tiles, T, g, Is, D, ys, few);
    DEEPINFER_CUDA_LAUNCHED();
  }
  if (routed == 0) {
    launch_moe_combine_v41(nullptr, nullptr, nullptr, ys, T, 0, D, out.f32());
    DEEPINFER_CUDA_LAUNCHED();
    return;
  }
  // The routed experts on V4's plan: rows grouped by expert in tiles; each row's gate and up, the
  // routing weight applied before the roundings of the activation, then down.
  const MoeIndex ix = moe_index_in(ints, E, routed);
  launch_moe_plan(experts.i32(), T, K, E, ix, tile_rows);
  DEEPINFER_CUDA_LAUNCHED();
  const float* xin = xq_routed ? quantized_copy(xq_routed) : x.f32();
  launch_gather_routed_rows(xin, ix.row_token, ix.offsets + E, routed, D, xr);
  DEEPINFER_CUDA_LAUNCHED();
  launch_moe_down(table->gate_up_format, table->d1, ix.tiles, ix.tile_count, max_tiles, 0, xr, D, I, g, routed_few);
  DEEPINFER_CUDA_LAUNCHED();
  launch_moe_down(table->gate_up_format, table->d3, ix.tiles, ix.tile_count, max_tiles, 0, xr, D, I, u, routed_few);
  DEEPINFER_CUDA_LAUNCHED();
  launch_routed_row_weights(ix.row_of, weights.f32(), routed, row_weight);
  DEEPINFER_CUDA_LAUNCHED();
  launch_swiglu_v41(g, u, row_weight, routed, I, limit, g);
  DEEPINFER_CUDA_LAUNCHED();
  if (quant.routed) quantize_fp8(g, routed, I);
  launch_moe_down(table->down_format, table->d2, ix.tiles, ix.tile_count, max_tiles, 0, g, I, D, ye, routed_few);
  DEEPINFER_CUDA_LAUNCHED();
  launch_moe_combine_v41(ye, ix.row_of, experts.i32(), ys, T, K, D, out.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::engram_gate(TensorView residual, TensorView kv, const float* weight, float eps) {
  begin_op();
  check_device(residual, DType::F32, "engram_gate residual");
  check_device(kv, DType::F32, "engram_gate kv");
  DEEPINFER_CHECK(residual.rank == 3, "engram_gate: residual must be [T, n, D]");
  const int64_t T = residual.dim(0), n = residual.dim(1), D = residual.dim(2);
  DEEPINFER_CHECK(kv.numel() == T * (n + 1) * D, "engram_gate: kv must be [T, {}]", (n + 1) * D);
  DEEPINFER_CHECK(weight, "engram_gate: no weight");
  if (T == 0) return;
  launch_engram_gate(residual.f32(), kv.f32(), floats(weight, static_cast<size_t>(n * D)), T, n, D, eps);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::engram_hash(const backend::EngramHashParams& p, const backend::WindowLayout& history,
                              std::span<const int32_t> compressed_ids, std::span<const int32_t> floor_history,
                              std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                              TensorView hash_ids) {
  begin_op();
  const auto T = static_cast<int64_t>(compressed_ids.size());
  const int64_t cols = p.columns(), look = p.max_ngram - 1, W = history.window;
  check_device(hash_ids, DType::I32, "engram_hash ids");
  DEEPINFER_CHECK(hash_ids.numel() == p.layers * T * cols, "engram_hash: hash ids must be I32 [{}, {}, {}]", p.layers,
                  T, cols);
  DEEPINFER_CHECK(p.max_ngram >= 2 && p.max_ngram <= kMaxEngramNgram, "engram_hash: max_ngram {} outside [2, {}]",
                  p.max_ngram, kMaxEngramNgram);
  DEEPINFER_CHECK(history.head_dim == 1 && W >= look, "engram_hash: the history ring must hold {} ids", look);
  check_pools(state, "engram_hash");
  DEEPINFER_CHECK(floor_history.empty() || floor_history.size() == seqs.size() * static_cast<size_t>(look),
                  "engram_hash: floor_history must hold {} ids per sequence, got {} for {} sequences", look,
                  floor_history.size(), seqs.size());
  if (T == 0) return;
  const StagedSeqs staged = stage_seqs(seqs, T, state);
  EngramHashArgs a{};
  a.max_ngram = p.max_ngram;
  a.layers = p.layers;
  a.heads = p.heads;
  a.pad_id = p.pad_id;
  a.multipliers = stage(std::span<const int64_t>(p.multipliers, static_cast<size_t>(p.layers * p.max_ngram)));
  a.primes = stage(std::span<const int64_t>(p.primes, static_cast<size_t>(p.layers * cols)));
  a.offsets = stage(std::span<const int64_t>(p.offsets, static_cast<size_t>(p.layers * cols)));
  a.ids = stage(compressed_ids);
  a.floor_history = floor_history.empty() ? nullptr : stage(floor_history);
  a.seqs = staged.seqs;
  a.nseq = staged.count;
  a.st = dev_state(state);
  a.window = W;
  a.slot_offset = history.slot_offset;
  a.tokens = T;
  a.out = hash_ids.i32();
  launch_engram_hash(a);
  DEEPINFER_CUDA_LAUNCHED();
}

}  // namespace deepinfer::cuda
