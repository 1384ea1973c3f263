#include "model/deepseek_v41/model.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/step.h"
#include "model/forward_common.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

bool quantized(const WeightMatrix& w) { return w.dtype == DType::F8_E4M3 || w.dtype == DType::F4_E2M1; }

}  // namespace

DeepseekV41::DeepseekV41(io::DeepseekV41Config config, std::unique_ptr<Weights> weights, EngramTables engram,
                         const LoadOptions& options)
    : config_(std::move(config)),
      common_(io::common_model_config(config_)),
      weights_(std::move(weights)),
      engram_(std::move(engram)),
      layout_(forward_layout(config_)),
      rope_window_(config_.window_rope(), config_.qk_rope_head_dim),
      rope_compressed_(config_.compressed_rope(), config_.qk_rope_head_dim),
      backend_(backend::make_backend(options.device, options.backend_options())),
      workspace_(backend_->allocator()),
      replay_keep_(options.decoder_replay_keep) {
  DEEPINFER_CHECK(replay_keep_ == 0 || replay_keep_ >= config_.sliding_window,
                  "decoder replay keep {} must be 0 (exact) or at least the window, {}", replay_keep_,
                  config_.sliding_window);
  mhc_.hc_mult = config_.hc_mult;
  mhc_.sinkhorn_iters = config_.hc_sinkhorn_iters;
  mhc_.hc_eps = static_cast<float>(config_.hc_eps);
  mhc_.norm_eps = static_cast<float>(config_.rms_norm_eps);
  auto views = [&](const MoE& m) {
    auto& list = experts_.emplace_back();
    for (const Expert& e : m.experts) list.push_back({&e.w1, &e.w2, &e.w3});
    shared_.push_back({&m.shared.w1, &m.shared.w2, &m.shared.w3});
  };
  for (const Block& b : weights_->layers) views(b.ffn);
  for (const DSparkStage& s : weights_->mtp) views(s.block.ffn);
  // One-row tables the step embeds instead of uploading: copy 0 alone, and the mean of the copies.
  const int64_t n = config_.hc_mult;
  first_copy_data_.assign(static_cast<size_t>(n), 0.0f);
  first_copy_data_[0] = 1.0f;
  mean_copies_data_.assign(static_cast<size_t>(n), 1.0f / static_cast<float>(n));
  for (auto [m, data] : {std::pair{&first_copy_, &first_copy_data_}, std::pair{&mean_copies_, &mean_copies_data_}}) {
    m->dtype = DType::F32;
    m->rows = 1;
    m->cols = n;
    m->data = reinterpret_cast<const std::byte*>(data->data());
  }
  // Engram only ever uses q_weight * k_weight, in fp32.
  engram_weight_.resize(config_.engram.layer_ids.size());
  for (const Block& b : weights_->layers) {
    if (!b.engram) continue;
    auto& w = engram_weight_[static_cast<size_t>(b.engram->index)];
    w.resize(b.engram->q_weight.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = b.engram->q_weight[i] * b.engram->k_weight[i];
  }
}

const deepseek_v4::Rope& DeepseekV41::rope_of(int64_t layer) const {
  // Sliding-only layers use plain rope at rope_theta; compressed layers the compress theta (YaRN).
  return layer < config_.num_hidden_layers && config_.compress_ratio(layer) > 0 ? rope_compressed_ : rope_window_;
}

TensorView DeepseekV41::copy(Step& step, TensorView x) const {
  const int64_t rows = x.rows(), width = x.last_dim();
  if (static_cast<int64_t>(iota_.size()) < rows) {
    iota_.resize(static_cast<size_t>(rows));
    std::iota(iota_.begin(), iota_.end(), 0);
  }
  TensorView out = step.ws.f32({rows, width});
  backend_->gather_rows(x.reshape({rows, width}), std::span(iota_).first(static_cast<size_t>(rows)), out);
  return out;
}

// fp8_gemm / fp4_gemm take an FP8 activation with per-32 UE8M0 scales: a quantised copy of x.
TensorView DeepseekV41::fp8_input(Step& step, TensorView x) const {
  TensorView in = copy(step, x);
  backend_->quantize_dequantize(in, backend::ActQuant::Fp8Ue8m0);
  return in;
}

void DeepseekV41::project(Step& step, const WeightMatrix& w, TensorView x, TensorView y) const {
  const TensorView in = quantized(w) ? fp8_input(step, x) : x;
  backend_->linear(w, in.reshape({in.rows(), in.last_dim()}), y.reshape({y.rows(), y.last_dim()}));
  backend_->round_bf16(y);
}

void DeepseekV41::project_siblings(Step& step, TensorView x, std::span<const backend::LinearOut> outs) const {
  constexpr size_t kMax = 8;
  DEEPINFER_CHECK(outs.size() <= kMax, "project_siblings: {} weights, at most {}", outs.size(), kMax);
  std::array<backend::LinearOut, kMax> fp8, plain;
  size_t n_fp8 = 0, n_plain = 0;
  for (const backend::LinearOut& o : outs) (quantized(*o.w) ? fp8[n_fp8++] : plain[n_plain++]) = o;
  const TensorView x2 = x.reshape({x.rows(), x.last_dim()});
  if (n_fp8 > 0) backend_->linears(fp8_input(step, x2), std::span(fp8.data(), n_fp8));
  if (n_plain > 0) backend_->linears(x2, std::span(plain.data(), n_plain));
  for (const backend::LinearOut& o : outs) backend_->round_bf16(o.y);
}

void DeepseekV41::block(const Block& b, int64_t layer, Step& step, TensorView& X, TensorView& pre) const {
  backend::Backend& be = *backend_;
  const int64_t T = step.tokens(), n = config_.hc_mult, D = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  TensorView input = step.ws.f32({T, D}), out = step.ws.f32({T, D});
  // Each site's coefficients come from the stream it sees; its `pre` collapses the stream for the
  // *next* site (attention uses the previous block's FFN pre, the FFN uses this attention's).
  TensorView attn_pre = step.ws.f32({T, n}), post = step.ws.f32({T, n}), comb = step.ws.f32({T, n, n});
  be.mhc_coefficients(mhc_weights(b.hc_attn), mhc_, X, attn_pre, post, comb);
  be.mhc_collapse(X, pre, input);
  be.round_bf16(input);
  be.rms_norm(input, b.attn_norm.data(), eps, input);
  be.round_bf16(input);
  attention(b, layer, step, input, out);
  be.mhc_post(X, out, post, comb);
  be.round_bf16(X);

  TensorView ffn_pre = step.ws.f32({T, n});
  be.mhc_coefficients(mhc_weights(b.hc_ffn), mhc_, X, ffn_pre, post, comb);
  be.mhc_collapse(X, attn_pre, input);
  be.round_bf16(input);
  be.rms_norm(input, b.ffn_norm.data(), eps, input);
  be.round_bf16(input);
  moe(b.ffn, layer, step, input, out);
  be.mhc_post(X, out, post, comb);
  be.round_bf16(X);
  pre = ffn_pre;
}

void DeepseekV41::forward(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const {
  run(batch, pool, logits, nullptr);
}

void DeepseekV41::forward_with_drafts(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits,
                                      std::vector<DSparkDraft>& drafts) const {
  DEEPINFER_CHECK(config_.dspark.enabled(), "forward_with_drafts: the model has no DSpark stages");
  run(batch, pool, logits, &drafts);
}

void DeepseekV41::run(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits,
                      std::vector<DSparkDraft>* drafts) const {
  std::lock_guard lock(forward_mutex_);
  DEEPINFER_CHECK(moe_executor() == nullptr, "expert parallelism runs DeepSeek-V4 only so far, not {}",
                  config_.model_type);
  const int64_t n = config_.hc_mult, D = config_.hidden_size, V = config_.vocab_size;
  check_forward_inputs(batch, pool, layout_, *backend_, V);
  backend::Backend& be = *backend_;
  // A decode step of a size with no recording runs padded up to the next one. A step with DSpark
  // drafts goes on on the host after the forward, so it is launched op by op.
  ForwardBatch padded;
  std::vector<int32_t> scratch_table;
  const ForwardBatch* run_batch = nullptr;
  const backend::StepShape shape =
      pad_for_recording(batch, pool, be, drafts == nullptr, padded, scratch_table, run_batch);
  const bool recorded = be.records_step(shape);
  const int64_t T = run_batch->num_tokens();
  const auto real_rows = static_cast<int64_t>(batch.logit_rows.size());

  // The device half of the step, which the backend may record once and replay (decode steps on
  // CUDA): no copies to or from the host inside, its tensors taken from the workspace in the same
  // order every time, and no host state changed but what it hands out below (it may run twice).
  std::optional<Step> step, decoder_step;
  ForwardBatch replayed;  // the decoder's step under bounded replay
  Step* cur = nullptr;
  bool decoder_skipped = false;
  int64_t decoder_tokens = 0;
  TensorView out_logits;
  auto device_ops = [&] {
    workspace_.reset();
    decoder_step.reset();
    replayed = ForwardBatch{};
    decoder_skipped = false;
    step.emplace(Step{*run_batch, pool.storage(), workspace_, {}, {}, {}, recorded});
    cur = &*step;
    if (config_.engram.enabled()) engram_hashes(*step);

    // Residual stream: hc_mult copies of the embedding; the first block's attention reads copy 0
    // (pre = one-hot on copy 0, from a constant table: no upload inside the step).
    TensorView X = workspace_.f32({T, n, D});
    be.embed(weights_->embed, run_batch->tokens, X);
    TensorView pre = constant_rows(*step, first_copy_, T);
    // DSpark reads the mean of the copies at the input of its target layers (after their Engram).
    const auto& targets = config_.dspark.target_layer_ids;
    std::vector<TensorView> taps;  // per target layer reached so far: [tokens, D]
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      if (l == config_.first_decoder_layer()) {
        std::vector<int64_t> floors;
        const auto kept = decoder_rows(*run_batch, floors);
        if (kept && kept->empty()) {
          // Every row lies before its prompt's replay start and none needs logits: the decoder's
          // window state for them is never read, so the step ends here.
          decoder_skipped = true;
          return;
        }
        if (kept) {
          const std::vector<int64_t>& rows = *kept;
          // The decoder keeps only window state: from here on the step holds the replayed rows alone.
          replay(*step, rows, floors, replayed);
          decoder_step.emplace(Step{replayed, step->state, workspace_, {}, {}, {}, recorded});
          if (!step->hash_ids.empty()) decoder_step->hash_ids = gather(*step, step->hash_ids, rows, 1);
          if (!step->selected.empty()) decoder_step->selected = gather(*step, step->selected, rows);
          if (!step->candidates.empty()) decoder_step->candidates = gather(*step, step->candidates, rows);
          X = gather(*step, X, rows);
          pre = gather(*step, pre, rows);
          for (auto& tap : taps) tap = gather(*step, tap, rows);
          cur = &*decoder_step;
        }
        decoder_tokens = cur->tokens();
      }
      const Block& b = weights_->layers[static_cast<size_t>(l)];
      if (b.engram) engram(*b.engram, *cur, X);
      if (config_.dspark.enabled() && std::find(targets.begin(), targets.end(), l) != targets.end()) {
        const int64_t rows = cur->tokens();
        TensorView uniform = constant_rows(*cur, mean_copies_, rows), tap = workspace_.f32({rows, D});
        be.mhc_collapse(X, uniform, tap);  // 1/n is a power of two here: equals the reference's mean
        be.round_bf16(tap);
        taps.push_back(tap);
      }
      block(b, l, *cur, X, pre);
    }
    if (!taps.empty()) dspark_main(*cur, concat_taps(*cur, taps));

    // Only the rows that need logits go on: the last FFN's pre collapses the copies, norm, head (fp32).
    const ForwardBatch& out = cur->batch;
    const auto rows = static_cast<int64_t>(out.logit_rows.size());
    out_logits = TensorView{};
    if (rows == 0) return;
    TensorView picked = workspace_.f32({rows, n, D}), picked_pre = workspace_.f32({rows, n});
    be.gather_rows(X, out.logit_rows, picked);
    be.gather_rows(pre, out.logit_rows, picked_pre);
    TensorView hidden = workspace_.f32({rows, D});
    be.mhc_collapse(picked, picked_pre, hidden);
    be.round_bf16(hidden);
    be.rms_norm(hidden, weights_->norm.data(), static_cast<float>(config_.rms_norm_eps), hidden);
    be.round_bf16(hidden);
    out_logits = workspace_.f32({rows, V});
    be.linear(weights_->head, hidden, out_logits);
  };
  be.run_step(shape, device_ops);
  decoder_tokens_ += decoder_tokens;
  if (decoder_skipped) {
    logits.clear();
    if (drafts) drafts->clear();
    return;
  }
  // The real rows come first (padding rows, if any, after them).
  logits.resize(static_cast<size_t>(real_rows * V));
  if (real_rows == 0) return;
  be.copy_to_host(logits.data(), out_logits.data, logits.size() * sizeof(float));
  if (drafts) dspark_draft(*cur, logits, *drafts);
}

void DeepseekV41::engram_hashes(Step& step) const {
  // n-gram hash ids of every token, from the compressed ids.
  const ForwardBatch& batch = step.batch;
  const int64_t T = step.tokens();
  std::vector<int32_t> compressed(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    compressed[static_cast<size_t>(t)] = engram_.map.ids[static_cast<size_t>(batch.tokens[static_cast<size_t>(t)])];
  // The ids just before each sequence's start, for a history its ring cannot give (below the
  // window floor of a bounded replay): from its earlier tokens when the batch has them.
  const backend::EngramHashParams params = engram_.params();
  const int64_t look = params.max_ngram - 1;
  std::vector<int32_t> floor_history(batch.seqs.size() * static_cast<size_t>(look), static_cast<int32_t>(params.pad_id));
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const backend::SeqSlice& seq = batch.seqs[si];
    for (int64_t j = 0; j < look; ++j) {
      const int64_t q = seq.start - look + j;
      if (q >= 0 && q < static_cast<int64_t>(seq.prior_tokens.size()))
        floor_history[si * static_cast<size_t>(look) + static_cast<size_t>(j)] =
            engram_.map.ids[static_cast<size_t>(seq.prior_tokens[static_cast<size_t>(q)])];
    }
  }
  step.hash_ids = workspace_.i32({engram_.layers, T, config_.engram.hash_columns()});
  backend_->engram_hash(params, layout_.layers.back().window, compressed, floor_history, batch.seqs, step.state,
                        step.hash_ids);
}

TensorView DeepseekV41::constant_rows(Step& step, const WeightMatrix& row, int64_t rows) const {
  if (static_cast<int64_t>(zeros_.size()) < rows) zeros_.resize(static_cast<size_t>(rows), 0);
  TensorView out = step.ws.f32({rows, row.cols});
  backend_->embed(row, std::span(zeros_).first(static_cast<size_t>(rows)), out.reshape({rows, 1, row.cols}));
  return out;
}

TensorView DeepseekV41::concat_taps(Step& step, const std::vector<TensorView>& taps) const {
  const int64_t T = step.tokens(), D = config_.hidden_size, k = static_cast<int64_t>(taps.size());
  TensorView stacked = step.ws.f32({k * T, D});  // [target][token]
  if (static_cast<int64_t>(iota_.size()) < T) {
    iota_.resize(static_cast<size_t>(T));
    std::iota(iota_.begin(), iota_.end(), 0);
  }
  for (int64_t i = 0; i < k; ++i)
    backend_->gather_rows(taps[static_cast<size_t>(i)], std::span(iota_).first(static_cast<size_t>(T)),
                          TensorView::contiguous(stacked.f32() + i * T * D, DType::F32, {T, D}, stacked.device));
  std::vector<int64_t> order;  // token-major: [T, targets * D]
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k; ++i) order.push_back(i * T + t);
  TensorView out = step.ws.f32({T, k * D});
  backend_->gather_rows(stacked, order, out.reshape({T * k, D}));
  return out;
}

