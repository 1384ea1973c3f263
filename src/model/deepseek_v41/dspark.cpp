// DSpark draft blocks (model.py DSparkBlock / DSparkAttention / forward_spec): the stages read the
// main model's taps through main_proj into their window rings, then draft `block` positions in one
// pass from [next token, noise, ...]; the Markov head adds a bias from the previous draft token and
// picks each draft token left to right; a confidence head scores every position.
#include <algorithm>

#include "core/error.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/step.h"

namespace deepinfer::model::deepseek_v41 {

TensorView DeepseekV41::dspark_main(Step& step, TensorView taps) const {
  backend::Backend& be = *backend_;
  const int64_t T = step.tokens(), D = config_.hidden_size, hd = config_.head_dim;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const DSparkStage& first = weights_->mtp.front();
  TensorView main_x = step.ws.f32({T, D});
  project(step, first.main_proj, taps, main_x);
  be.rms_norm(main_x, first.main_norm.data(), eps, main_x);
  be.round_bf16(main_x);
  // Every stage keeps its own projection of main_x as window KV (FP8, rope at the token's position).
  for (size_t s = 0; s < weights_->mtp.size(); ++s) {
    const Attention& a = weights_->mtp[s].block.attn;
    const int64_t layer = config_.num_hidden_layers + static_cast<int64_t>(s);
    TensorView kv = step.ws.f32({T, 1, hd});
    project(step, a.wkv, main_x, kv.reshape({T, hd}));
    be.rms_norm(kv, a.kv_norm.data(), eps, kv);
    be.round_bf16(kv);
    be.rope(kv, step.batch.positions, rope_of(layer).freqs(), false);
    be.round_bf16(kv);
    be.quantize_dequantize(kv, backend::ActQuant::Fp8Ue8m0);
    be.store_window(layout_.layers[static_cast<size_t>(layer)].window, kv.reshape({T, hd}), step.batch.seqs,
                    step.state);
  }
  return main_x;
}

void DeepseekV41::dspark_draft(Step& main, std::span<const float> logits, std::vector<DSparkDraft>& drafts) const {
  // The stages read the main model through the rings dspark_main filled.
  backend::Backend& be = *backend_;
  const ForwardBatch& batch = main.batch;
  const int64_t n = config_.hc_mult, D = config_.hidden_size, V = config_.vocab_size;
  const int64_t B = config_.dspark.block_size, rank = config_.dspark.markov_rank;
  const auto R = static_cast<int64_t>(batch.logit_rows.size());
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  drafts.assign(static_cast<size_t>(R), {});
  if (R == 0) return;

  // One draft block per logits row: [greedy next token, noise, ...] at the positions after it.
  ForwardBatch draft;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = batch.logit_rows[static_cast<size_t>(r)];
    const auto it = std::find_if(batch.seqs.begin(), batch.seqs.end(),
                                 [&](const backend::SeqSlice& s) { return row >= s.begin && row < s.begin + s.count; });
    DEEPINFER_CHECK(it != batch.seqs.end(), "dspark: logits row {} belongs to no sequence", row);
    const std::span<const float> lr = logits.subspan(static_cast<size_t>(r * V), static_cast<size_t>(V));
    const auto next = static_cast<int32_t>(std::max_element(lr.begin(), lr.end()) - lr.begin());
    DSparkDraft& d = drafts[static_cast<size_t>(r)];
    d.ids.push_back(next);
    const int64_t pos = batch.positions[static_cast<size_t>(row)];
    backend::SeqSlice s = *it;
    s.begin = r * B;
    s.count = B;
    s.start = pos + 1;
    draft.seqs.push_back(s);
    for (int64_t j = 0; j < B; ++j) {
      draft.tokens.push_back(j == 0 ? next : static_cast<int32_t>(config_.dspark.noise_token_id));
      draft.positions.push_back(pos + 1 + j);
    }
  }
  const int64_t T = R * B;
  Step step{draft, main.state, main.ws, {}, {}, {}};
  TensorView X = step.ws.f32({T, n, D});
  be.embed(weights_->embed, draft.tokens, X);
  std::vector<float> one_hot(static_cast<size_t>(T * n), 0.0f);
  for (int64_t t = 0; t < T; ++t) one_hot[static_cast<size_t>(t * n)] = 1.0f;
  TensorView pre = step.ws.f32({T, n});
  be.copy_to_backend(pre.data, one_hot.data(), one_hot.size() * sizeof(float));
  for (size_t s = 0; s < weights_->mtp.size(); ++s)
    block(weights_->mtp[s].block, config_.num_hidden_layers + static_cast<int64_t>(s), step, X, pre);

