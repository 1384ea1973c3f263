// config.json parsing: the bundled configs, DeepseekV4Config defaults, legacy keys and both rope layouts.
#include "io/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace deepinfer::io {
namespace {

using namespace deepinfer::io::testing;
using json = nlohmann::json;
using AK = AttentionKind;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";
const fs::path kFixtures = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";

// A small valid config to modify per test (mirrors v4_tiny_b's shapes).
json small_config() {
  return json::parse(R"({
    "model_type": "deepseek_v4", "vocab_size": 512, "hidden_size": 64, "moe_intermediate_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 32,
    "q_lora_rank": 48, "num_experts_per_tok": 2, "n_routed_experts": 4, "o_groups": 4, "o_lora_rank": 16,
    "index_n_heads": 4, "index_head_dim": 32, "index_topk": 4, "max_position_embeddings": 256,
    "sliding_window": 12, "num_nextn_predict_layers": 0
  })");
}

ModelConfig parse(const json& j) { return parse_model_config(j.dump()); }

TEST(ModelConfigBundled, KjvHasDefaultCompressRope) {
  const ModelConfig c = load_model_config(kKjv);
  EXPECT_EQ(c.model_type, "deepseek_v4");
  EXPECT_EQ(c.vocab_size, 4096);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.qk_rope_head_dim, 16);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.o_lora_rank, 128);
  EXPECT_EQ(c.sliding_window, 64);
  EXPECT_EQ(c.compress_rate_csa, 4);
  EXPECT_EQ(c.compress_rate_hca, 16);
  EXPECT_EQ(c.layer_types, (std::vector<AK>{AK::Sliding, AK::Sliding, AK::CSA, AK::HCA, AK::CSA, AK::HCA}));
  EXPECT_EQ(c.mlp_layer_types,
            (std::vector<MlpKind>{MlpKind::HashMoE, MlpKind::MoE, MlpKind::MoE, MlpKind::MoE, MlpKind::MoE, MlpKind::MoE}));
  EXPECT_EQ(c.compress_rate(0), 0);
  EXPECT_EQ(c.compress_rate(2), 4);
  EXPECT_EQ(c.compress_rate(3), 16);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_EQ(c.rope_main.theta, 10000.0);
  EXPECT_EQ(c.rope_compress.type, "default");
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.bos_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(2));
  EXPECT_TRUE(c.quant_method.empty());
  EXPECT_NO_THROW(c.validate());
}

TEST(ModelConfigBundled, TinyAHasYarnCompressRope) {
  const ModelConfig c = load_model_config(kFixtures / "v4_tiny_a");
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.layer_types, (std::vector<AK>{AK::Sliding, AK::CSA, AK::HCA, AK::CSA, AK::HCA}));
  EXPECT_EQ(c.mlp_layer_types[1], MlpKind::HashMoE);
  EXPECT_EQ(c.mlp_layer_types[2], MlpKind::MoE);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_EQ(c.rope_compress.factor, 4.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 64);
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.rope_compress.beta_fast, 32.0);
  EXPECT_EQ(c.rope_compress.beta_slow, 1.0);
  EXPECT_EQ(c.rope_compress.attention_factor, std::optional<double>(1.0));
  EXPECT_EQ(c.swiglu_limit, 1.5);
  EXPECT_FALSE(c.pad_token_id.has_value());
}

TEST(ModelConfigBundled, TinyB) {
  const ModelConfig c = load_model_config(kFixtures / "v4_tiny_b");
  EXPECT_EQ(c.layer_types, (std::vector<AK>{AK::HCA, AK::CSA, AK::Sliding, AK::CSA}));
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.qk_rope_head_dim, 16);  // partial_rotary_factor 0.5
  EXPECT_EQ(c.compress_rate(0), 32);
  EXPECT_EQ(c.compress_rate(1), 8);
  EXPECT_EQ(c.rope_compress.factor, 16.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 16);
}

TEST(ModelConfigDefaults, MatchDeepseekV4Config) {
  const ModelConfig c = parse_model_config(R"({"model_type": "deepseek_v4"})");
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 43);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.compress_rate_csa, 4);
  EXPECT_EQ(c.compress_rate_hca, 128);
  // 2x HCA bootstrap, then CSA/HCA interleave starting with HCA; first 3 layers hash-routed.
  ASSERT_EQ(c.layer_types.size(), 43u);
  EXPECT_EQ(c.layer_types[0], AK::HCA);
  EXPECT_EQ(c.layer_types[1], AK::HCA);
  EXPECT_EQ(c.layer_types[2], AK::HCA);
  EXPECT_EQ(c.layer_types[3], AK::CSA);
  EXPECT_EQ(c.layer_types[42], AK::HCA);
  EXPECT_EQ(c.mlp_layer_types[2], MlpKind::HashMoE);
  EXPECT_EQ(c.mlp_layer_types[3], MlpKind::MoE);
  EXPECT_EQ(c.rope_compress.type, "default");
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.bos_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1}));
}