std::optional<std::vector<int64_t>> DeepseekV41::decoder_rows(const ForwardBatch& batch,
                                                               std::vector<int64_t>& floors) const {
  if (replay_keep_ == 0) return std::nullopt;
  std::vector<bool> has_logits(static_cast<size_t>(batch.num_tokens()), false);
  for (int64_t r : batch.logit_rows) has_logits[static_cast<size_t>(r)] = true;
  std::vector<int64_t> rows;
  floors.clear();
  bool changed = false;
  for (const auto& s : batch.seqs) {
    // The first prompt position the decoder sees: prompt_end - keep when the prompt's length is
    // given (any chunk), else, in a chunk that asks for logits (it ends its prompt), its last keep.
    int64_t from = 0;
    int64_t first_logits = -1;
    for (int64_t t = s.begin; t < s.begin + s.count && first_logits < 0; ++t)
      if (has_logits[static_cast<size_t>(t)]) first_logits = s.start + (t - s.begin);
    if (s.prompt_end > 0) {
      if (s.start < s.prompt_end) from = s.prompt_end - replay_keep_;  // decode steps: nothing to bound
    } else if (first_logits >= 0) {
      from = s.start + s.count - replay_keep_;
    }
    // Rows that need logits (prompt logprobs) are never dropped: such a sequence runs exactly.
    if (first_logits >= 0 && first_logits < from) from = 0;
    from = std::max<int64_t>(from, 0);
    const int64_t floor = std::max(s.window_floor, from);
    floors.push_back(floor);
    changed = changed || floor > s.window_floor;
    for (int64_t t = s.begin; t < s.begin + s.count; ++t)
      if (s.start + (t - s.begin) >= from) rows.push_back(t);
  }
  if (!changed) return std::nullopt;
  return rows;
}

