// config.json -> DeepseekV41Config, following the released HF config (top level + text_config) and
// the reference ModelArgs it maps to; the checks are the reference's structural assumptions (who
// publishes the shared KV, index keys, top-k and candidates that later layers read).
#include "io/deepseek_v41_config.h"
#include "core/json_excerpt.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/config_reader.h"

namespace deepinfer::io {

namespace {

using json = nlohmann::json;

json parse_root(const std::string& text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", source, e.what());
  }
  if (!root.is_object()) fail("{}: expected a JSON object, found {}", source, root.type_name());
  return root;
}

const json& object_at(const json& root, const char* key, const std::string& source, bool required) {
  static const json empty = json::object();
  if (!root.contains(key) || root[key].is_null()) {
    if (required) fail("{}: missing required object '{}'", source, key);
    return empty;
  }
  if (!root[key].is_object()) fail("{}: '{}' must be an object, found {}", source, key, json_excerpt(root[key]));
  return root[key];
}

void parse_top_level(const json& root, const ConfigReader& r, DeepseekV41Config& c) {
  c.bos_token_id = root.contains("bos_token_id") ? r.optional_integer("bos_token_id") : std::optional<int64_t>(0);
  c.pad_token_id = r.optional_integer("pad_token_id");
  c.image_token_id = r.optional_integer("image_token_id");
  if (!root.contains("eos_token_id")) {
    c.eos_token_ids = {1};
  } else if (root["eos_token_id"].is_array()) {
    c.eos_token_ids = r.integer_list("eos_token_id");
  } else if (!root["eos_token_id"].is_null()) {
    c.eos_token_ids.push_back(r.required_integer("eos_token_id"));
  }
  const ConfigReader vision(object_at(root, "vision_config", r.source(), false), r.source(), "vision_config.");
  c.vision_layers = vision.integer("num_hidden_layers", 0);
}

void parse_quantization(const json& root, const std::string& source, V41Quantization& q) {
  const json& obj = object_at(root, "quantization_config", source, false);
  if (obj.empty()) return;
  const ConfigReader r(obj, source, "quantization_config.");
  const std::string method = r.string("quant_method", "");
  if (method != "fp8") fail("{}: quantization_config.quant_method '{}' is not supported (supported: fp8)", source, elide(method));
  q.fp8 = true;
  const std::vector<int64_t> block = r.integer_list("weight_block_size", /*required=*/true);
  if (block.size() != 2) fail("{}: quantization_config.weight_block_size must have 2 entries, found {}", source, block.size());
  q.block_rows = block[0];
  q.block_cols = block[1];
  q.scale_fmt = r.string("scale_fmt", "");
  q.activation_scheme = r.string("activation_scheme", "dynamic");
  const std::string experts = r.string("expert_dtype", "");
  if (!experts.empty() && experts != "fp4") {
    fail("{}: quantization_config.expert_dtype '{}' is not supported (supported: fp4, or absent)", source, elide(experts));
  }
  q.fp4_experts = experts == "fp4";
}

void parse_rope_scaling(const json& text, const ConfigReader& r, DeepseekV41Config& c) {
  c.rope_theta = r.required_number("rope_theta");
  c.compress_rope_theta = r.required_number("compress_rope_theta");
  const json& rs = object_at(text, "rope_scaling", r.source() + ": text_config", false);
  if (rs.empty()) return;  // no YaRN (the reference's original_seq_len 0)
  const ConfigReader s(rs, r.source(), "text_config.rope_scaling.");
  const std::string type = s.string("rope_type", s.string("type", "yarn"));
  if (type != "yarn") fail("{}: text_config.rope_scaling rope_type '{}' is not supported (supported: yarn)", r.source(), elide(type));
  c.rope_factor = s.required_number("factor");
  c.original_max_position_embeddings = s.required_integer("original_max_position_embeddings");
  if (c.original_max_position_embeddings <= 0) {
    fail("{}: text_config.rope_scaling.original_max_position_embeddings must be positive, found {}", r.source(),
         c.original_max_position_embeddings);
  }
  c.beta_fast = s.number("beta_fast", 32.0);
  c.beta_slow = s.number("beta_slow", 1.0);
}

void parse_engram_and_dspark(const ConfigReader& r, DeepseekV41Config& c) {
  V41Engram& e = c.engram;
  e.layer_ids = r.integer_list("engram_layer_ids");
  if (e.enabled()) {
    e.num_embeddings = r.integer_list("engram_num_embeddings", true);
    e.max_ngram_size = r.required_integer("engram_max_ngram_size");
    e.vocab_size = r.required_integer("engram_vocab_size");
    e.n_heads = r.required_integer("engram_n_heads");
    e.head_dim = r.required_integer("engram_head_dim");
    e.pad_token_id = r.integer("engram_pad_token_id", 2);
    e.compressed_vocab_size = r.required_integer("engram_compressed_vocab_size");
  }
  V41DSpark& d = c.dspark;
  d.stages = r.integer("num_nextn_predict_layers", 0);
  if (d.stages > 0) {
    d.block_size = r.required_integer("dspark_block_size");
    d.noise_token_id = r.required_integer("dspark_noise_token_id");
    d.target_layer_ids = r.integer_list("dspark_target_layer_ids", true);
    d.markov_rank = r.required_integer("dspark_markov_rank");
    // The reference falls back to the main MoE's counts when these are absent or 0.
    d.n_routed_experts = r.integer("dspark_n_routed_experts", 0);
    if (d.n_routed_experts == 0) d.n_routed_experts = c.n_routed_experts;
    d.num_experts_per_tok = r.integer("dspark_num_experts_per_tok", 0);
    if (d.num_experts_per_tok == 0) d.num_experts_per_tok = c.num_experts_per_tok;
  }
}

bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (int64_t d = 3; d * d <= n; d += 2)
    if (n % d == 0) return false;
  return true;
}