TEST(ModelConfigLegacy, CompressRatiosQkRopeHeadDimAndHashLayers) {
  json j = small_config();
  j["compress_ratios"] = {128, 4, 0, 4, 0};  // the last entry is the MTP layer
  j["qk_rope_head_dim"] = 8;
  j["num_hash_layers"] = 1;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.layer_types, (std::vector<AK>{AK::HCA, AK::CSA, AK::Sliding, AK::CSA}));
  EXPECT_EQ(c.qk_rope_head_dim, 8);
  EXPECT_EQ(c.mlp_layer_types, (std::vector<MlpKind>{MlpKind::HashMoE, MlpKind::MoE, MlpKind::MoE, MlpKind::MoE}));
}

// The layout of the original DeepSeek release: only legacy keys, MTP layer in compress_ratios,
// flat YaRN rope_scaling and an FP8 quantization_config.
TEST(ModelConfigLegacy, ReleasedFlashStyleConfig) {
  json j = json::parse(R"({
    "model_type": "deepseek_v4", "vocab_size": 129280, "hidden_size": 4096, "moe_intermediate_size": 2048,
    "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
    "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_lora_rank": 1024, "o_groups": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 6, "num_hash_layers": 3, "compress_rate_csa": 4,
    "compress_rate_hca": 128, "rope_theta": 10000, "compress_rope_theta": 160000,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                     "beta_fast": 32, "beta_slow": 1},
    "max_position_embeddings": 1048576, "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128,
    "index_topk": 512, "num_nextn_predict_layers": 1, "eos_token_id": 1, "bos_token_id": 0,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
  })");
  std::vector<int> ratios{0, 0};
  for (int i = 2; i < 43; ++i) ratios.push_back(i % 2 == 0 ? 4 : 128);
  ratios.push_back(0);  // the MTP layer
  j["compress_ratios"] = ratios;
  const ModelConfig c = parse(j);
  ASSERT_EQ(c.layer_types.size(), 43u);
  EXPECT_EQ(c.layer_types[0], AK::Sliding);
  EXPECT_EQ(c.layer_types[1], AK::Sliding);
  EXPECT_EQ(c.layer_types[2], AK::CSA);
  EXPECT_EQ(c.layer_types[3], AK::HCA);
  EXPECT_EQ(c.layer_types[42], AK::CSA);
  EXPECT_EQ(c.compress_rate(3), 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.mlp_layer_types[2], MlpKind::HashMoE);
  EXPECT_EQ(c.mlp_layer_types[3], MlpKind::MoE);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_EQ(c.rope_main.theta, 10000.0);
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.rope_compress.factor, 16.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_compress.attention_factor, std::optional<double>(1.0));
  EXPECT_EQ(c.quant_method, "fp8");
  EXPECT_EQ(c.weight_block_size, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
}

TEST(ModelConfigLegacy, ScalarCompressRatesOverrideTheDict) {
  json j = small_config();
  j["compress_rates"] = {{"compressed_sparse_attention", 8}, {"heavily_compressed_attention", 64}};
  j["compress_rate_hca"] = 32;
  j["compress_ratios"] = {32, 8, 0, 32};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.compress_rate_csa, 8);
  EXPECT_EQ(c.compress_rate_hca, 32);
  EXPECT_EQ(c.layer_types, (std::vector<AK>{AK::HCA, AK::CSA, AK::Sliding, AK::HCA}));
  j["compress_ratios"] = {32, 8, 0, 16};
  expect_error([&] { parse(j); }, {"compress_ratios[3] is 16"});
}

TEST(ModelConfigRope, FlatRopeScalingGoesToCompressOnly) {
  json j = small_config();
  j["rope_theta"] = 5000.0;
  j["compress_rope_theta"] = 80000.0;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 16}, {"original_max_position_embeddings", 16},
                       {"beta_fast", 32}, {"beta_slow", 1}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_EQ(c.rope_main.theta, 5000.0);
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_EQ(c.rope_compress.theta, 80000.0);
  EXPECT_EQ(c.rope_compress.factor, 16.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 16);
  EXPECT_EQ(c.rope_compress.attention_factor, std::optional<double>(1.0));  // forced, not 0.1 ln 16 + 1
}

TEST(ModelConfigRope, FlatRopeParametersAndDefaultsForMissingYarnKeys) {
  json j = small_config();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 256);  // max_position_embeddings
  EXPECT_EQ(c.rope_compress.beta_fast, 32.0);
  EXPECT_EQ(c.rope_compress.beta_slow, 1.0);
  EXPECT_EQ(c.rope_compress.attention_factor, std::optional<double>(1.0));
  EXPECT_EQ(c.rope_main.theta, 10000.0);
}

