// config.json -> ModelConfig, following transformers' DeepseekV4Config (defaults, legacy keys and
// RoPE standardisation) so a checkpoint reads the same here as it does in the reference.
#include "io/model_config.h"

#include "io/deepseek_v41_config.h"
#include "core/json_excerpt.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/config_reader.h"

namespace deepinfer::io {

namespace {

using json = nlohmann::json;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCSA = "compressed_sparse_attention";
constexpr const char* kHCA = "heavily_compressed_attention";

using Reader = ConfigReader;  // typed reads (io/config_reader.h)

std::vector<std::string> string_list(const Reader& r, const char* key, const std::string& source) {
  const json& v = r.at(key);
  if (!v.is_array()) fail("{}: '{}' must be a list of strings, found {}", source, key, json_excerpt(v));
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) fail("{}: '{}' entries must be strings, found {}", source, key, json_excerpt(e));
    out.push_back(e.get<std::string>());
  }
  return out;
}

AttentionKind attention_kind(const std::string& name, const std::string& source, size_t layer) {
  if (name == kSliding) return AttentionKind::Sliding;
  if (name == kCSA) return AttentionKind::CSA;
  if (name == kHCA) return AttentionKind::HCA;
  fail("{}: layer_types[{}] is '{}' (expected one of {}, {}, {})", source, layer, elide(name), kSliding, kCSA, kHCA);
}

MlpKind mlp_kind(const std::string& name, const std::string& source, size_t layer) {
  if (name == "hash_moe") return MlpKind::HashMoE;
  if (name == "moe") return MlpKind::MoE;
  fail("{}: mlp_layer_types[{}] is '{}' (expected hash_moe or moe)", source, layer, elide(name));
}

// YaRN's default attention factor (0.1 * mscale * ln(factor) + 1, or 1 for factor <= 1).
double yarn_mscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

struct RopeDefaults {
  double theta;
  int64_t max_position_embeddings;
  std::optional<int64_t> top_level_original_max;  // flat form only: a top-level key wins, as in the reference
};

// One standardised rope dict (after transformers' standardize_rope_params) -> RopeParams.
// force_unit_attention_factor: the flat form's compress rope, where V4 pins a missing
// attention_factor to 1.0 (its reference does not scale cos/sin by YaRN's mscale).
RopeParams parse_rope(const json& obj, const std::string& label, const RopeDefaults& defaults, const std::string& source,
                      bool force_unit_attention_factor = false) {
  if (!obj.is_object()) fail("{}: '{}' must be an object, found {}", source, label, json_excerpt(obj));
  const Reader r(obj, source, label + ".");
  RopeParams p;
  p.type = r.string("rope_type", r.string("type", "default"));
  if (p.type != "default" && p.type != "yarn") {
    fail("{}: '{}' rope type '{}' is not supported (supported: default, yarn)", source, label, elide(p.type));
  }
  p.theta = r.number("rope_theta", defaults.theta);
  if (p.type == "yarn") {
    p.original_max_position_embeddings =
        defaults.top_level_original_max.value_or(r.integer("original_max_position_embeddings", defaults.max_position_embeddings));
    if (p.original_max_position_embeddings <= 0) {
      fail("{}: '{}original_max_position_embeddings' must be positive, found {}", source, label + ".",
           p.original_max_position_embeddings);
    }
    // A null/missing factor means "max_position_embeddings / original_max_position_embeddings".
    p.factor = r.number("factor", static_cast<double>(defaults.max_position_embeddings) /
                                      static_cast<double>(p.original_max_position_embeddings));
    // The reference uses `x or default`, so 0 also falls back.
    p.beta_fast = r.number("beta_fast", 0.0);
    if (p.beta_fast == 0.0) p.beta_fast = 32.0;
    p.beta_slow = r.number("beta_slow", 0.0);
    if (p.beta_slow == 0.0) p.beta_slow = 1.0;
    // Resolved here exactly as _compute_yarn_parameters would, so consumers never re-derive it.
    if (r.has("attention_factor")) {
      p.attention_factor = r.number("attention_factor", 1.0);
    } else if (force_unit_attention_factor) {
      p.attention_factor = 1.0;
    } else {
      const double mscale = r.number("mscale", 0.0), mscale_all_dim = r.number("mscale_all_dim", 0.0);
      p.attention_factor = (mscale != 0.0 && mscale_all_dim != 0.0)
                               ? yarn_mscale(p.factor, mscale) / yarn_mscale(p.factor, mscale_all_dim)
                               : yarn_mscale(p.factor, 1.0);
    }
    // The reference reads `truncate` from the top-level rope dict, which for V4 is always the
    // {main, compress} pair and never has the key, so truncation is always on.
    p.truncate = true;
  }
  return p;
}