  const DSparkStage& last = weights_->mtp.back();
  TensorView x = step.ws.f32({T, D}), h = step.ws.f32({T, D}), out = step.ws.f32({T, V});
  be.mhc_collapse(X, pre, x);
  be.round_bf16(x);
  be.rms_norm(x, last.norm.data(), eps, h);
  be.round_bf16(h);
  be.linear(weights_->head, h, out);
  std::vector<float> draft_logits(static_cast<size_t>(T * V)), xs(static_cast<size_t>(T * D));
  be.copy_to_host(draft_logits.data(), out.data, draft_logits.size() * sizeof(float));
  be.copy_to_host(xs.data(), x.data, xs.size() * sizeof(float));

  // Left to right: the Markov head's bias from the previous token, then the greedy pick. Sampling
  // is host work here as in the reference (a handful of rows per sequence).
  std::vector<float> markov(static_cast<size_t>(T * rank)), conf_in(static_cast<size_t>(T * (D + rank)));
  std::vector<int32_t> prev(static_cast<size_t>(R));
  std::vector<float> emb_host(static_cast<size_t>(R * rank)), bias_host(static_cast<size_t>(R * V));
  TensorView emb = step.ws.f32({R, 1, rank}), bias = step.ws.f32({R, V});
  for (int64_t j = 0; j < B; ++j) {
    for (int64_t r = 0; r < R; ++r) prev[static_cast<size_t>(r)] = drafts[static_cast<size_t>(r)].ids.back();
    be.embed(last.markov_embed, prev, emb);
    be.linear(last.markov_head, emb.reshape({R, rank}), bias);
    be.copy_to_host(emb_host.data(), emb.data, emb_host.size() * sizeof(float));
    be.copy_to_host(bias_host.data(), bias.data, bias_host.size() * sizeof(float));
    for (int64_t r = 0; r < R; ++r) {
      float* row = draft_logits.data() + ((r * B + j) * V);
      for (int64_t v = 0; v < V; ++v) row[v] += bias_host[static_cast<size_t>(r * V + v)];
      drafts[static_cast<size_t>(r)].ids.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
      float* c = conf_in.data() + (r * B + j) * (D + rank);
      std::copy_n(xs.data() + (r * B + j) * D, D, c);
      std::copy_n(emb_host.data() + r * rank, rank, c + D);
    }
  }
  // Confidence from [x, markov embedding] (x before the final norm), in fp32.
  TensorView cin = step.ws.f32({T, D + rank}), conf = step.ws.f32({T, 1});
  be.copy_to_backend(cin.data, conf_in.data(), conf_in.size() * sizeof(float));
  be.linear(last.confidence, cin, conf);
  std::vector<float> confidence(static_cast<size_t>(T));
  be.copy_to_host(confidence.data(), conf.data, confidence.size() * sizeof(float));
  for (int64_t r = 0; r < R; ++r) {
    DSparkDraft& d = drafts[static_cast<size_t>(r)];
    d.logits.assign(draft_logits.begin() + r * B * V, draft_logits.begin() + (r + 1) * B * V);
    d.confidence.assign(confidence.begin() + r * B, confidence.begin() + (r + 1) * B);
  }
}

}  // namespace deepinfer::model::deepseek_v41