// A layer list: distinct, ascending, inside [0, n).
void check_layer_list(const std::vector<int64_t>& ids, const char* name, int64_t n, const std::string& source) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n) fail("{}: text_config.{}[{}] = {} is not a layer in [0, {})", source, name, i, ids[i], n);
    if (i > 0 && ids[i] <= ids[i - 1]) fail("{}: text_config.{} must be ascending and distinct, found {} after {}", source, name, ids[i], ids[i - 1]);
  }
}

void check_shapes(const DeepseekV41Config& c, const std::string& source) {
  auto positive = [&](const char* name, int64_t v) {
    if (v <= 0) fail("{}: text_config.{} must be positive, found {}", source, name, v);
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("moe_intermediate_size", c.moe_intermediate_size);
  positive("num_hidden_layers", c.num_hidden_layers);
  positive("num_attention_heads", c.num_attention_heads);
  positive("head_dim", c.head_dim);
  positive("qk_rope_head_dim", c.qk_rope_head_dim);
  positive("q_lora_rank", c.q_lora_rank);
  positive("o_groups", c.o_groups);
  positive("o_lora_rank", c.o_lora_rank);
  positive("n_routed_experts", c.n_routed_experts);
  positive("num_experts_per_tok", c.num_experts_per_tok);
  positive("max_position_embeddings", c.max_position_embeddings);
  positive("sliding_window", c.sliding_window);
  positive("index_n_heads", c.index_n_heads);
  positive("index_head_dim", c.index_head_dim);
  positive("index_topk", c.index_topk);
  positive("hc_mult", c.hc_mult);
  positive("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  auto positive_real = [&](const char* name, double v) {
    if (!(v > 0.0) || !std::isfinite(v)) fail("{}: text_config.{} must be a positive number, found {}", source, name, v);
  };
  positive_real("rms_norm_eps", c.rms_norm_eps);
  positive_real("hc_eps", c.hc_eps);
  positive_real("routed_scaling_factor", c.routed_scaling_factor);
  positive_real("rope_theta", c.rope_theta);
  positive_real("compress_rope_theta", c.compress_rope_theta);
  positive_real("rope_scaling.factor", c.rope_factor);
  if (c.swiglu_limit < 0.0) fail("{}: text_config.swiglu_limit must be >= 0 (0 = no clamp), found {}", source, c.swiglu_limit);
  if (c.n_shared_experts != 1) fail("{}: text_config.n_shared_experts must be 1 (the reference has one shared expert), found {}", source, c.n_shared_experts);
  if (c.num_experts_per_tok > c.n_routed_experts) {
    fail("{}: text_config.num_experts_per_tok {} exceeds n_routed_experts {}", source, c.num_experts_per_tok, c.n_routed_experts);
  }
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "softmax" && c.scoring_func != "sigmoid") {
    fail("{}: text_config.scoring_func '{}' is not supported (supported: sqrtsoftplus, softmax, sigmoid)", source, elide(c.scoring_func));
  }
  if (c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim > c.head_dim || c.qk_rope_head_dim > c.index_head_dim) {
    fail("{}: text_config.qk_rope_head_dim {} must be even and at most head_dim {} and index_head_dim {}", source,
         c.qk_rope_head_dim, c.head_dim, c.index_head_dim);
  }
  // Activations and KV are quantised in groups of 32 along these widths (and 16 for compressed KV).
  for (const auto& [name, v] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"head_dim", c.head_dim}, {"index_head_dim", c.index_head_dim}}) {
    if (v % 32 != 0) fail("{}: text_config.{} must be a multiple of 32 (the quantisation group), found {}", source, name, v);
  }
  if (c.num_attention_heads % c.o_groups != 0) {
    fail("{}: text_config.num_attention_heads {} is not divisible by o_groups {}", source, c.num_attention_heads, c.o_groups);
  }
  if (c.original_max_position_embeddings < 0) {
    fail("{}: text_config.rope_scaling.original_max_position_embeddings must be positive, found {}", source,
         c.original_max_position_embeddings);
  }
}

