// What `deepinfer inspect` reports about a loaded DeepSeek-V4 model: parameters by component and
// stored dtype, and the bytes of per-sequence state.
#include <fmt/format.h>

#include <map>

#include "model/deepseek_v4/model.h"

namespace deepinfer::model::deepseek_v4 {

namespace {

std::string component_of(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("embed")) return "embedding";
  if (name == "head.weight" || name == "lm_head.weight") return "lm_head";
  if (has("indexer")) return "indexer";
  if (has("compressor")) return "compressor";
  if (has("shared_expert")) return "shared expert";
  if (has("experts")) return "routed experts";
  if (has("gate")) return "router";
  if (has("hc_")) return "mHC mixers";
  if (has("norm")) return "norms";
  if (has("attn")) return "attention";
  return "other";
}

}  // namespace

std::vector<ParameterGroup> DeepseekV4::parameter_summary() const {
  std::map<std::pair<std::string, std::string>, ParameterGroup> groups;
  for (const auto& [name, t] : weights_->checkpoint.tensors()) {
    const bool is_scale = name.ends_with(".scale") || name.ends_with("weight_scale_inv");
    const std::string component = is_scale ? "block scales" : component_of(name);
    // Packed FP4 experts are stored as I8 bytes holding two values each.
    const bool packed = (t.dtype == DType::I8 || t.dtype == DType::U8) && name.find("experts") != std::string::npos;
    const std::string dtype = packed ? "FP4 (packed I8)" : std::string(dtype_name(t.dtype));
    auto& g = groups[{component, dtype}];
    g.component = component;
    g.dtype = dtype;
    g.count += t.numel() * (packed ? 2 : 1);
    g.bytes += static_cast<int64_t>(t.nbytes);
  }
  std::vector<ParameterGroup> out;
  for (auto& [key, g] : groups) out.push_back(g);
  return out;
}

StateFootprint DeepseekV4::state_footprint() const {
  StateFootprint f;
  f.per_token = layout_.bytes_per_token();
  f.fixed = static_cast<double>(layout_.slot_bytes());
  int sliding = 0, csa = 0, hca = 0;
  for (const auto kind : config_.layer_types) {
    if (kind == io::AttentionKind::CSA) ++csa;
    else if (kind == io::AttentionKind::HCA) ++hca;
    else ++sliding;
  }
  f.notes.push_back(fmt::format("{} sliding layer(s): {}-token ring of {}-wide KV", sliding, config_.sliding_window,
                                config_.head_dim));
  if (csa)
    f.notes.push_back(fmt::format("{} CSA layer(s): 1 KV entry ({}) + 1 indexer key ({}) per {} tokens", csa,
                                  config_.head_dim, config_.index_head_dim, config_.compress_rate_csa));
  if (hca)
    f.notes.push_back(
        fmt::format("{} HCA layer(s): 1 KV entry ({}) per {} tokens", hca, config_.head_dim, config_.compress_rate_hca));
  f.notes.push_back(fmt::format("pools hold {}: blocks of {} positions ({} bytes), slots of {} bytes",
                                dtype_name(layout_.dtype), layout_.block_tokens, layout_.block_bytes(),
                                layout_.slot_bytes()));
  return f;
}

}  // namespace deepinfer::model::deepseek_v4
