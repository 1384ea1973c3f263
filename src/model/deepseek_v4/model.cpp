#include "model/deepseek_v4/model.h"

#include <algorithm>

#include "core/error.h"
#include "model/deepseek_v4/step.h"
#include "model/forward_common.h"

namespace deepinfer::model::deepseek_v4 {

DeepseekV4::DeepseekV4(io::ModelConfig config, std::unique_ptr<Weights> weights, const LoadOptions& options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      layout_(deepseek_v4::state_layout(config_)),
      rope_main_(config_.rope_main, config_.qk_rope_head_dim),
      rope_compress_(config_.rope_compress, config_.qk_rope_head_dim),
      ties_(options.batch_invariant ? TopKTies::LowerIndex : options.top_k_ties),
      backend_(backend::make_backend(options.device, options.backend_options())),
      workspace_(backend_->allocator()) {
  mhc_.hc_mult = config_.hc_mult;
  mhc_.sinkhorn_iters = config_.hc_sinkhorn_iters;
  mhc_.hc_eps = static_cast<float>(config_.hc_eps);
  mhc_.norm_eps = static_cast<float>(config_.rms_norm_eps);
  for (const Layer& layer : weights_->layers) {
    auto& list = experts_.emplace_back();
    for (const Expert& e : layer.ffn.experts) list.push_back({&e.w1, &e.w2, &e.w3});
    shared_.push_back({&layer.ffn.shared.w1, &layer.ffn.shared.w2, &layer.ffn.shared.w3});
  }
}

void DeepseekV4::forward(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const {
  std::lock_guard lock(forward_mutex_);
  const TensorView out = forward_device(batch, pool);
  logits.resize(static_cast<size_t>(out.numel()));
  if (out.empty()) return;
  backend_->copy_to_host(logits.data(), out.data, static_cast<size_t>(out.numel()) * sizeof(float));
}

void DeepseekV4::forward_sampled(const ForwardBatch& batch, kv::StatePool& pool,
                                 std::span<const backend::SampleRow> rows, std::vector<int32_t>& tokens) const {
  std::lock_guard lock(forward_mutex_);
  DEEPINFER_CHECK(rows.size() == batch.logit_rows.size(), "forward_sampled: {} sample rows for {} logits rows",
                  rows.size(), batch.logit_rows.size());
  const TensorView out = forward_device(batch, pool);
  tokens.resize(rows.size());
  if (rows.empty()) return;
  backend_->sample(out, rows, tokens);
}

TensorView DeepseekV4::forward_device(const ForwardBatch& batch, kv::StatePool& pool) const {
  const int64_t n = config_.hc_mult, D = config_.hidden_size, V = config_.vocab_size;
  check_forward_inputs(batch, pool, layout_, *backend_, V);
  backend::Backend& be = *backend_;
  // A decode step of a size with no recording runs padded up to the next one.
  ForwardBatch padded;
  std::vector<int32_t> scratch_table;
  const ForwardBatch* run = nullptr;
  const backend::StepShape shape =
      pad_for_recording(batch, pool, be, moe_executor() == nullptr, padded, scratch_table, run);

  const int64_t T = run->num_tokens();
  Step step{{*run, pool.storage(), workspace_}};
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const auto rows = static_cast<int64_t>(run->logit_rows.size());
  const auto real_rows = static_cast<int64_t>(batch.logit_rows.size());
  TensorView out_logits;

  // The device half of the step (the backend may record it once and replay it: decode steps on
  // CUDA). Its tensors come from the workspace in the same order every time, so a replay sees the
  // same addresses.
  auto device_ops = [&] {
    workspace_.reset();
    // Residual stream: hc_mult copies of the embedding.
    TensorView X = workspace_.f32({T, n, D});
    be.embed(weights_->embed, run->tokens, X);
    TensorView input = workspace_.f32({T, D}), out = workspace_.f32({T, D});
    TensorView post = workspace_.f32({T, n}), comb = workspace_.f32({T, n, n});
    for (size_t l = 0; l < weights_->layers.size(); ++l) {
      const Layer& layer = weights_->layers[l];
      be.mhc_pre(mhc_weights(layer.hc_attn), mhc_, X, input, post, comb);
      be.rms_norm(input, layer.attn_norm.data(), eps, input);
      attention(layer, l, step, input, out);
      be.mhc_post(X, out, post, comb);

      be.mhc_pre(mhc_weights(layer.hc_ffn), mhc_, X, input, post, comb);
      be.rms_norm(input, layer.ffn_norm.data(), eps, input);
      moe(layer, l, step, input, out);
      be.mhc_post(X, out, post, comb);
    }

    // Only the rows that need logits go on: hc_head collapses the copies, then norm and lm_head.
    if (rows == 0) return;
    TensorView picked = workspace_.f32({rows, n, D});
    be.gather_rows(X, run->logit_rows, picked);
    TensorView hidden = workspace_.f32({rows, D});
    be.mhc_head({weights_->hc_head_fn.data(), weights_->hc_head_base.data(), weights_->hc_head_scale.data()}, mhc_,
                picked, hidden);
    be.rms_norm(hidden, weights_->norm.data(), eps, hidden);
    out_logits = workspace_.f32({rows, V});
    be.linear(weights_->head, hidden, out_logits);
  };
  be.run_step(shape, device_ops);
  // [rows, V] in the workspace, until the next forward (padding rows, if any, after them).
  return rows == real_rows ? out_logits : TensorView::contiguous(out_logits.data, out_logits.dtype, {real_rows, V},
                                                                 out_logits.device);
}

}  // namespace deepinfer::model::deepseek_v4