// Who publishes what the later layers read: the shared compressed KV and index keys (the latest kv
// source), the top-k (the latest index source) and the candidate blocks (the candidate source).
void check_sharing(const DeepseekV41Config& c, const std::string& source) {
  const int64_t n = c.num_hidden_layers;
  const auto stages = c.dspark.stages;
  if (static_cast<int64_t>(c.compress_ratios.size()) != n + stages) {
    fail("{}: text_config.compress_ratios has {} entries, expected num_hidden_layers {} + num_nextn_predict_layers {}",
         source, c.compress_ratios.size(), n, stages);
  }
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    const int64_t r = c.compress_ratios[i];
    if (r < 0) fail("{}: text_config.compress_ratios[{}] must be >= 0, found {}", source, i, r);
    if (static_cast<int64_t>(i) >= n && r != 0) {
      fail("{}: text_config.compress_ratios[{}] (DSpark stage {}) must be 0: draft blocks attend over a window only",
           source, i, static_cast<int64_t>(i) - n);
    }
  }
  check_layer_list(c.kv_source_layer_ids, "kv_source_layer_ids", n, source);
  check_layer_list(c.index_source_layer_ids, "index_source_layer_ids", n, source);
  for (int64_t l : c.kv_source_layer_ids) {
    if (c.compress_ratio(l) == 0) fail("{}: kv source layer {} has compress_ratio 0 (nothing to compress)", source, l);
    if (!c.is_index_source(l)) {
      fail("{}: kv source layer {} is not in index_source_layer_ids (it must publish the index keys later layers read)", source, l);
    }
  }
  int64_t last_index_source = -1;
  for (int64_t l = 0; l < n; ++l) {
    const int64_t r = c.compress_ratio(l);
    if (c.is_index_source(l)) last_index_source = l;
    if (r == 0) {
      if (c.is_index_source(l)) fail("{}: index source layer {} has compress_ratio 0", source, l);
      continue;
    }
    const int64_t kv = c.kv_source_of(l);
    if (kv < 0) fail("{}: layer {} reads compressed KV (ratio {}) but no kv source precedes it", source, l, r);
    if (c.compress_ratio(kv) != r) {
      fail("{}: layer {} reads compressed KV at ratio {} but the kv source it shares (layer {}) compresses at ratio {}",
           source, l, r, kv, c.compress_ratio(kv));
    }
    if (last_index_source < 0 || c.compress_ratio(last_index_source) != r) {
      fail("{}: layer {} (ratio {}) reuses the top-k of the latest index source, which is {} at ratio {}", source, l, r,
           last_index_source, last_index_source < 0 ? 0 : c.compress_ratio(last_index_source));
    }
  }
  if (c.candidate_source_layer_id >= 0) {
    const int64_t cs = c.candidate_source_layer_id;
    if (cs >= n || !c.is_index_source(cs)) {
      fail("{}: text_config.candidate_source_layer_id {} is not an index source layer", source, cs);
    }
    if (c.candidate_topk_blocks <= 0 || c.candidate_block_size <= 0) {
      fail("{}: text_config.candidate_topk_blocks and candidate_block_size must be positive with a candidate source, "
           "found {} and {}", source, c.candidate_topk_blocks, c.candidate_block_size);
    }
    for (int64_t l : c.index_source_layer_ids) {
      if (c.uses_candidates(l) && c.compress_ratio(l) != c.compress_ratio(cs)) {
        fail("{}: index source layer {} (ratio {}) would filter by the candidates of layer {} (ratio {})", source, l,
             c.compress_ratio(l), cs, c.compress_ratio(cs));
      }
    }
  } else if (c.candidate_source_layer_id != -1) {
    fail("{}: text_config.candidate_source_layer_id must be a layer or -1, found {}", source, c.candidate_source_layer_id);
  }
}

