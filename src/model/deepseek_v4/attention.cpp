// DeepSeek-V4 attention: shared-KV MQA over the sliding window plus, on compressed layers, the
// compressed entries (all completed ones for HCA, the indexer's top-k for CSA), with per-head sinks,
// partial interleaved RoPE undone on the output, and the grouped output projection.
#include <array>
#include <cmath>
#include <span>

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

  // Every projection of x at once (the backend may run the siblings of a weight format as one
  // launch): the queries' low rank, the single KV head (K == V), and on compressed layers the
  // compressors' kv / gate and the indexer's head weights.
  TensorView q_res = step.ws.f32({T, ql}), kv = step.ws.f32({T, 1, hd});
  // (A fixed array: no allocation a layer a step; 7 on CSA layers.)
  std::array<backend::LinearOut, 7> of_x{{{&a.wq_a, q_res}, {&a.wkv, kv.reshape({T, hd})}}};
  size_t n_of_x = 2;
  struct CompressorInput {
    TensorView kv, gate;
  };
  auto compressor_input = [&](const Compressor& comp, const backend::CompressorLayout& where) {
    const CompressorInput in{step.ws.f32({T, where.width}), step.ws.f32({T, where.width})};
    of_x[n_of_x++] = {&comp.wkv, in.kv};
    of_x[n_of_x++] = {&comp.wgate, in.gate};
    return in;
  };
  CompressorInput main_input, index_input;
  TensorView head_weights;
  const int64_t nh = config_.index_n_heads, ihd = config_.index_head_dim;
  if (a.indexer) {
    index_input = compressor_input(a.indexer->compressor, *state.indexer);
    head_weights = step.ws.f32({T, nh});
    of_x[n_of_x++] = {&a.indexer->weights_proj, head_weights};
  }
  if (a.compressor) main_input = compressor_input(*a.compressor, *state.compressor);
  be.linears(x, std::span(of_x.data(), n_of_x));

  // Queries: the low rank's norm (q_res, shared with the indexer), then wq_b and an unweighted norm
  // per head; the indexer's queries from the same q_res.
  TensorView q = step.ws.f32({T, H, hd}), iq;
  be.rms_norm(q_res, a.q_norm.data(), eps, q_res);
  if (a.indexer) {
    iq = step.ws.f32({T, nh, ihd});
    const backend::LinearOut of_q[] = {{&a.wq_b, q.reshape({T, H * hd})}, {&a.indexer->wq_b, iq.reshape({T, nh * ihd})}};
    be.linears(q_res, of_q);
  } else {
    be.linear(a.wq_b, q_res, q.reshape({T, H * hd}));
  }
  be.rms_norm(q, nullptr, eps, q);
  be.rope(q, positions, rope, false);

  be.rms_norm(kv, a.kv_norm.data(), eps, kv);
  be.rope(kv, positions, rope, false);

  // Compressed entries: the compressors append every entry whose window completes in this step
  // (visible to the step's later tokens); CSA's indexer then picks each token's top-k.
  TensorView selected;
  const backend::CompressorLayout* entries = nullptr;
  if (a.compressor) {
    const backend::RopeFreqs compress_rope = rope_compress_.freqs();
    auto compress = [&](const Compressor& comp, const backend::CompressorLayout& where, const CompressorInput& in) {
      be.compress(where, {comp.ape.data(), comp.norm.data(), eps}, compress_rope, in.kv, in.gate, seqs, step.state);
    };
    if (a.indexer) {
      compress(a.indexer->compressor, *state.indexer, index_input);
      be.rope(iq, positions, compress_rope, false);
      selected = step.ws.i32({T, config_.index_topk});
      be.indexer_select(*state.indexer, iq, head_weights, 1.0f / std::sqrt(static_cast<float>(nh)),
                        1.0f / std::sqrt(static_cast<float>(ihd)), config_.index_topk, ties_, seqs, step.state,
                        selected);
    }
    compress(*a.compressor, *state.compressor, main_input);
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
