#pragma once
// config.json -> ModelConfig for the DeepSeek-V4 family. Accepts every DeepseekV4Config field, the
// legacy forms (`compress_ratios`, `compress_rate_csa/hca`, `num_hash_layers`, `qk_rope_head_dim`)
// and both RoPE layouts (nested `rope_parameters` {main, compress} and flat `rope_scaling`).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::io {

enum class AttentionKind : uint8_t { Sliding, CSA, HCA };  // sliding window / compressed sparse / heavily compressed
enum class MlpKind : uint8_t { HashMoE, MoE };

struct RopeParams {
  std::string type = "default";  // "default" or "yarn"
  double theta = 10000.0;
  // YaRN (used when type == "yarn")
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;
  std::optional<double> attention_factor;  // V4 forces 1.0 for the compress rope
  bool truncate = true;
};

struct ModelConfig {
  std::string model_type;  // "deepseek_v4"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;  // head_dim * partial_rotary_factor
  int64_t q_lora_rank = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 1;
  std::string scoring_func = "sqrtsoftplus";  // sqrtsoftplus | softmax | sigmoid
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  int64_t max_position_embeddings = 0;
  std::vector<AttentionKind> layer_types;
  std::vector<MlpKind> mlp_layer_types;
  int64_t compress_rate_csa = 4;
  int64_t compress_rate_hca = 128;
  RopeParams rope_main;      // sliding layers
  RopeParams rope_compress;  // CSA/HCA layers, their compressors and indexers
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double swiglu_limit = 10.0;
  int64_t sliding_window = 128;
  int64_t o_groups = 1;
  int64_t o_lora_rank = 0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t num_nextn_predict_layers = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  // Quantisation of the checkpoint, from `quantization_config` (empty = none).
  std::string quant_method;  // e.g. "fp8"
  std::vector<int64_t> weight_block_size;

  int64_t compress_rate(size_t layer) const;  // 0 for sliding layers
  // Throws Error describing the first inconsistency (layer counts, head dims, ...).
  void validate() const;
};

ModelConfig parse_model_config(const std::string& json_text, const std::string& source = "config.json");
ModelConfig load_model_config(const std::filesystem::path& model_dir);  // reads DIR/config.json

}  // namespace deepinfer::io