void check_engram_and_dspark(const DeepseekV41Config& c, const std::string& source) {
  const V41Engram& e = c.engram;
  if (e.enabled()) {
    check_layer_list(e.layer_ids, "engram_layer_ids", c.num_hidden_layers, source);
    if (e.num_embeddings.size() != e.layer_ids.size()) {
      fail("{}: text_config.engram_num_embeddings has {} entries for {} engram layers", source, e.num_embeddings.size(),
           e.layer_ids.size());
    }
    if (e.max_ngram_size < 2) fail("{}: text_config.engram_max_ngram_size must be >= 2, found {}", source, e.max_ngram_size);
    if (e.vocab_size <= 0 || e.n_heads <= 0 || e.compressed_vocab_size <= 0) {
      fail("{}: text_config.engram_vocab_size, engram_n_heads and engram_compressed_vocab_size must be positive", source);
    }
    if (e.head_dim <= 0 || e.head_dim % 32 != 0) {
      fail("{}: text_config.engram_head_dim must be a positive multiple of 32 (its FP8 row scales), found {}", source, e.head_dim);
    }
    if (e.pad_token_id < 0 || e.pad_token_id >= c.vocab_size) {
      fail("{}: text_config.engram_pad_token_id {} is outside the vocabulary [0, {})", source, e.pad_token_id, c.vocab_size);
    }
    // The tables are the prime bucket ranges laid end to end: the row counts check the prime walk.
    const EngramBuckets buckets = engram_buckets(e);
    for (size_t i = 0; i < e.layer_ids.size(); ++i) {
      int64_t rows = 0;
      for (int64_t p : buckets.primes[i]) rows += p;
      if (rows != e.num_embeddings[i]) {
        fail("{}: text_config.engram_num_embeddings[{}] is {} but the prime buckets of engram layer {} span {} rows",
             source, i, e.num_embeddings[i], e.layer_ids[i], rows);
      }
    }
  }
  const V41DSpark& d = c.dspark;
  if (d.stages < 0) fail("{}: text_config.num_nextn_predict_layers must be >= 0, found {}", source, d.stages);
  if (d.enabled()) {
    if (d.block_size <= 0 || d.markov_rank <= 0) {
      fail("{}: text_config.dspark_block_size and dspark_markov_rank must be positive, found {} and {}", source,
           d.block_size, d.markov_rank);
    }
    if (d.target_layer_ids.empty()) fail("{}: text_config.dspark_target_layer_ids is empty", source);
    check_layer_list(d.target_layer_ids, "dspark_target_layer_ids", c.num_hidden_layers, source);
    if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size) {
      fail("{}: text_config.dspark_noise_token_id {} is outside the vocabulary [0, {})", source, d.noise_token_id, c.vocab_size);
    }
    if (d.num_experts_per_tok <= 0 || d.num_experts_per_tok > d.n_routed_experts) {
      fail("{}: text_config.dspark_num_experts_per_tok {} must be in [1, dspark_n_routed_experts {}]", source,
           d.num_experts_per_tok, d.n_routed_experts);
    }
  }
}