void DeepseekV41::replay(const Step& step, std::span<const int64_t> rows, std::span<const int64_t> floors,
                         ForwardBatch& out) const {
  const ForwardBatch& batch = step.batch;
  std::vector<int64_t> index(static_cast<size_t>(batch.num_tokens()), -1);
  for (size_t i = 0; i < rows.size(); ++i) index[static_cast<size_t>(rows[i])] = static_cast<int64_t>(i);
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const auto& s = batch.seqs[si];
    int64_t first = s.begin;
    while (first < s.begin + s.count && index[static_cast<size_t>(first)] < 0) ++first;
    if (first == s.begin + s.count) continue;
    backend::SeqSlice d = s;
    d.begin = index[static_cast<size_t>(first)];
    d.count = s.begin + s.count - first;
    d.start = s.start + (first - s.begin);
    d.window_floor = floors[si];  // window attention reads nothing the decoder skipped
    out.seqs.push_back(d);
  }
  for (int64_t r : rows) {
    out.tokens.push_back(batch.tokens[static_cast<size_t>(r)]);
    out.positions.push_back(batch.positions[static_cast<size_t>(r)]);
  }
  for (int64_t r : batch.logit_rows) {
    DEEPINFER_CHECK(index[static_cast<size_t>(r)] >= 0, "bounded replay dropped logits row {}", r);
    out.logit_rows.push_back(index[static_cast<size_t>(r)]);
  }
}

