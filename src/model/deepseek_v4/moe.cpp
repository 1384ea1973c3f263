// DeepSeek-V4 MoE: router scores (sqrtsoftplus by default), expert choice by top-k of score + bias
// (or the frozen tid2eid table on hash layers), renormalised weights times routed_scaling_factor,
// SwiGLU experts with clamps, plus the shared expert.
#include <algorithm>
#include <cmath>

#include "backend/cpu/ops.h"
#include "core/error.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::model::deepseek_v4 {

namespace {

// out[t] = w2 (silu(min(w1 x, limit)) * clamp(w3 x, -limit, limit)) for every row of x.
void swiglu_expert(const Expert& e, const float* x, int64_t T, float limit, float* out) {
  const int64_t I = e.w1.rows;
  std::vector<float> gate(static_cast<size_t>(T * I)), up(static_cast<size_t>(T * I));
  cpu::linear(e.w1, x, T, gate.data());
  cpu::linear(e.w3, x, T, up.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = cpu::silu(g) * u;
  }
  cpu::linear(e.w2, gate.data(), T, out);
}

}  // namespace

void DeepseekV4::moe(const Layer& layer, const float* x, std::span<const int32_t> tokens, float* out) const {
  const MoE& m = layer.ffn;
  const int64_t T = static_cast<int64_t>(tokens.size()), D = config_.hidden_size;
  const int64_t E = config_.n_routed_experts, K = config_.num_experts_per_tok;
  const auto limit = static_cast<float>(config_.swiglu_limit);

  std::vector<float> scores(static_cast<size_t>(T * E));
  cpu::linear(m.gate, x, T, scores.data());
  for (int64_t t = 0; t < T; ++t) {
    float* s = scores.data() + t * E;
    if (config_.scoring_func == "sqrtsoftplus") {
      for (int64_t e = 0; e < E; ++e) s[e] = std::sqrt(cpu::softplus(s[e]));
    } else if (config_.scoring_func == "sigmoid") {
      for (int64_t e = 0; e < E; ++e) s[e] = cpu::sigmoid(s[e]);
    } else if (config_.scoring_func == "softmax") {
      cpu::softmax(s, E);
    } else {
      fail("unsupported scoring_func '{}' (supported: sqrtsoftplus, sigmoid, softmax)", config_.scoring_func);
    }
  }

  // Routing: per token K (expert, weight) pairs, then tokens grouped by expert.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* s = scores.data() + t * E;
    std::vector<int32_t> chosen;
    if (layer.mlp_kind == io::MlpKind::HashMoE) {
      chosen.assign(m.tid2eid.begin() + tokens[t] * K, m.tid2eid.begin() + (tokens[t] + 1) * K);
    } else {
      for (int64_t e = 0; e < E; ++e) biased[e] = s[e] + m.gate_bias[e];
      chosen = top_k(biased, K);
    }
    float sum = 0.0f;
    for (int32_t e : chosen) sum += s[e];
    const float norm = static_cast<float>(config_.routed_scaling_factor) / (sum + 1e-20f);
    for (int32_t e : chosen) by_expert[e].emplace_back(t, s[e] * norm);
  }

  swiglu_expert(m.shared, x, T, limit, out);
  std::vector<float> xe, ye;
  for (int64_t e = 0; e < E; ++e) {
    const auto& routed = by_expert[e];
    if (routed.empty()) continue;
    const auto n = static_cast<int64_t>(routed.size());
    xe.resize(static_cast<size_t>(n * D));
    ye.resize(static_cast<size_t>(n * D));
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + routed[i].first * D, D, xe.begin() + i * D);
    swiglu_expert(m.experts[e], xe.data(), n, limit, ye.data());
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + routed[i].first * D;
      const float w = routed[i].second;
      for (int64_t d = 0; d < D; ++d) o[d] += w * ye[i * D + d];
    }
  }
}

}  // namespace deepinfer::model::deepseek_v4