TEST(ModelConfigRope, NestedFormKeepsEachSubDict) {
  json j = small_config();
  j["rope_theta"] = 20000.0;
  j["rope_parameters"] = {{"main", {{"rope_type", "default"}}},
                          {"compress", {{"rope_type", "yarn"}, {"factor", 8}, {"original_max_position_embeddings", 32},
                                        {"rope_theta", 40000.0}}}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_main.theta, 20000.0);  // missing theta falls back to rope_theta
  EXPECT_EQ(c.rope_compress.theta, 40000.0);
  EXPECT_EQ(c.rope_compress.factor, 8.0);
  // The nested form is not pinned to 1.0: YaRN's default 0.1 ln(factor) + 1 applies.
  ASSERT_TRUE(c.rope_compress.attention_factor.has_value());
  EXPECT_DOUBLE_EQ(*c.rope_compress.attention_factor, 0.1 * std::log(8.0) + 1.0);
  EXPECT_TRUE(c.rope_compress.truncate);
  j["rope_parameters"]["compress"]["mscale"] = 2.0;
  j["rope_parameters"]["compress"]["mscale_all_dim"] = 1.0;
  EXPECT_DOUBLE_EQ(*parse(j).rope_compress.attention_factor, (0.2 * std::log(8.0) + 1.0) / (0.1 * std::log(8.0) + 1.0));
  j["rope_parameters"]["compress"]["rope_type"] = "longrope";
  expect_error([&] { parse(j); }, {"rope_parameters.compress", "'longrope'", "not supported"});
}

TEST(ModelConfigTokens, EosListAndNulls) {
  json j = small_config();
  j["eos_token_id"] = {1, 7, 9};
  j["bos_token_id"] = nullptr;
  j["pad_token_id"] = 3;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 7, 9}));
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(3));
  j["eos_token_id"] = 600;
  expect_error([&] { parse(j); }, {"eos_token_id 600", "outside the vocabulary [0, 512)"});
}

TEST(ModelConfigQuantization, MethodAndBlockSize) {
  json j = small_config();
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.quant_method, "fp8");
  EXPECT_EQ(c.weight_block_size, (std::vector<int64_t>{128, 128}));
}

TEST(ModelConfigErrors, WrongLayerCountHasExactMessage) {
  json j = small_config();
  j["num_hidden_layers"] = 7;
  j["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                      "compressed_sparse_attention", "heavily_compressed_attention"};
  try {
    parse(j);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: num_hidden_layers is 7 but layer_types has 5 entries");
  }
  // validate() on a hand-edited struct reports the same way.
  ModelConfig c = parse(small_config());
  c.mlp_layer_types.pop_back();
  expect_error([&] { c.validate(); }, {"config.json: num_hidden_layers is 4 but mlp_layer_types has 3 entries"});
}

TEST(ModelConfigErrors, UnknownModelTypes) {
  json j = small_config();
  j["model_type"] = "llama";
  expect_error([&] { parse(j); }, {"model_type 'llama' is not supported", "supported: deepseek_v4"});
  j["model_type"] = "deepseek_v41";
  expect_error([&] { parse(j); }, {"deepseek_v41", "DeepSeek-V4.1 config", "parse_deepseek_v41_config"});
  j.erase("model_type");
  expect_error([&] { parse(j); }, {"no 'model_type'"});
}

TEST(ModelConfigErrors, InconsistentShapes) {
  auto expect_bad = [](const char* key, json value, std::initializer_list<std::string> fragments) {
    json j = small_config();
    j[key] = std::move(value);
    expect_error([&] { parse(j); }, fragments);
  };
  expect_bad("head_dim", 33, {"head_dim must be even, found 33"});
  expect_bad("o_groups", 3, {"num_attention_heads 8 is not divisible by o_groups 3"});
  expect_bad("num_experts_per_tok", 5, {"num_experts_per_tok 5 exceeds n_routed_experts 4"});
  expect_bad("qk_rope_head_dim", 64, {"qk_rope_head_dim) 64 exceed head_dim 32"});
  expect_bad("hidden_size", 0, {"hidden_size must be positive, found 0"});
  expect_bad("hidden_size", "64", {"'hidden_size' must be an integer", "\"64\""});
  expect_bad("scoring_func", "relu", {"scoring_func 'relu'"});
  expect_bad("layer_types", json{"sliding_attention", "full_attention", "sliding_attention", "sliding_attention"},
             {"layer_types[1] is 'full_attention'"});
  expect_error([] { parse_model_config("{\"model_type\": "); }, {"config.json", "not valid JSON"});
  expect_error([] { load_model_config("/nonexistent/model"); }, {"/nonexistent/model/config.json"});
}

}  // namespace
}  // namespace deepinfer::io