// int(head_dim * partial_rotary_factor), as the reference computes it; the factor must be in (0, 1].
int64_t rotary_dims(int64_t head_dim, double factor, const std::string& name, const std::string& source) {
  if (!(factor > 0.0 && factor <= 1.0)) fail("{}: '{}' must be in (0, 1], found {}", source, name, factor);
  return static_cast<int64_t>(static_cast<double>(head_dim) * factor);
}

// Rotary width a rope dict asks for; V4 uses one width for main and compress ropes.
void check_rope_width(const json& obj, const std::string& label, int64_t head_dim, int64_t rope_dim,
                      const std::string& source) {
  if (!obj.contains("partial_rotary_factor") || obj["partial_rotary_factor"].is_null()) return;
  const json& v = obj["partial_rotary_factor"];
  if (!v.is_number()) fail("{}: '{}.partial_rotary_factor' must be a number, found {}", source, label, json_excerpt(v));
  const auto dims = rotary_dims(head_dim, v.get<double>(), label + ".partial_rotary_factor", source);
  if (dims != rope_dim) {
    fail("{}: '{}.partial_rotary_factor' {} gives {} rotary dims but the model uses {} (qk_rope_head_dim); "
         "different widths per rope are not supported",
         source, label, v.get<double>(), dims, rope_dim);
  }
}

void parse_rope_section(const json& root, const Reader& r, ModelConfig& c, const std::string& source) {
  const double rope_theta = r.number("rope_theta", 10000.0);
  const double compress_rope_theta = r.number("compress_rope_theta", 160000.0);
  // `rope_scaling` (legacy name) takes priority over `rope_parameters`, as in the reference.
  json rp = json::object();
  const char* rp_key = "rope_parameters";
  if (r.has("rope_scaling") && !(root["rope_scaling"].is_object() && root["rope_scaling"].empty())) {
    rp = root["rope_scaling"];
    rp_key = "rope_scaling";
  } else if (r.has("rope_parameters")) {
    rp = root["rope_parameters"];
  }
  if (!rp.is_object()) fail("{}: '{}' must be an object, found {}", source, rp_key, json_excerpt(rp));

  if (rp.contains("main") && rp["main"].is_object() && rp.contains("compress") && rp["compress"].is_object()) {
    // Nested form: each sub-dict stands alone; a missing rope_theta falls back to the top-level
    // rope_theta for both (standardize_rope_params), and a missing attention_factor is YaRN's
    // mscale (0.1 ln(factor) + 1), not 1.0: the reference only pins it for the flat form.
    const RopeDefaults defaults{rope_theta, c.max_position_embeddings, std::nullopt};
    c.rope_main = parse_rope(rp["main"], std::string(rp_key) + ".main", defaults, source);
    c.rope_compress = parse_rope(rp["compress"], std::string(rp_key) + ".compress", defaults, source);
    check_rope_width(rp["main"], std::string(rp_key) + ".main", c.head_dim, c.qk_rope_head_dim, source);
    check_rope_width(rp["compress"], std::string(rp_key) + ".compress", c.head_dim, c.qk_rope_head_dim, source);
    return;
  }
  if (rp.contains("main") || rp.contains("compress")) {
    fail("{}: '{}' must have both 'main' and 'compress' objects, or be a single flat rope dict", source, rp_key);
  }
  // Flat form: the YaRN keys configure the compress rope only; sliding layers get plain RoPE.
  c.rope_main = RopeParams{};
  c.rope_main.theta = rope_theta;
  json compress = rp;
  compress["rope_theta"] = compress_rope_theta;
  const std::optional<int64_t> top_original = r.optional_integer("original_max_position_embeddings");
  c.rope_compress = parse_rope(compress, rp_key, RopeDefaults{compress_rope_theta, c.max_position_embeddings, top_original},
                               source, /*force_unit_attention_factor=*/true);
}