TensorView DeepseekV41::gather(Step& step, TensorView t, std::span<const int64_t> rows, int row_dim) const {
  // Dimension `row_dim` indexes tokens; the dimensions before it (Engram's layers) are kept. I32
  // data moves as 4-byte words through the F32 row gather.
  DEEPINFER_CHECK(t.is_contiguous() && (t.dtype == DType::F32 || t.dtype == DType::I32) && row_dim < t.rank,
                  "gather: expected a contiguous F32 / I32 tensor");
  int64_t lead = 1;
  for (int k = 0; k < row_dim; ++k) lead *= t.dim(k);
  const int64_t T = t.dim(row_dim), width = t.numel() / std::max<int64_t>(1, lead * T);
  const auto R = static_cast<int64_t>(rows.size());
  auto dims = t.shape;
  dims[static_cast<size_t>(row_dim)] = R;
  TensorView out = step.ws.tensor(t.dtype, std::span<const int64_t>(dims.data(), static_cast<size_t>(t.rank)));
  for (int64_t i = 0; i < lead; ++i) {
    auto* src = static_cast<std::byte*>(t.data) + i * T * width * 4;
    auto* dst = static_cast<std::byte*>(out.data) + i * R * width * 4;
    backend_->gather_rows(TensorView::contiguous(src, DType::F32, {T, width}, t.device), rows,
                          TensorView::contiguous(dst, DType::F32, {R, width}, t.device));
  }
  return out;
}

std::unique_ptr<CausalLM> load(const std::filesystem::path& dir, const LoadOptions& options) {
  io::DeepseekV41Config config = io::load_deepseek_v41_config(dir);
  auto weights = load_weights(dir, config, options.progress);
  EngramTables engram = load_engram_tables(dir, config);
  return std::make_unique<DeepseekV41>(std::move(config), std::move(weights), std::move(engram), options);
}

}  // namespace deepinfer::model::deepseek_v41
