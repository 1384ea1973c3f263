#pragma once
// config.json -> DeepseekV41Config for DeepSeek-V4.1-Flash (`model_type: deepseek_v41`): the
// top-level ids, `quantization_config`, and `text_config` under the released key names (the
// mapping to the reference's ModelArgs is in ../shared/fixtures/tools/GENERATING.md). Keys whose
// default would silently build another model (every shape, the layer schedules, CSA2 sharing,
// Engram and DSpark geometry) are required; the error names the missing or invalid key.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace deepinfer::io {

// What a layer's attention does beyond its sliding window (MODELS.md, "CSA2 sharing").
enum class V41AttentionRole : uint8_t {
  SlidingOnly,  // compress ratio 0
  Full,         // a kv source: compresses KV, publishes index keys and its own top-k
  Reindex,      // an index source reading the shared KV: its own indexer query and top-k
  Reuse,        // reads the latest shared KV and the latest top-k
};

struct V41Quantization {
  bool fp8 = false;              // quant_method "fp8": dense weights FP8 e4m3 with block scales
  int64_t block_rows = 0, block_cols = 0;
  std::string scale_fmt;         // "ue8m0"
  std::string activation_scheme; // "dynamic"
  bool fp4_experts = false;      // expert_dtype "fp4": routed experts packed FP4 e2m1
};

struct V41Engram {
  std::vector<int64_t> layer_ids;
  std::vector<int64_t> num_embeddings;  // table rows per engram layer (= the sum of its prime buckets)
  int64_t max_ngram_size = 0;
  int64_t vocab_size = 0;               // where each (n-gram, head) prime search starts
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t pad_token_id = 2;
  int64_t compressed_vocab_size = 0;    // of the tokenizer's compressed token map
  bool enabled() const { return !layer_ids.empty(); }
  // Hash columns per position: (max_ngram_size - 1) n-gram sizes x n_heads.
  int64_t hash_columns() const { return (max_ngram_size - 1) * n_heads; }
};

struct V41DSpark {
  int64_t stages = 0;  // num_nextn_predict_layers: mtp.0 .. mtp.(stages-1)
  int64_t block_size = 0;
  int64_t noise_token_id = 0;
  std::vector<int64_t> target_layer_ids;
  int64_t markov_rank = 0;
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  bool enabled() const { return stages > 0; }
};

struct DeepseekV41Config {
  // Top level.
  std::string model_type;  // "deepseek_v41"
  std::optional<int64_t> bos_token_id, pad_token_id, image_token_id;
  std::vector<int64_t> eos_token_ids;
  V41Quantization quantization;
  int64_t vision_layers = 0;  // vision_config.num_hidden_layers: the tower is not run (text only)

  // text_config.
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 1;
  int64_t num_experts_per_tok = 0;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;
  double rms_norm_eps = 0.0;
  int64_t max_position_embeddings = 0;
  int64_t sliding_window = 0;
  // One entry per layer and then per DSpark stage: 0 = sliding window only, r = reads the shared
  // compressed KV at r tokens per entry (1 = one entry per token, no pooling).
  std::vector<int64_t> compress_ratios;
  std::vector<int64_t> kv_source_layer_ids, index_source_layer_ids;
  int64_t candidate_source_layer_id = -1;  // -1: no candidate pre-filter
  int64_t candidate_topk_blocks = 0, candidate_block_size = 0;
  int64_t index_n_heads = 0, index_head_dim = 0, index_topk = 0;
  double rope_theta = 0.0, compress_rope_theta = 0.0;
  // YaRN on compressed layers (rope_scaling); original_max_position_embeddings 0 = none.
  double rope_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;
  int64_t hc_mult = 0, hc_sinkhorn_iters = 0;
  double hc_eps = 0.0;
  V41Engram engram;
  V41DSpark dspark;

  int64_t compress_ratio(int64_t layer) const;
  bool is_kv_source(int64_t layer) const;
  bool is_index_source(int64_t layer) const;
  V41AttentionRole role(int64_t layer) const;
  // The latest kv source at or before `layer` (whose shared KV it reads), -1 if none.
  int64_t kv_source_of(int64_t layer) const;
  // Index sources after the candidate source score only inside its candidate blocks.
  bool uses_candidates(int64_t layer) const;
  // First layer after the last kv source: the decoder half, which bounded replay shortens.
  int64_t first_decoder_layer() const;
  // The rope of sliding-only layers (plain) and of compressed layers (YaRN when configured), in
  // the form deepseek_v4::Rope takes (the V4.1 reference scales neither by an attention factor).
  RopeParams window_rope() const;
  RopeParams compressed_rope() const;
  // Throws Error naming the first inconsistency.
  void validate(const std::string& source = "config.json") const;
};

// Engram's hash buckets: for each engram layer, one prime modulus per (n-gram size, head) column,
// drawn in order from a walk upward from engram.vocab_size that never reuses a prime, and each
// column's first row in the layer's table. A layer's primes sum to its table's rows.
struct EngramBuckets {
  std::vector<std::vector<int64_t>> primes;   // [engram layer][column]
  std::vector<std::vector<int64_t>> offsets;  // [engram layer][column]
};
EngramBuckets engram_buckets(const V41Engram& engram);

// "model_type" of a config.json text, without interpreting anything else ("" if absent).
std::string peek_model_type(const std::string& json_text, const std::string& source = "config.json");

DeepseekV41Config parse_deepseek_v41_config(const std::string& json_text, const std::string& source = "config.json");
DeepseekV41Config load_deepseek_v41_config(const std::filesystem::path& model_dir);  // reads DIR/config.json
// The folder's V4.1 config when DIR/config.json says model_type deepseek_v41 (checked), else none.
std::optional<DeepseekV41Config> load_deepseek_v41_config_if_v41(const std::filesystem::path& model_dir);

// The fields every CausalLM exposes to the engine (vocabulary, special ids, context), with the
// V4-only layer schedules left empty.
ModelConfig common_model_config(const DeepseekV41Config& config);

}  // namespace deepinfer::io