void parse_layer_schedules(const json& root, const Reader& r, ModelConfig& c, const std::string& source) {
  const int64_t n = c.num_hidden_layers;
  // Bounded before the per-layer lists are built from it (a corrupt value must not exhaust memory).
  constexpr int64_t kMaxLayers = 100000;
  if (n <= 0 || n > kMaxLayers) fail("{}: num_hidden_layers must be in [1, {}], found {}", source, kMaxLayers, n);

  // compress_rates dict, then the legacy scalar overrides.
  if (r.has("compress_rates")) {
    const json& rates = root["compress_rates"];
    if (!rates.is_object()) fail("{}: 'compress_rates' must be an object, found {}", source, json_excerpt(rates));
    const Reader rr(rates, source, "compress_rates.");
    c.compress_rate_csa = rr.integer(kCSA, 4);
    c.compress_rate_hca = rr.integer(kHCA, 128);
  }
  c.compress_rate_csa = r.integer("compress_rate_csa", c.compress_rate_csa);
  c.compress_rate_hca = r.integer("compress_rate_hca", c.compress_rate_hca);

  // layer_types: explicit > legacy per-layer compress_ratios > 2x HCA then CSA/HCA interleave.
  c.layer_types.clear();
  if (r.has("layer_types")) {
    const auto names = string_list(r, "layer_types", source);
    for (size_t i = 0; i < names.size(); ++i) c.layer_types.push_back(attention_kind(names[i], source, i));
  } else if (r.has("compress_ratios")) {
    const json& ratios = root["compress_ratios"];
    if (!ratios.is_array()) fail("{}: 'compress_ratios' must be a list of integers, found {}", source, json_excerpt(ratios));
    for (size_t i = 0; i < ratios.size(); ++i) {
      const int64_t ratio = r.as_integer(ratios[i], "compress_ratios[" + std::to_string(i) + "]");
      if (ratio == 0) c.layer_types.push_back(AttentionKind::Sliding);
      else if (ratio == c.compress_rate_csa) c.layer_types.push_back(AttentionKind::CSA);
      else if (ratio == c.compress_rate_hca) c.layer_types.push_back(AttentionKind::HCA);
      else {
        fail("{}: compress_ratios[{}] is {} (expected 0, {} for CSA or {} for HCA)", source, i, ratio,
             c.compress_rate_csa, c.compress_rate_hca);
      }
    }
    // Released checkpoints list the MTP layers too; only the first num_hidden_layers are decoder layers.
    if (static_cast<int64_t>(c.layer_types.size()) > n) c.layer_types.resize(static_cast<size_t>(n));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      c.layer_types.push_back(i < 2 ? AttentionKind::HCA : ((i - 2) % 2 ? AttentionKind::CSA : AttentionKind::HCA));
    }
  }

  // mlp_layer_types: explicit > first num_hash_layers (default 3) hash_moe, the rest moe.
  c.mlp_layer_types.clear();
  if (r.has("mlp_layer_types")) {
    const auto names = string_list(r, "mlp_layer_types", source);
    for (size_t i = 0; i < names.size(); ++i) c.mlp_layer_types.push_back(mlp_kind(names[i], source, i));
  } else {
    const int64_t n_hash = r.integer("num_hash_layers", 3);
    if (n_hash < 0) fail("{}: num_hash_layers must be >= 0, found {}", source, n_hash);
    for (int64_t i = 0; i < n; ++i) c.mlp_layer_types.push_back(i < n_hash ? MlpKind::HashMoE : MlpKind::MoE);
  }
}

