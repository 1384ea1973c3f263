#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "backend/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::model::deepseek_v4 {

using cpu::WeightMatrix;

namespace {

// A float32 matrix view over a loaded vector (the mHC mixers), so it can go through linear().
WeightMatrix f32_matrix(const Vec& v, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.dtype = DType::F32;
  w.rows = rows;
  w.cols = cols;
  w.data = reinterpret_cast<const std::byte*>(v.data());
  return w;
}

}  // namespace

size_t V4SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& l : layers) {
    n += l.window.size();
    for (const CompressorState* c : {&l.compressor, &l.indexer}) {
      n += c->pending_kv.size() + c->pending_gate.size() + c->overlap_kv.size() + c->overlap_gate.size() +
           c->entries.size();
    }
  }
  return n * sizeof(float);
}

DeepseekV4::DeepseekV4(io::ModelConfig config, std::unique_ptr<Weights> weights, TopKTies ties)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      rope_main_(config_.rope_main, config_.qk_rope_head_dim),
      rope_compress_(config_.rope_compress, config_.qk_rope_head_dim),
      ties_(ties) {}

std::vector<int32_t> DeepseekV4::top_k(std::span<const float> scores, int64_t k) const {
  return ties_ == TopKTies::Reference ? cpu::torch_top_k_indices(scores, k) : cpu::top_k_indices(scores, k);
}

std::unique_ptr<SequenceState> DeepseekV4::new_sequence() const {
  auto s = std::make_unique<V4SequenceState>();
  s->layers.resize(weights_->layers.size());
  for (size_t i = 0; i < s->layers.size(); ++i) {
    const Layer& layer = weights_->layers[i];
    LayerState& ls = s->layers[i];
    if (const Compressor* c = layer.attn.compressor.get()) {
      ls.compressor.head_dim = c->head_dim;
      ls.compressor.width = c->overlap ? 2 * c->head_dim : c->head_dim;
    }
    if (const Indexer* ix = layer.attn.indexer.get()) {
      ls.indexer.head_dim = ix->compressor.head_dim;
      ls.indexer.width = 2 * ix->compressor.head_dim;
    }
  }
  return s;
}

void DeepseekV4::hyper_connection_pre(const HyperConnection& hc, const float* X, int64_t T, float* input,
                                      float* post, float* comb) const {
  const int64_t n = config_.hc_mult, D = config_.hidden_size, mix = (2 + n) * n;
  const auto eps = static_cast<float>(config_.hc_eps);
  std::vector<float> flat(static_cast<size_t>(T * n * D)), mixes(static_cast<size_t>(T * mix));
  cpu::rms_norm_to(X, flat.data(), T, n * D, nullptr, static_cast<float>(config_.rms_norm_eps));
  cpu::linear(f32_matrix(hc.fn, mix, n * D), flat.data(), T, mixes.data());
  for (int64_t t = 0; t < T; ++t) {
    const float* m = mixes.data() + t * mix;
    float pre[16];
    for (int64_t i = 0; i < n; ++i) {
      pre[i] = cpu::sigmoid(m[i] * hc.scale[0] + hc.base[i]) + eps;
      post[t * n + i] = 2.0f * cpu::sigmoid(m[n + i] * hc.scale[1] + hc.base[n + i]);
    }
    float* c = comb + t * n * n;  // c[j * n + k]: weight of copy j in output copy k
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < n; ++k) c[j * n + k] = m[2 * n + j * n + k] * hc.scale[2] + hc.base[2 * n + j * n + k];
      cpu::softmax(c + j * n, n);
      for (int64_t k = 0; k < n; ++k) c[j * n + k] += eps;
    }
    auto normalise_columns = [&] {
      for (int64_t k = 0; k < n; ++k) {
        float s = 0;
        for (int64_t j = 0; j < n; ++j) s += c[j * n + k];
        for (int64_t j = 0; j < n; ++j) c[j * n + k] /= (s + eps);
      }
    };
    auto normalise_rows = [&] {
      for (int64_t j = 0; j < n; ++j) {
        float s = 0;
        for (int64_t k = 0; k < n; ++k) s += c[j * n + k];
        for (int64_t k = 0; k < n; ++k) c[j * n + k] /= (s + eps);
      }
    };
    normalise_columns();
    for (int64_t it = 1; it < config_.hc_sinkhorn_iters; ++it) {
      normalise_rows();
      normalise_columns();
    }
    float* in = input + t * D;
    const float* x = X + t * n * D;
    for (int64_t d = 0; d < D; ++d) {
      float s = 0;
      for (int64_t i = 0; i < n; ++i) s += pre[i] * x[i * D + d];
      in[d] = s;
    }
  }
}

