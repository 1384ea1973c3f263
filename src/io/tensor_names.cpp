#include "io/tensor_names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <utility>

#include "core/error.h"

namespace deepinfer::io {

namespace {

// Released sub-layer names -> transformers module paths (inside "model.layers.N.").
constexpr std::array<std::pair<std::string_view, std::string_view>, 35> kLayerRenames = {{
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.wkv", "self_attn.compressor.indexer.kv_proj"},
    {"attn.indexer.compressor.wgate", "self_attn.compressor.indexer.gate_proj"},
    {"attn.indexer.compressor.norm", "self_attn.compressor.indexer.kv_norm"},
    {"attn.indexer.wq_b", "self_attn.compressor.indexer.q_b_proj"},
    {"attn.indexer.weights_proj", "self_attn.compressor.indexer.scorer.weights_proj"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.wkv", "self_attn.compressor.kv_proj"},
    {"attn.compressor.wgate", "self_attn.compressor.gate_proj"},
    {"attn.compressor.norm", "self_attn.compressor.kv_norm"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.wq_a", "self_attn.q_a_proj"},
    {"attn.wq_b", "self_attn.q_b_proj"},
    {"attn.q_norm", "self_attn.q_a_norm"},
    {"attn.wkv", "self_attn.kv_proj"},
    {"attn.kv_norm", "self_attn.kv_norm"},
    {"attn.wo_a", "self_attn.o_a_proj"},
    {"attn.wo_b", "self_attn.o_b_proj"},
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.shared_experts.w1", "mlp.shared_experts.gate_proj"},
    {"ffn.shared_experts.w3", "mlp.shared_experts.up_proj"},
    {"ffn.shared_experts.w2", "mlp.shared_experts.down_proj"},
    // Routed experts are fused in memory (gate_up_proj / down_proj); the model handles those.
    {"ffn.experts", "mlp.experts"},
    {"embed", "embed_tokens"},
    {"head", "lm_head"},
}};

// Top-level released names -> (transformers 5 on-disk name, in-memory name).
struct TopLevelName {
  std::string_view released, on_disk, in_memory;
};
constexpr std::array<TopLevelName, 6> kTopLevel = {{
    {"embed.weight", "model.embed_tokens.weight", "model.embed_tokens.weight"},
    {"head.weight", "head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight", "model.norm.weight"},
    {"hc_head_fn", "model.hc_head.hc_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base", "model.hc_head.hc_base"},
    {"hc_head_scale", "model.hc_head.hc_scale", "model.hc_head.hc_scale"},
}};

void add_unique(std::vector<std::string>& v, std::string s) {
  for (auto& e : v)
    if (e == s) return;
  v.push_back(std::move(s));
}

}  // namespace

std::vector<std::string> tensor_name_aliases(std::string_view released) {
  std::vector<std::string> out{std::string(released)};
  for (const auto& t : kTopLevel) {
    if (released == t.released) {
      add_unique(out, std::string(t.on_disk));
      add_unique(out, std::string(t.in_memory));
      return out;
    }
  }
  add_unique(out, "model." + std::string(released));
  // transformers 5 writes the KV norm as "attn.norm" (it reverses its rename on save).
  const std::string_view kv_norm = "attn.kv_norm";
  if (auto p = released.find(kv_norm); p != std::string_view::npos && released.starts_with("layers.")) {
    std::string alt(released);
    alt.replace(p, kv_norm.size(), "attn.norm");
    add_unique(out, "model." + alt);
    add_unique(out, alt);
  }
  if (released.starts_with("layers.")) {
    const size_t dot = released.find('.', 7);
    if (dot != std::string_view::npos) {
      const std::string_view prefix = released.substr(0, dot + 1);  // "layers.N."
      const std::string_view rest = released.substr(dot + 1);
      for (const auto& [native, hf] : kLayerRenames) {
        if (rest == native || (rest.starts_with(native) && rest[native.size()] == '.')) {
          add_unique(out, fmt::format("model.{}{}{}", prefix, hf, rest.substr(native.size())));
          break;
        }
      }
    }
  }
  return out;
}

const TensorView* TensorResolver::find(std::string_view released_name) {
  for (const auto& name : tensor_name_aliases(released_name)) {
    if (checkpoint_.contains(name)) {
      used_.insert(name);
      return &checkpoint_.get(name);
    }
  }
  return nullptr;
}

const TensorView* TensorResolver::optional(std::string_view released_name) { return find(released_name); }

const TensorView* TensorResolver::require(std::string_view released_name, std::vector<int64_t> expected_shape) {
  const TensorView* t = find(released_name);
  if (!t) {
    missing_.emplace_back(released_name);
    return nullptr;
  }
  if (!expected_shape.empty() && t->shape != expected_shape) {
    misshaped_.push_back(fmt::format("{} is {} but the config implies [{}]", t->name, t->shape_string(),
                                     fmt::join(expected_shape, ", ")));
    return nullptr;
  }
  return t;
}

void TensorResolver::finish(const std::vector<std::string>& ignored_prefixes) const {
  std::vector<std::string> unexpected;
  for (const auto& [name, view] : checkpoint_.tensors()) {
    if (used_.count(name)) continue;
    bool ignored = false;
    for (const auto& p : ignored_prefixes) ignored = ignored || name.starts_with(p);
    if (!ignored) unexpected.push_back(name);
  }
  if (missing_.empty() && misshaped_.empty() && unexpected.empty()) return;
  auto list = [](const std::vector<std::string>& v) {
    constexpr size_t kShown = 8;
    std::string s;
    for (size_t i = 0; i < v.size() && i < kShown; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > kShown) s += fmt::format(", ... ({} more)", v.size() - kShown);
    return s;
  };
  std::string msg = "checkpoint does not match config.json:";
  if (!missing_.empty()) msg += fmt::format(" {} missing tensor(s): {};", missing_.size(), list(missing_));
  if (!misshaped_.empty()) msg += fmt::format(" {} mis-shaped: {};", misshaped_.size(), list(misshaped_));
  if (!unexpected.empty()) msg += fmt::format(" {} unexpected tensor(s): {};", unexpected.size(), list(unexpected));
  msg.pop_back();
  fail("{}", msg);
}

}  // namespace deepinfer::io
