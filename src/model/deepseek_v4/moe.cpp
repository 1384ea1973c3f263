// DeepSeek-V4 MoE: router scores (sqrtsoftplus by default), expert choice by top-k of score + bias
// (or the frozen tid2eid table on hash layers), weights renormalised (norm_topk_prob) times
// routed_scaling_factor, SwiGLU experts with clamps, plus the shared expert.
#include "core/error.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/step.h"
#include "model/forward_common.h"

namespace deepinfer::model::deepseek_v4 {

void DeepseekV4::moe(const Layer& layer, size_t index, Step& step, TensorView x, TensorView out) const {
  backend::Backend& be = *backend_;
  const MoE& m = layer.ffn;
  const int64_t T = step.batch.num_tokens(), E = config_.n_routed_experts, K = config_.num_experts_per_tok;

  backend::RoutingParams routing;
  routing.scoring = scoring_func(config_.scoring_func);
  routing.top_k = K;
  routing.routed_scaling_factor = static_cast<float>(config_.routed_scaling_factor);
  routing.norm_topk_prob = config_.norm_topk_prob;
  routing.ties = ties_;
  if (layer.mlp_kind == io::MlpKind::HashMoE) {
    routing.tid2eid = m.tid2eid.data();
    routing.tid2eid_rows = static_cast<int64_t>(m.tid2eid.size()) / K;
  } else {
    routing.bias = m.gate_bias.data();
  }

  TensorView scores = step.ws.f32({T, E}), experts = step.ws.i32({T, K}), weights = step.ws.f32({T, K});
  be.linear(m.gate, x, scores);
  be.moe_route(routing, scores, step.batch.tokens, experts, weights);
  const backend::MoeWeights w{experts_[index], shared_[index], static_cast<float>(config_.swiglu_limit)};
  if (MoeExecutor* ex = moe_executor())
    ex->moe_experts(be, static_cast<int64_t>(index), w, x, experts, weights, out);
  else
    be.moe_experts(w, x, experts, weights, out);
}

void DeepseekV4::moe_idle_step() const {
  std::lock_guard lock(forward_mutex_);
  MoeExecutor* ex = moe_executor();
  DEEPINFER_CHECK(ex, "moe_idle_step: no expert-parallel executor is set");
  const int64_t D = config_.hidden_size, K = config_.num_experts_per_tok;
  const TensorView x = TensorView::contiguous(nullptr, DType::F32, {0, D}, backend_->device());
  const TensorView ids = TensorView::contiguous(nullptr, DType::I32, {0, K}, backend_->device());
  const TensorView wts = TensorView::contiguous(nullptr, DType::F32, {0, K}, backend_->device());
  for (size_t l = 0; l < weights_->layers.size(); ++l)
    ex->moe_experts(*backend_, static_cast<int64_t>(l),
                    {experts_[l], shared_[l], static_cast<float>(config_.swiglu_limit)}, x, ids, wts, x);
}

}  // namespace deepinfer::model::deepseek_v4