void check_top_level(const DeepseekV41Config& c, const std::string& source) {
  auto in_vocab = [&](const char* name, int64_t id) {
    if (id < 0 || id >= c.vocab_size) fail("{}: {} {} is outside the vocabulary [0, {})", source, name, id, c.vocab_size);
  };
  if (c.bos_token_id) in_vocab("bos_token_id", *c.bos_token_id);
  if (c.pad_token_id) in_vocab("pad_token_id", *c.pad_token_id);
  if (c.image_token_id) in_vocab("image_token_id", *c.image_token_id);
  for (int64_t id : c.eos_token_ids) in_vocab("eos_token_id", id);
  const V41Quantization& q = c.quantization;
  if (q.fp8) {
    // The reference quantises weights and activations in blocks of 32 (fp8_block_size) with
    // power-of-two scales; any other grid would not be the trained model.
    if (q.block_rows != 32 || q.block_cols != 32) {
      fail("{}: quantization_config.weight_block_size must be [32, 32] for DeepSeek-V4.1, found [{}, {}]", source,
           q.block_rows, q.block_cols);
    }
    if (q.scale_fmt != "ue8m0") fail("{}: quantization_config.scale_fmt must be 'ue8m0', found '{}'", source, q.scale_fmt);
    if (q.activation_scheme != "dynamic") {
      fail("{}: quantization_config.activation_scheme must be 'dynamic', found '{}'", source, q.activation_scheme);
    }
  }
}

}  // namespace

int64_t DeepseekV41Config::compress_ratio(int64_t layer) const {
  DEEPINFER_CHECK(layer >= 0 && layer < static_cast<int64_t>(compress_ratios.size()),
                  "compress_ratio: layer {} outside [0, {})", layer, compress_ratios.size());
  return compress_ratios[static_cast<size_t>(layer)];
}

bool DeepseekV41Config::is_kv_source(int64_t layer) const {
  return std::find(kv_source_layer_ids.begin(), kv_source_layer_ids.end(), layer) != kv_source_layer_ids.end();
}

bool DeepseekV41Config::is_index_source(int64_t layer) const {
  return std::find(index_source_layer_ids.begin(), index_source_layer_ids.end(), layer) != index_source_layer_ids.end();
}

V41AttentionRole DeepseekV41Config::role(int64_t layer) const {
  if (compress_ratio(layer) == 0) return V41AttentionRole::SlidingOnly;
  if (is_kv_source(layer)) return V41AttentionRole::Full;
  return is_index_source(layer) ? V41AttentionRole::Reindex : V41AttentionRole::Reuse;
}

int64_t DeepseekV41Config::kv_source_of(int64_t layer) const {
  int64_t found = -1;
  for (int64_t s : kv_source_layer_ids)
    if (s <= layer) found = s;
  return found;
}

bool DeepseekV41Config::uses_candidates(int64_t layer) const {
  return candidate_source_layer_id >= 0 && candidate_source_layer_id < layer && is_index_source(layer);
}

int64_t DeepseekV41Config::first_decoder_layer() const {
  return kv_source_layer_ids.empty() ? 0 : kv_source_layer_ids.back() + 1;
}

