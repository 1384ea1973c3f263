// DeepSeek-V4.1 MoE (model.py Gate / Expert / MoE) and Engram (model.py Engram): sqrtsoftplus
// routing in fp32 with the correction bias for the choice only, SwiGLU experts in bf16 with the
// routing weight applied before w2; Engram's n-gram rows gated into every residual copy.
#include "core/error.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/step.h"
#include "model/forward_common.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

bool quantized(const WeightMatrix& w) { return w.dtype == DType::F8_E4M3 || w.dtype == DType::F4_E2M1; }

}  // namespace

void DeepseekV41::moe(const MoE& m, int64_t block, Step& step, TensorView x, TensorView out) const {
  backend::Backend& be = *backend_;
  const bool dspark = block >= config_.num_hidden_layers;
  const int64_t T = step.tokens(), E = static_cast<int64_t>(m.experts.size());
  const int64_t K = dspark ? config_.dspark.num_experts_per_tok : config_.num_experts_per_tok;

  backend::RoutingParams routing;
  routing.scoring = scoring_func(config_.scoring_func);
  routing.top_k = K;
  routing.routed_scaling_factor = static_cast<float>(config_.routed_scaling_factor);
  routing.norm_topk_prob = config_.norm_topk_prob && K > 1;  // the reference skips it for one expert
  routing.bias = m.gate_bias.data();
  routing.ties = backend::TopKTies::LowerIndex;  // the reference's top-k, made stable by the fixtures

  // Router logits in fp32 (the reference promotes x and the gate weight).
  TensorView scores = step.ws.f32({T, E}), experts = step.ws.i32({T, K}), weights = step.ws.f32({T, K});
  be.linear(m.gate, x, scores);
  be.moe_route(routing, scores, step.batch.tokens, experts, weights);
  const backend::MoeV41Quant quant{!m.experts.empty() && quantized(m.experts.front().w1), quantized(m.shared.w1)};
  const auto i = static_cast<size_t>(block);
  be.moe_experts_v41({experts_[i], shared_[i], static_cast<float>(config_.swiglu_limit)}, quant, x, experts, weights,
                     out);
}

void DeepseekV41::engram(const Engram& e, Step& step, TensorView X) const {
  backend::Backend& be = *backend_;
  const int64_t T = step.tokens(), cols = config_.engram.hash_columns(), ehd = config_.engram.head_dim;
  const int64_t n = config_.hc_mult, D = config_.hidden_size;
  // The table rows of every hash column (FP8 rows times their scales), concatenated per token; the
  // ids stay where engram_hash wrote them.
  TensorView ids = TensorView::contiguous(step.hash_ids.i32() + e.index * T * cols, DType::I32, {T * cols},
                                          step.hash_ids.device);
  TensorView rows = step.ws.f32({T * cols, 1, ehd});
  be.embed_ids(e.table, ids, rows);
  TensorView kv = step.ws.f32({T, (n + 1) * D});
  project(step, e.wkv, rows.reshape({T, cols * ehd}), kv);
  be.engram_gate(X, kv, engram_weight_[static_cast<size_t>(e.index)].data(), static_cast<float>(config_.rms_norm_eps));
}

}  // namespace deepinfer::model::deepseek_v41
