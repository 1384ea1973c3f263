#include "model/deepseek_v4/state.h"

namespace deepinfer::model::deepseek_v4 {

std::vector<kv::LayerStateSpec> state_specs(const io::ModelConfig& c) {
  std::vector<kv::LayerStateSpec> specs;
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    kv::LayerStateSpec s;
    s.window = c.sliding_window;
    s.head_dim = c.head_dim;
    switch (c.layer_types[i]) {
      case io::AttentionKind::Sliding:
        break;
      case io::AttentionKind::CSA:  // overlapping windows; the indexer's compressor overlaps too
        s.compressor = kv::CompressorSpec{c.compress_rate_csa, c.head_dim, true};
        s.indexer = kv::CompressorSpec{c.compress_rate_csa, c.index_head_dim, true};
        break;
      case io::AttentionKind::HCA:
        s.compressor = kv::CompressorSpec{c.compress_rate_hca, c.head_dim, false};
        break;
    }
    specs.push_back(s);
  }
  return specs;
}

kv::StateLayout state_layout(const io::ModelConfig& config) {
  const auto specs = state_specs(config);
  return kv::plan_layout(specs, kv::choose_block_tokens(specs));
}

kv::StoredFormats released_formats(const io::ModelConfig& config) {
  return {kv::RowEncoding::Fp8WithBf16Rope, kv::RowEncoding::Fp8WithBf16Rope, kv::RowEncoding::Mxfp4,
          config.qk_rope_head_dim};
}

}  // namespace deepinfer::model::deepseek_v4
