// DeepSeek-V4.1 attention (model.py Attention / Compressor / Indexer): shared-KV MQA over the
// sliding window (window KV fake-quantised to FP8) plus, on compressed layers, the top-k entries of
// the shared compressed KV (FP4 with E4M3 scales per 16). Only kv sources compress, only index
// sources run an indexer (keys FP4 from the kv source's latent); the other compressed layers
// reuse the latest top-k. Layers hand these down through the Step in layer order.
#include <cmath>

#include "core/error.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/step.h"

namespace deepinfer::model::deepseek_v41 {

void DeepseekV41::attention(const Block& b, int64_t layer, Step& step, TensorView x, TensorView out) const {
  backend::Backend& be = *backend_;
  const Attention& a = b.attn;
  const kv::LayerStateLayout& state = layout_.layers[static_cast<size_t>(layer)];
  const int64_t T = step.tokens();
  const int64_t H = config_.num_attention_heads, hd = config_.head_dim, ql = config_.q_lora_rank;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const backend::RopeFreqs rope = rope_of(layer).freqs();
  const std::span<const int64_t> positions = step.batch.positions;
  const std::span<const backend::SeqSlice> seqs = step.batch.seqs;

  // Low-rank queries (no per-head norm in V4.1); qr also feeds the indexer. The window's KV comes
  // from the same x: both projections from one FP8 copy of it.
  TensorView qr = step.ws.f32({T, ql}), q = step.ws.f32({T, H, hd}), kv = step.ws.f32({T, 1, hd});
  const backend::LinearOut of_x[] = {{&a.wq_a, qr}, {&a.wkv, kv.reshape({T, hd})}};
  project_siblings(step, x, of_x);
  be.rms_norm(qr, a.q_norm.data(), eps, qr);
  be.round_bf16(qr);
  project(step, a.wq_b, qr, q.reshape({T, H * hd}));
  be.rope(q, positions, rope, false);
  be.round_bf16(q);

  // The window's single KV head (K == V), FP8 over the whole post-rope vector.
  be.rms_norm(kv, a.kv_norm.data(), eps, kv);
  be.round_bf16(kv);
  be.rope(kv, positions, rope, false);
  be.round_bf16(kv);
  be.quantize_dequantize(kv, backend::ActQuant::Fp8Ue8m0);

  const backend::CompressorLayout* entries = nullptr;
  TensorView selected;
  const bool backbone = layer < config_.num_hidden_layers;
  if (backbone && config_.compress_ratio(layer) > 0) {
    if (config_.is_kv_source(layer)) compress(b, layer, step, x);
    if (config_.is_index_source(layer)) indexer(b, layer, step, x, qr);
    DEEPINFER_CHECK(!step.selected.empty(), "layer {}: no index source before it published a top-k", layer);
    selected = step.selected;
    entries = &*layout_.layers[static_cast<size_t>(config_.kv_source_of(layer))].compressor;
  }

  TensorView heads = step.ws.f32({T, H, hd});
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));  // head_dim ** -0.5 in Python
  if (backbone) {
    be.sparse_attention_v41(q, kv.reshape({T, hd}), state.window, entries, selected, a.sink.data(), scale, seqs,
                            step.state, heads);
    be.store_window(state.window, kv.reshape({T, hd}), seqs, step.state);
  } else {  // a DSpark draft block: its ring holds the main model's KV, the block sees all of itself
    be.block_attention_v41(q, kv.reshape({T, hd}), state.window, a.sink.data(), scale, seqs, step.state, heads);
  }
  // V carried the rope (K == V): rotate the output's rope slice back by the query position.
  be.rope(heads, positions, rope, true);
  be.round_bf16(heads);

  // Grouped output projection: wo_a is block-diagonal (dequantised to bf16 by the reference, so no
  // activation quantisation), then wo_b.
  TensorView lowrank = step.ws.f32({T, config_.o_groups * config_.o_lora_rank});
  be.grouped_linear(a.wo_a, config_.o_groups, heads.reshape({T, H * hd}), lowrank);
  be.round_bf16(lowrank);
  project(step, a.wo_b, lowrank, out);
}