RopeParams DeepseekV41Config::window_rope() const {
  RopeParams p;
  p.theta = rope_theta;
  return p;
}

RopeParams DeepseekV41Config::compressed_rope() const {
  RopeParams p;
  p.theta = compress_rope_theta;
  if (original_max_position_embeddings > 0) {
    p.type = "yarn";
    p.factor = rope_factor;
    p.beta_fast = beta_fast;
    p.beta_slow = beta_slow;
    p.original_max_position_embeddings = original_max_position_embeddings;
    p.attention_factor = 1.0;
    p.truncate = true;  // the reference floors / ceils the correction dims
  }
  return p;
}

void DeepseekV41Config::validate(const std::string& source) const {
  check_shapes(*this, source);
  check_sharing(*this, source);
  check_engram_and_dspark(*this, source);
  check_top_level(*this, source);
}

EngramBuckets engram_buckets(const V41Engram& e) {
  EngramBuckets out;
  std::set<int64_t> seen;  // one global walk over every layer: no prime is used twice
  for (size_t layer = 0; layer < e.layer_ids.size(); ++layer) {
    auto& primes = out.primes.emplace_back();
    auto& offsets = out.offsets.emplace_back();
    int64_t offset = 0;
    for (int64_t ngram = 0; ngram + 1 < e.max_ngram_size; ++ngram) {
      int64_t current = e.vocab_size - 1;  // each n-gram size restarts the search here
      for (int64_t head = 0; head < e.n_heads; ++head) {
        do ++current;
        while (!is_prime(current) || seen.contains(current));
        seen.insert(current);
        primes.push_back(current);
        offsets.push_back(offset);
        offset += current;
      }
    }
  }
  return out;
}

std::string peek_model_type(const std::string& json_text, const std::string& source) {
  const json root = parse_root(json_text, source);
  return ConfigReader(root, source).string("model_type", "");
}

DeepseekV41Config parse_deepseek_v41_config(const std::string& json_text, const std::string& source) {
  const json root = parse_root(json_text, source);
  const ConfigReader top(root, source);
  DeepseekV41Config c;
  c.model_type = top.string("model_type", "");
  if (c.model_type != "deepseek_v41") fail("{}: model_type is '{}', expected 'deepseek_v41'", source, elide(c.model_type));
  parse_top_level(root, top, c);
  parse_quantization(root, source, c.quantization);

  const json& text = object_at(root, "text_config", source, true);
  const ConfigReader r(text, source, "text_config.");
  c.vocab_size = r.required_integer("vocab_size");
  c.hidden_size = r.required_integer("hidden_size");
  c.moe_intermediate_size = r.required_integer("moe_intermediate_size");
  c.num_hidden_layers = r.required_integer("num_hidden_layers");
  c.num_attention_heads = r.required_integer("num_attention_heads");
  if (const int64_t kv_heads = r.integer("num_key_value_heads", 1); kv_heads != 1) {
    fail("{}: text_config.num_key_value_heads must be 1 (one shared KV latent), found {}", source, kv_heads);
  }
  c.head_dim = r.required_integer("head_dim");
  c.qk_rope_head_dim = r.required_integer("qk_rope_head_dim");
  c.q_lora_rank = r.required_integer("q_lora_rank");
  c.o_groups = r.required_integer("o_groups");
  c.o_lora_rank = r.required_integer("o_lora_rank");
  c.n_routed_experts = r.required_integer("n_routed_experts");
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.num_experts_per_tok = r.required_integer("num_experts_per_tok");
  c.scoring_func = r.string("scoring_func", "sqrtsoftplus");
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.required_number("routed_scaling_factor");
  c.swiglu_limit = r.required_number("swiglu_limit");
  c.rms_norm_eps = r.required_number("rms_norm_eps");
  c.max_position_embeddings = r.required_integer("max_position_embeddings");
  c.sliding_window = r.required_integer("sliding_window");
  c.compress_ratios = r.integer_list("compress_ratios", true);
  c.kv_source_layer_ids = r.integer_list("kv_source_layer_ids", true);
  c.index_source_layer_ids = r.integer_list("index_source_layer_ids", true);
  c.candidate_source_layer_id = r.integer("candidate_source_layer_id", -1);
  c.candidate_topk_blocks = r.integer("candidate_topk_blocks", 0);
  c.candidate_block_size = r.integer("candidate_block_size", 0);
  c.index_n_heads = r.required_integer("index_n_heads");
  c.index_head_dim = r.required_integer("index_head_dim");
  c.index_topk = r.required_integer("index_topk");
  c.hc_mult = r.required_integer("hc_mult");
  c.hc_sinkhorn_iters = r.required_integer("hc_sinkhorn_iters");
  c.hc_eps = r.required_number("hc_eps");
  if (const std::string act = r.string("hidden_act", "silu"); act != "silu") {
    fail("{}: text_config.hidden_act '{}' is not supported (supported: silu)", source, elide(act));
  }
  if (r.boolean("tie_word_embeddings", false)) {
    fail("{}: text_config.tie_word_embeddings must be false (DeepSeek-V4.1 ships its own head.weight)", source);
  }
  parse_rope_scaling(text, r, c);
  parse_engram_and_dspark(r, c);
  c.validate(source);
  return c;
}