void parse_token_ids(const json& root, const Reader& r, ModelConfig& c, const std::string& source) {
  c.bos_token_id = root.contains("bos_token_id") ? r.optional_integer("bos_token_id") : std::optional<int64_t>(0);
  c.pad_token_id = r.optional_integer("pad_token_id");
  c.eos_token_ids.clear();
  if (!root.contains("eos_token_id")) {
    c.eos_token_ids = {1};
  } else if (root["eos_token_id"].is_array()) {
    for (size_t i = 0; i < root["eos_token_id"].size(); ++i) {
      c.eos_token_ids.push_back(r.as_integer(root["eos_token_id"][i], "eos_token_id[" + std::to_string(i) + "]"));
    }
  } else if (!root["eos_token_id"].is_null()) {
    c.eos_token_ids.push_back(r.as_integer(root["eos_token_id"], "eos_token_id"));
  }
}

void parse_quantization(const json& root, ModelConfig& c, const std::string& source) {
  if (!root.contains("quantization_config") || root["quantization_config"].is_null()) return;
  const json& q = root["quantization_config"];
  if (!q.is_object()) fail("{}: 'quantization_config' must be an object, found {}", source, json_excerpt(q));
  const Reader r(q, source, "quantization_config.");
  c.quant_method = r.string("quant_method", "");
  if (r.has("weight_block_size")) {
    const json& b = q["weight_block_size"];
    if (!b.is_array()) fail("{}: 'quantization_config.weight_block_size' must be a list, found {}", source, json_excerpt(b));
    for (size_t i = 0; i < b.size(); ++i) {
      c.weight_block_size.push_back(r.as_integer(b[i], "quantization_config.weight_block_size[" + std::to_string(i) + "]"));
    }
  }
}