void DeepseekV41::compress(const Block& b, int64_t layer, Step& step, TensorView x) const {
  backend::Backend& be = *backend_;
  const Compressor& comp = *b.attn.compressor;
  const kv::LayerStateLayout& state = layout_.layers[static_cast<size_t>(layer)];
  const int64_t T = step.tokens(), hd = config_.head_dim, rate = comp.rate;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const std::span<const backend::SeqSlice> seqs = step.batch.seqs;

  // The entries this step completes (those inside cached blocks are already stored).
  std::vector<backend::EntryRef> done;
  std::vector<int64_t> rows, positions;  // ratio 1: token row of each entry; rope position of each
  for (size_t i = 0; i < seqs.size(); ++i) {
    const backend::SeqSlice& s = seqs[i];
    const int64_t first = std::max(s.start / rate, (s.cached_until + rate - 1) / rate);
    for (int64_t e = first; e < (s.start + s.count) / rate; ++e) {
      done.push_back({static_cast<int32_t>(i), e});
      rows.push_back(s.begin + e * rate - s.start);
      positions.push_back(e * rate);  // an entry takes its group's first position
    }
  }
  if (step.recorded) {
    // A recorded step launches the same work every time: padded to the most entries its sequences
    // can complete ((count - 1) / rate + 1 each), padding entries computing nothing.
    int64_t most = 0;
    for (const backend::SeqSlice& s : seqs) most += (s.count - 1) / rate + 1;
    while (static_cast<int64_t>(done.size()) < most) {
      done.push_back({-1, 0});
      rows.push_back(0);
      positions.push_back(0);
    }
  }
  const auto N = static_cast<int64_t>(done.size());
  TensorView latent = step.ws.f32({N, 1, hd});
  if (rate > 1) {
    // Pooling runs in fp32 (the reference promotes wkv / wgate and x to fp32).
    TensorView ckv = step.ws.f32({T, hd}), gate = step.ws.f32({T, hd});
    be.linear(comp.wkv, x, ckv);
    be.linear(comp.wgate, x, gate);
    be.compress_pool(*state.compressor, ckv, gate, done, seqs, step.state, latent.reshape({N, hd}));
  } else {
    TensorView proj = step.ws.f32({T, hd});
    project(step, comp.wkv, x, proj);
    if (N > 0) be.gather_rows(proj, rows, latent.reshape({N, hd}));
  }
  if (N == 0) return;
  be.round_bf16(latent);
  be.rms_norm(latent, comp.norm.data(), eps, latent);
  be.round_bf16(latent);
  const backend::RopeFreqs rope = rope_compressed_.freqs();

  // Index keys come from the latent before its rope: bf16 projection, norm, rope, FP4 (E8M0 / 32).
  const Indexer* ix = b.attn.indexer.get();
  if (ix && ix->owns_keys()) {
    const int64_t ihd = config_.index_head_dim;
    TensorView k = step.ws.f32({N, 1, ihd});
    project(step, ix->wk, latent.reshape({N, hd}), k.reshape({N, ihd}));
    be.rms_norm(k, ix->k_norm.data(), eps, k);
    be.round_bf16(k);
    be.rope(k, positions, rope, false);
    be.round_bf16(k);
    be.quantize_dequantize(k, backend::ActQuant::Fp4Ue8m0);
    be.store_entries(*state.indexer, k.reshape({N, ihd}), done, seqs, step.state);
  }
  // The shared compressed KV: rope at the entry's position, FP4 with E4M3 scales per 16.
  be.rope(latent, positions, rope, false);
  be.round_bf16(latent);
  be.quantize_dequantize(latent, backend::ActQuant::Fp4E4m3x16);
  be.store_entries(*state.compressor, latent.reshape({N, hd}), done, seqs, step.state);
}

void DeepseekV41::indexer(const Block& b, int64_t layer, Step& step, TensorView x, TensorView qr) const {
  backend::Backend& be = *backend_;
  const Indexer& ix = *b.attn.indexer;
  const int64_t T = step.tokens(), nh = config_.index_n_heads, ihd = config_.index_head_dim;
  const backend::CompressorLayout& keys = *layout_.layers[static_cast<size_t>(config_.kv_source_of(layer))].indexer;

  TensorView q = step.ws.f32({T, nh, ihd});
  project(step, ix.wq_b, qr, q.reshape({T, nh * ihd}));
  be.rope(q, step.batch.positions, rope_compressed_.freqs(), false);
  be.round_bf16(q);
  be.quantize_dequantize(q, backend::ActQuant::Fp4Ue8m0);
  TensorView head_weights = step.ws.f32({T, nh});
  project(step, ix.weights_proj, x, head_weights);

  backend::IndexerV41Params p;
  p.top_k = config_.index_topk;
  // softmax_scale * n_heads^-0.5 as the reference's Python float, applied in float32
  p.head_weight_scale = static_cast<float>(std::pow(static_cast<double>(ihd), -0.5) *
                                           std::pow(static_cast<double>(nh), -0.5));
  if (layer == config_.candidate_source_layer_id) {
    p.candidates = backend::CandidateRole::Source;
    step.candidates = step.ws.i32({T, config_.candidate_topk_blocks});
  } else if (config_.uses_candidates(layer)) {
    p.candidates = backend::CandidateRole::Filter;
    DEEPINFER_CHECK(!step.candidates.empty(), "layer {}: the candidate source has not run", layer);
  }
  p.candidate_blocks = config_.candidate_topk_blocks;
  p.candidate_block_size = config_.candidate_block_size;
  step.selected = step.ws.i32({T, config_.index_topk});
  be.indexer_select_v41(keys, q, head_weights, p, step.batch.seqs, step.state, step.candidates, step.selected);
}

}  // namespace deepinfer::model::deepseek_v41
