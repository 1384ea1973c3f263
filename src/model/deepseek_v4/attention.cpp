// DeepSeek-V4 attention: shared-KV MQA over the sliding window plus, on compressed layers, the
// compressed entries (all completed ones for HCA, the indexer's top-k for CSA), with per-head sinks,
// partial interleaved RoPE undone on the output, and the grouped output projection.
#include <cmath>

#include "core/error.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/step.h"

namespace deepinfer::model::deepseek_v4 {

void DeepseekV4::attention(const Layer& layer, size_t index, Step& step, TensorView x, TensorView out) const {
  backend::Backend& be = *backend_;
  const Attention& a = layer.attn;
  const kv::LayerStateLayout& state = layout_.layers[index];
  const int64_t T = step.batch.num_tokens();
  const int64_t H = config_.num_attention_heads, hd = config_.head_dim, ql = config_.q_lora_rank;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const backend::RopeFreqs rope = (layer.kind == io::AttentionKind::Sliding ? rope_main_ : rope_compress_).freqs();
  const std::span<const int64_t> positions = step.batch.positions;
  const std::span<const backend::SeqSlice> seqs = step.batch.seqs;

  // Queries: low-rank q with its norm (shared with the indexer), then an unweighted norm per head.
  TensorView q_res = step.ws.f32({T, ql}), q = step.ws.f32({T, H, hd});
  be.linear(a.wq_a, x, q_res);
  be.rms_norm(q_res, a.q_norm.data(), eps, q_res);
  be.linear(a.wq_b, q_res, q.reshape({T, H * hd}));
  be.rms_norm(q, nullptr, eps, q);
  be.rope(q, positions, rope, false);

  // The single KV head (K == V).
  TensorView kv = step.ws.f32({T, 1, hd});
  be.linear(a.wkv, x, kv.reshape({T, hd}));
  be.rms_norm(kv, a.kv_norm.data(), eps, kv);
  be.rope(kv, positions, rope, false);

  // Compressed entries: the compressors append every entry whose window completes in this step
  // (visible to the step's later tokens); CSA's indexer then picks each token's top-k.
  TensorView selected;
  const backend::CompressorLayout* entries = nullptr;
  if (a.compressor) {
    const backend::RopeFreqs compress_rope = rope_compress_.freqs();
    auto run_compressor = [&](const Compressor& comp, const backend::CompressorLayout& where) {
      TensorView ckv = step.ws.f32({T, where.width}), cgate = step.ws.f32({T, where.width});
      be.linear(comp.wkv, x, ckv);
      be.linear(comp.wgate, x, cgate);
      be.compress(where, {comp.ape.data(), comp.norm.data(), eps}, compress_rope, ckv, cgate, seqs, step.state);
    };
    if (a.indexer) {
      const Indexer& ix = *a.indexer;
      const int64_t nh = config_.index_n_heads, ihd = config_.index_head_dim;
      run_compressor(ix.compressor, *state.indexer);
      TensorView iq = step.ws.f32({T, nh, ihd}), head_weights = step.ws.f32({T, nh});
      be.linear(ix.wq_b, q_res, iq.reshape({T, nh * ihd}));
      be.rope(iq, positions, compress_rope, false);
      be.linear(ix.weights_proj, x, head_weights);
      selected = step.ws.i32({T, config_.index_topk});
      be.indexer_select(*state.indexer, iq, head_weights, 1.0f / std::sqrt(static_cast<float>(nh)),
                        1.0f / std::sqrt(static_cast<float>(ihd)), config_.index_topk, ties_, seqs, step.state,
                        selected);
    }
    run_compressor(*a.compressor, *state.compressor);
    entries = &*state.compressor;
  }

  TensorView heads = step.ws.f32({T, H, hd});
  be.sparse_attention(q, kv.reshape({T, hd}), state.window, entries, selected, a.sink.data(),
                      1.0f / std::sqrt(static_cast<float>(hd)), seqs, step.state, heads);
  be.store_window(state.window, kv.reshape({T, hd}), seqs, step.state);
  // V carried RoPE (K == V): rotate the output's rope slice back by the query position.
  be.rope(heads, positions, rope, true);

  // Grouped output projection: each group of heads to o_lora_rank (block-diagonal wo_a), then wo_b.
  TensorView lowrank = step.ws.f32({T, config_.o_groups * config_.o_lora_rank});
  be.grouped_linear(a.wo_a, config_.o_groups, heads.reshape({T, H * hd}), lowrank);
  be.linear(a.wo_b, lowrank, out);
}

}  // namespace deepinfer::model::deepseek_v4
