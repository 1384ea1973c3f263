#include "model/deepseek_v41/state.h"

#include <algorithm>

namespace deepinfer::model::deepseek_v41 {

std::vector<kv::LayerStateSpec> state_specs(const io::DeepseekV41Config& c) {
  std::vector<kv::LayerStateSpec> specs;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    kv::LayerStateSpec s;
    s.window = c.sliding_window;
    s.head_dim = c.head_dim;
    if (c.is_kv_source(l)) {  // no overlapping windows in V4.1
      const int64_t rate = c.compress_ratio(l);
      s.compressor = kv::CompressorSpec{rate, c.head_dim, false};
      s.indexer = kv::CompressorSpec{rate, c.index_head_dim, false};
    }
    specs.push_back(s);
  }
  for (int64_t stage = 0; stage < c.dspark.stages; ++stage) specs.push_back({c.sliding_window, c.head_dim, {}, {}});
  return specs;
}

kv::StateLayout state_layout(const io::DeepseekV41Config& config) {
  const auto specs = state_specs(config);
  return kv::plan_layout(specs, kv::choose_block_tokens(specs));
}

kv::StateLayout forward_layout(const io::DeepseekV41Config& config) {
  auto specs = state_specs(config);
  if (config.engram.enabled()) specs.push_back({std::max<int64_t>(1, config.engram.max_ngram_size - 1), 1, {}, {}});
  return kv::plan_layout(specs, kv::choose_block_tokens(specs));
}

kv::StoredFormats released_formats(const io::DeepseekV41Config& config) {
  return {kv::RowEncoding::Mxfp8, kv::RowEncoding::Nvfp4, kv::RowEncoding::Mxfp4, config.qk_rope_head_dim};
}

}  // namespace deepinfer::model::deepseek_v41