void DeepseekV4::hyper_connection_post(float* X, int64_t T, const float* out, const float* post,
                                       const float* comb) const {
  const int64_t n = config_.hc_mult, D = config_.hidden_size;
  std::vector<float> old(static_cast<size_t>(n * D));
  for (int64_t t = 0; t < T; ++t) {
    float* x = X + t * n * D;
    std::copy(x, x + n * D, old.begin());
    const float* c = comb + t * n * n;
    for (int64_t k = 0; k < n; ++k) {
      const float p = post[t * n + k];
      for (int64_t d = 0; d < D; ++d) {
        float s = p * out[t * D + d];
        for (int64_t j = 0; j < n; ++j) s += c[j * n + k] * old[j * D + d];
        x[k * D + d] = s;
      }
    }
  }
}

void DeepseekV4::forward(SequenceState& base_state, std::span<const int32_t> tokens, std::vector<float>& logits,
                         bool all_logits) const {
  auto& state = dynamic_cast<V4SequenceState&>(base_state);
  const int64_t T = static_cast<int64_t>(tokens.size());
  DEEPINFER_CHECK(T > 0, "forward: no tokens");
  const int64_t n = config_.hc_mult, D = config_.hidden_size, V = config_.vocab_size;
  for (int32_t id : tokens) DEEPINFER_CHECK(id >= 0 && id < V, "token id {} outside the vocabulary [0, {})", id, V);
  const int64_t start = state.length_;

  // Residual stream: hc_mult copies of the embedding.
  std::vector<float> X(static_cast<size_t>(T * n * D));
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    weights_->embed.row_to_float(tokens[t], row.data());
    for (int64_t i = 0; i < n; ++i) std::copy(row.begin(), row.end(), X.begin() + (t * n + i) * D);
  }

  std::vector<float> input(static_cast<size_t>(T * D)), out(static_cast<size_t>(T * D));
  std::vector<float> post(static_cast<size_t>(T * n)), comb(static_cast<size_t>(T * n * n));
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  for (size_t l = 0; l < weights_->layers.size(); ++l) {
    const Layer& layer = weights_->layers[l];
    hyper_connection_pre(layer.hc_attn, X.data(), T, input.data(), post.data(), comb.data());
    cpu::rms_norm(input.data(), T, D, layer.attn_norm.data(), eps);
    attention(layer, state.layers[l], input.data(), T, start, out.data());
    hyper_connection_post(X.data(), T, out.data(), post.data(), comb.data());

    hyper_connection_pre(layer.hc_ffn, X.data(), T, input.data(), post.data(), comb.data());
    cpu::rms_norm(input.data(), T, D, layer.ffn_norm.data(), eps);
    moe(layer, input.data(), tokens, out.data());
    hyper_connection_post(X.data(), T, out.data(), post.data(), comb.data());
  }
  state.length_ += T;

  // hc_head collapses the copies with its own sigmoid weights, then the final norm and lm_head.
  const int64_t first = all_logits ? 0 : T - 1, rows = T - first;
  std::vector<float> flat(static_cast<size_t>(rows * n * D)), mixes(static_cast<size_t>(rows * n));
  cpu::rms_norm_to(X.data() + first * n * D, flat.data(), rows, n * D, nullptr, eps);
  cpu::linear(f32_matrix(weights_->hc_head_fn, n, n * D), flat.data(), rows, mixes.data());
  std::vector<float> hidden(static_cast<size_t>(rows * D), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = X.data() + (first + r) * n * D;
    for (int64_t i = 0; i < n; ++i) {
      const float pre = cpu::sigmoid(mixes[r * n + i] * weights_->hc_head_scale[0] + weights_->hc_head_base[i]) +
                        static_cast<float>(config_.hc_eps);
      for (int64_t d = 0; d < D; ++d) hidden[r * D + d] += pre * x[i * D + d];
    }
  }
  cpu::rms_norm(hidden.data(), rows, D, weights_->norm.data(), eps);
  logits.resize(static_cast<size_t>(rows * V));
  cpu::linear(weights_->head, hidden.data(), rows, logits.data());
}

}  // namespace deepinfer::model::deepseek_v4