void check_config(const ModelConfig& c, const std::string& source) {
  auto positive = [&](const char* name, int64_t v) {
    if (v <= 0) fail("{}: {} must be positive, found {}", source, name, v);
  };
  const int64_t n = c.num_hidden_layers;
  positive("num_hidden_layers", n);
  if (static_cast<int64_t>(c.layer_types.size()) != n) {
    fail("{}: num_hidden_layers is {} but layer_types has {} entries", source, n, c.layer_types.size());
  }
  if (static_cast<int64_t>(c.mlp_layer_types.size()) != n) {
    fail("{}: num_hidden_layers is {} but mlp_layer_types has {} entries", source, n, c.mlp_layer_types.size());
  }
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("moe_intermediate_size", c.moe_intermediate_size);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  positive("head_dim", c.head_dim);
  positive("qk_rope_head_dim", c.qk_rope_head_dim);
  positive("q_lora_rank", c.q_lora_rank);
  positive("o_groups", c.o_groups);
  positive("o_lora_rank", c.o_lora_rank);
  positive("n_routed_experts", c.n_routed_experts);
  positive("num_experts_per_tok", c.num_experts_per_tok);
  positive("max_position_embeddings", c.max_position_embeddings);
  positive("sliding_window", c.sliding_window);
  positive("hc_mult", c.hc_mult);
  positive("compress_rate_csa", c.compress_rate_csa);
  positive("compress_rate_hca", c.compress_rate_hca);
  if (c.n_shared_experts < 0) fail("{}: n_shared_experts must be >= 0, found {}", source, c.n_shared_experts);
  if (c.hc_sinkhorn_iters < 0) fail("{}: hc_sinkhorn_iters must be >= 0, found {}", source, c.hc_sinkhorn_iters);
  if (c.num_nextn_predict_layers < 0) {
    fail("{}: num_nextn_predict_layers must be >= 0, found {}", source, c.num_nextn_predict_layers);
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim must be even, found {}", source, c.head_dim);
  if (c.qk_rope_head_dim % 2 != 0) fail("{}: rotary dims (qk_rope_head_dim) must be even, found {}", source, c.qk_rope_head_dim);
  if (c.qk_rope_head_dim > c.head_dim) {
    fail("{}: rotary dims (qk_rope_head_dim) {} exceed head_dim {}", source, c.qk_rope_head_dim, c.head_dim);
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("{}: num_attention_heads {} is not divisible by num_key_value_heads {}", source, c.num_attention_heads,
         c.num_key_value_heads);
  }
  if (c.num_attention_heads % c.o_groups != 0) {
    fail("{}: num_attention_heads {} is not divisible by o_groups {}", source, c.num_attention_heads, c.o_groups);
  }
  if (c.num_experts_per_tok > c.n_routed_experts) {
    fail("{}: num_experts_per_tok {} exceeds n_routed_experts {}", source, c.num_experts_per_tok, c.n_routed_experts);
  }
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "softmax" && c.scoring_func != "sigmoid") {
    fail("{}: scoring_func '{}' is not supported (supported: sqrtsoftplus, softmax, sigmoid)", source, elide(c.scoring_func));
  }
  if (c.hidden_act != "silu") fail("{}: hidden_act '{}' is not supported (supported: silu)", source, elide(c.hidden_act));
  auto positive_real = [&](const char* name, double v) {
    if (!(v > 0.0) || !std::isfinite(v)) fail("{}: {} must be a positive number, found {}", source, name, v);
  };
  positive_real("rms_norm_eps", c.rms_norm_eps);
  positive_real("hc_eps", c.hc_eps);
  positive_real("swiglu_limit", c.swiglu_limit);
  positive_real("routed_scaling_factor", c.routed_scaling_factor);
  for (const auto* rope : {&c.rope_main, &c.rope_compress}) {
    const char* which = rope == &c.rope_main ? "main" : "compress";
    if (!(rope->theta > 0.0)) fail("{}: {} rope_theta must be positive, found {}", source, which, rope->theta);
    if (rope->type == "yarn") {
      if (!(rope->factor > 0.0)) fail("{}: {} rope YaRN factor must be positive, found {}", source, which, rope->factor);
      if (rope->original_max_position_embeddings <= 0) {
        fail("{}: {} rope original_max_position_embeddings must be positive, found {}", source, which,
             rope->original_max_position_embeddings);
      }
    }
  }
  bool any_csa = false;
  for (AttentionKind k : c.layer_types) any_csa |= k == AttentionKind::CSA;
  if (any_csa) {  // only CSA layers carry the lightning indexer
    positive("index_n_heads", c.index_n_heads);
    positive("index_head_dim", c.index_head_dim);
    positive("index_topk", c.index_topk);
    if (c.index_head_dim < c.qk_rope_head_dim) {
      fail("{}: index_head_dim {} is smaller than the rotary dims {}", source, c.index_head_dim, c.qk_rope_head_dim);
    }
  }
  auto token_in_vocab = [&](const char* name, int64_t id) {
    if (id < 0 || id >= c.vocab_size) fail("{}: {} {} is outside the vocabulary [0, {})", source, name, id, c.vocab_size);
  };
  if (c.bos_token_id) token_in_vocab("bos_token_id", *c.bos_token_id);
  if (c.pad_token_id) token_in_vocab("pad_token_id", *c.pad_token_id);
  for (int64_t id : c.eos_token_ids) token_in_vocab("eos_token_id", id);
  if (!c.weight_block_size.empty()) {
    if (c.weight_block_size.size() != 2 || c.weight_block_size[0] <= 0 || c.weight_block_size[1] <= 0) {
      fail("{}: quantization_config.weight_block_size must be two positive integers, found {} entries", source,
           c.weight_block_size.size());
    }
  }
}

}  // namespace