DeepseekV41Config load_deepseek_v41_config(const std::filesystem::path& model_dir) {
  return parse_deepseek_v41_config(require_config_text(model_dir), (model_dir / "config.json").string());
}

std::optional<DeepseekV41Config> load_deepseek_v41_config_if_v41(const std::filesystem::path& model_dir) {
  const std::string source = (model_dir / "config.json").string();
  const auto text = read_config_text(model_dir);
  if (!text) return std::nullopt;  // the caller's own loader reports the missing file
  if (peek_model_type(*text, source) != "deepseek_v41") return std::nullopt;
  return parse_deepseek_v41_config(*text, source);
}

ModelConfig common_model_config(const DeepseekV41Config& c) {
  ModelConfig m;
  m.model_type = c.model_type;
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.moe_intermediate_size = c.moe_intermediate_size;
  m.num_hidden_layers = c.num_hidden_layers;
  m.num_attention_heads = c.num_attention_heads;
  m.head_dim = c.head_dim;
  m.qk_rope_head_dim = c.qk_rope_head_dim;
  m.q_lora_rank = c.q_lora_rank;
  m.num_experts_per_tok = c.num_experts_per_tok;
  m.n_routed_experts = c.n_routed_experts;
  m.n_shared_experts = c.n_shared_experts;
  m.scoring_func = c.scoring_func;
  m.norm_topk_prob = c.norm_topk_prob;
  m.routed_scaling_factor = c.routed_scaling_factor;
  m.max_position_embeddings = c.max_position_embeddings;
  m.rope_main = c.window_rope();
  m.rope_compress = c.compressed_rope();
  m.hc_mult = c.hc_mult;
  m.hc_sinkhorn_iters = c.hc_sinkhorn_iters;
  m.hc_eps = c.hc_eps;
  m.swiglu_limit = c.swiglu_limit;
  m.sliding_window = c.sliding_window;
  m.o_groups = c.o_groups;
  m.o_lora_rank = c.o_lora_rank;
  m.index_n_heads = c.index_n_heads;
  m.index_head_dim = c.index_head_dim;
  m.index_topk = c.index_topk;
  m.num_nextn_predict_layers = c.dspark.stages;
  m.rms_norm_eps = c.rms_norm_eps;
  m.bos_token_id = c.bos_token_id;
  m.eos_token_ids = c.eos_token_ids;
  m.pad_token_id = c.pad_token_id;
  if (c.quantization.fp8) {
    m.quant_method = "fp8";
    m.weight_block_size = {c.quantization.block_rows, c.quantization.block_cols};
  }
  return m;
}

}  // namespace deepinfer::io
