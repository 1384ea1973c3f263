// What `deepinfer inspect` reports about a loaded DeepSeek-V4.1 model: parameters by component (from
// the released tensor table) and the bytes of per-sequence state the forward's pools hold.
#include <fmt/format.h>

#include <map>

#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/tensors.h"

namespace deepinfer::model::deepseek_v41 {

std::vector<ParameterGroup> DeepseekV41::parameter_summary() const {
  std::map<std::pair<std::string, std::string>, ParameterGroup> groups;
  for (const TensorSpec& t : checkpoint_tensors(config_)) {
    const std::string dtype = t.dtype == DType::I8 ? "FP4 (packed I8)" : std::string(dtype_name(t.dtype));
    auto& g = groups[{t.component, dtype}];
    g.component = t.component;
    g.dtype = dtype;
    g.count += t.parameters();
    g.bytes += t.bytes();
  }
  std::vector<ParameterGroup> out;
  for (auto& [key, g] : groups) out.push_back(g);
  return out;
}

StateFootprint DeepseekV41::state_footprint() const {
  StateFootprint f;
  f.per_token = layout_.bytes_per_token();
  f.fixed = static_cast<double>(layout_.slot_bytes());
  int sources = 0;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) sources += config_.is_kv_source(l);
  f.notes.push_back(fmt::format("{} layer(s) + {} DSpark stage(s): {}-token ring of {}-wide KV",
                                config_.num_hidden_layers, config_.dspark.stages, config_.sliding_window,
                                config_.head_dim));
  f.notes.push_back(fmt::format("{} kv source(s): shared compressed KV ({}) + index keys ({}) per entry", sources,
                                config_.head_dim, config_.index_head_dim));
  f.notes.push_back(fmt::format("pools hold {}: blocks of {} positions ({} bytes), slots of {} bytes",
                                dtype_name(layout_.dtype), layout_.block_tokens, layout_.block_bytes(),
                                layout_.slot_bytes()));
  return f;
}

}  // namespace deepinfer::model::deepseek_v41