int64_t ModelConfig::compress_rate(size_t layer) const {
  if (layer >= layer_types.size()) fail("compress_rate: layer {} is out of range (model has {} layers)", layer, layer_types.size());
  switch (layer_types[layer]) {
    case AttentionKind::Sliding: return 0;
    case AttentionKind::CSA: return compress_rate_csa;
    case AttentionKind::HCA: return compress_rate_hca;
  }
  return 0;
}

void ModelConfig::validate() const { check_config(*this, "config.json"); }

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", source, e.what());
  }
  if (!root.is_object()) fail("{}: expected a JSON object, found {}", source, root.type_name());
  const Reader r(root, source);

  ModelConfig c;
  c.model_type = r.string("model_type", "");
  if (c.model_type.empty()) fail("{}: no 'model_type' (supported: deepseek_v4)", source);
  if (c.model_type == "deepseek_v41") {
    fail("{}: model_type 'deepseek_v41' is a DeepSeek-V4.1 config (read it with parse_deepseek_v41_config)", source);
  }
  if (c.model_type != "deepseek_v4") fail("{}: model_type '{}' is not supported (supported: deepseek_v4)", source, elide(c.model_type));

  // Defaults are DeepseekV4Config's (the V4-Flash shapes).
  c.vocab_size = r.integer("vocab_size", 129280);
  c.hidden_size = r.integer("hidden_size", 4096);
  c.moe_intermediate_size = r.integer("moe_intermediate_size", 2048);
  c.num_hidden_layers = r.integer("num_hidden_layers", 43);
  c.num_attention_heads = r.integer("num_attention_heads", 64);
  c.num_key_value_heads = r.integer("num_key_value_heads", 1);
  c.head_dim = r.integer("head_dim", 512);
  c.q_lora_rank = r.integer("q_lora_rank", 1024);
  c.num_experts_per_tok = r.integer("num_experts_per_tok", 6);
  c.n_routed_experts = r.integer("n_routed_experts", 256);
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.scoring_func = r.string("scoring_func", "sqrtsoftplus");
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.5);
  c.max_position_embeddings = r.integer("max_position_embeddings", 1048576);
  c.hc_mult = r.integer("hc_mult", 4);
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters", 20);
  c.hc_eps = r.number("hc_eps", 1e-6);
  c.swiglu_limit = r.number("swiglu_limit", 10.0);
  c.sliding_window = r.integer("sliding_window", 128);
  c.o_groups = r.integer("o_groups", 8);
  c.o_lora_rank = r.integer("o_lora_rank", 1024);
  c.index_n_heads = r.integer("index_n_heads", 64);
  c.index_head_dim = r.integer("index_head_dim", 128);
  c.index_topk = r.integer("index_topk", 512);
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 1);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.hidden_act = r.string("hidden_act", "silu");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);

  // Rotary width: partial_rotary_factor > legacy qk_rope_head_dim > 64/512 of head_dim.
  if (r.has("partial_rotary_factor")) {
    c.qk_rope_head_dim = rotary_dims(c.head_dim, r.number("partial_rotary_factor", 0.0), "partial_rotary_factor", source);
  } else if (r.has("qk_rope_head_dim")) {
    c.qk_rope_head_dim = r.integer("qk_rope_head_dim", 0);
  } else {
    c.qk_rope_head_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * (64.0 / 512.0));
  }

  parse_layer_schedules(root, r, c, source);
  parse_rope_section(root, r, c, source);
  parse_token_ids(root, r, c, source);
  parse_quantization(root, c, source);
  check_config(c, source);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  // A V4.1 folder reads through its own parser; callers get the fields every CausalLM shares.
  if (auto v41 = load_deepseek_v41_config_if_v41(model_dir)) return common_model_config(*v41);
  return parse_model_config(require_config_text(model_dir), (model_dir / "config.json").string());
}

}  // namespace deepinfer::io
