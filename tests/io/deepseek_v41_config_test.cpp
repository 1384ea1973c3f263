// DeepSeek-V4.1 config.json parsing: the released DeepSeek-V4.1-Flash config (test asset), both
// golden fixtures against their reference_args.json, the derived layer roles, Engram's prime
// buckets, and one error per broken invariant naming the key.
#include "io/deepseek_v41_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Role = V41AttentionRole;

const fs::path kData = DEEPINFER_TEST_DATA_DIR;
const fs::path kReleased = kData / "configs" / "deepseek-v4.1-flash";
const fs::path kFixtures = kData / "fixtures";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// The error text of parsing `j`, or "" when it parses.
std::string error_of(const json& j) {
  try {
    parse_deepseek_v41_config(j.dump(), "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const json& j, const std::string& needle) {
  const std::string message = error_of(j);
  EXPECT_NE(message.find(needle), std::string::npos) << "expected an error containing '" << needle << "', got '"
                                                     << message << "'";
}

TEST(DeepseekV41Config, ReleasedFlashConfig) {
  const DeepseekV41Config c = load_deepseek_v41_config(kReleased);
  EXPECT_EQ(c.model_type, "deepseek_v41");
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.q_lora_rank, 1280);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20}));
  EXPECT_EQ(c.first_decoder_layer(), 21);
  EXPECT_TRUE(c.quantization.fp8);
  EXPECT_TRUE(c.quantization.fp4_experts);
  EXPECT_EQ(c.quantization.block_rows, 32);
  EXPECT_EQ(c.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_factor, 16.0);
  EXPECT_EQ(c.engram.hash_columns(), 24);
  EXPECT_EQ(c.dspark.stages, 3);
  EXPECT_EQ(c.dspark.n_routed_experts, 128);
  EXPECT_EQ(c.dspark.num_experts_per_tok, 3);
  EXPECT_EQ(c.vision_layers, 32);
  EXPECT_EQ(c.image_token_id, std::optional<int64_t>(129264));
  // Roles: 0-1 sliding only; 2 Full; 3-7 Reuse; 8 Full; 20 Full (ratio 1); 24 Reindex; 25 Reuse.
  EXPECT_EQ(c.role(0), Role::SlidingOnly);
  EXPECT_EQ(c.role(1), Role::SlidingOnly);
  EXPECT_EQ(c.role(2), Role::Full);
  EXPECT_EQ(c.role(3), Role::Reuse);
  EXPECT_EQ(c.role(20), Role::Full);
  EXPECT_EQ(c.role(24), Role::Reindex);
  EXPECT_EQ(c.role(25), Role::Reuse);
  EXPECT_EQ(c.kv_source_of(19), 14);
  EXPECT_EQ(c.kv_source_of(39), 20);
  EXPECT_FALSE(c.uses_candidates(20));  // the candidate source itself scores every block
  EXPECT_TRUE(c.uses_candidates(24));
  EXPECT_FALSE(c.uses_candidates(25));  // not an index source: reuses layer 24's top-k
  const RopeParams rope = c.compressed_rope();
  EXPECT_EQ(rope.type, "yarn");
  EXPECT_EQ(rope.theta, 160000.0);
  EXPECT_EQ(rope.attention_factor, std::optional<double>(1.0));
  EXPECT_EQ(c.window_rope().type, "default");
  const ModelConfig common = common_model_config(c);
  EXPECT_EQ(common.vocab_size, 129280);
  EXPECT_EQ(common.max_position_embeddings, 1048576);
  EXPECT_EQ(common.eos_token_ids, (std::vector<int64_t>{1}));
}

// The released row counts are exactly the sums of the primes the reference's walk hands out.
TEST(DeepseekV41Config, EngramBucketsOfTheReleasedConfig) {
  const DeepseekV41Config c = load_deepseek_v41_config(kReleased);
  const EngramBuckets b = engram_buckets(c.engram);
  ASSERT_EQ(b.primes.size(), 2u);
  ASSERT_EQ(b.primes[0].size(), 24u);
  EXPECT_EQ(b.primes[0][0], 16000057);  // the first prime above 16,000,000 - 1
  int64_t rows0 = 0, rows1 = 0;
  for (int64_t p : b.primes[0]) rows0 += p;
  for (int64_t p : b.primes[1]) rows1 += p;
  EXPECT_EQ(rows0, 384006168);
  EXPECT_EQ(rows1, 384016682);
  EXPECT_EQ(b.offsets[0][0], 0);
  EXPECT_EQ(b.offsets[0][1], b.primes[0][0]);
  // No prime is handed out twice, within or across layers.
  std::set<int64_t> all(b.primes[0].begin(), b.primes[0].end());
  all.insert(b.primes[1].begin(), b.primes[1].end());
  EXPECT_EQ(all.size(), 48u);
}

// Each fixture's config maps to the reference ModelArgs the generator recorded next to it.
TEST(DeepseekV41Config, FixturesMatchTheirReferenceArgs) {
  for (const char* name : {"v41_tiny_bf16", "v41_tiny_fp8"}) {
    SCOPED_TRACE(name);
    const DeepseekV41Config c = load_deepseek_v41_config(kFixtures / name);
    const json a = read_json(kFixtures / name / "reference_args.json");
    EXPECT_EQ(c.vocab_size, a["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.hidden_size, a["dim"].get<int64_t>());
    EXPECT_EQ(c.moe_intermediate_size, a["moe_inter_dim"].get<int64_t>());
    EXPECT_EQ(c.num_hidden_layers, a["n_layers"].get<int64_t>());
    EXPECT_EQ(c.dspark.stages, a["n_mtp_layers"].get<int64_t>());
    EXPECT_EQ(c.num_attention_heads, a["n_heads"].get<int64_t>());
    EXPECT_EQ(c.num_experts_per_tok, a["n_activated_experts"].get<int64_t>());
    EXPECT_EQ(c.routed_scaling_factor, a["route_scale"].get<double>());
    EXPECT_EQ(c.swiglu_limit, a["swiglu_limit"].get<double>());
    EXPECT_EQ(c.qk_rope_head_dim, a["rope_head_dim"].get<int64_t>());
    EXPECT_EQ(c.rms_norm_eps, a["norm_eps"].get<double>());
    EXPECT_EQ(c.sliding_window, a["window_size"].get<int64_t>());
    EXPECT_EQ(c.compress_ratios, a["compress_ratios"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.kv_source_layer_ids, a["kv_source_layers"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.index_source_layer_ids, a["index_source_layers"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.candidate_source_layer_id, a["candidate_source_layer"].get<int64_t>());
    EXPECT_EQ(c.candidate_topk_blocks, a["candidate_topk_blocks"].get<int64_t>());
    EXPECT_EQ(c.candidate_block_size, a["candidate_block_size"].get<int64_t>());
    EXPECT_EQ(c.original_max_position_embeddings, a["original_seq_len"].get<int64_t>());
    EXPECT_EQ(c.rope_factor, a["rope_factor"].get<double>());
    EXPECT_EQ(c.compress_rope_theta, a["compress_rope_theta"].get<double>());
    EXPECT_EQ(c.engram.layer_ids, a["engram_layer_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.engram.num_embeddings, a["engram_num_embeddings"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.engram.pad_token_id, a["engram_pad_id"].get<int64_t>());
    EXPECT_EQ(c.engram.compressed_vocab_size, a["engram_compressed_vocab_size"].get<int64_t>());
    EXPECT_EQ(c.dspark.block_size, a["dspark_block_size"].get<int64_t>());
    EXPECT_EQ(c.dspark.target_layer_ids, a["dspark_target_layer_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.dspark.num_experts_per_tok, a["dspark_n_activated_experts"].get<int64_t>());
    EXPECT_EQ(c.quantization.fp8, a["dtype"].get<std::string>() == "fp8");
    EXPECT_EQ(c.quantization.fp4_experts, !a["expert_dtype"].is_null());
  }
}

TEST(DeepseekV41Config, FixtureRolesCoverEveryKind) {
  const DeepseekV41Config bf16 = load_deepseek_v41_config(kFixtures / "v41_tiny_bf16");
  EXPECT_EQ(bf16.role(0), Role::SlidingOnly);
  EXPECT_EQ(bf16.role(1), Role::Full);
  EXPECT_EQ(bf16.role(2), Role::Reuse);
  EXPECT_EQ(bf16.role(3), Role::Full);
  EXPECT_EQ(bf16.role(4), Role::Reindex);
  EXPECT_TRUE(bf16.uses_candidates(4));
  const DeepseekV41Config fp8 = load_deepseek_v41_config(kFixtures / "v41_tiny_fp8");
  EXPECT_EQ(fp8.role(2), Role::Reindex);
  EXPECT_EQ(fp8.role(3), Role::Reuse);
  EXPECT_EQ(fp8.role(5), Role::Reuse);
  EXPECT_EQ(fp8.role(6), Role::Reindex);
  EXPECT_FALSE(fp8.uses_candidates(2));
  EXPECT_TRUE(fp8.uses_candidates(6));
}

TEST(DeepseekV41Config, ErrorsNameTheKey) {
  const json base = read_json(kReleased / "config.json");
  auto with = [&](auto&& edit) {
    json j = base;
    edit(j);
    return j;
  };
  EXPECT_EQ(error_of(base), "");
  expect_error(with([](json& j) { j["text_config"].erase("head_dim"); }), "missing required key 'text_config.head_dim'");
  expect_error(with([](json& j) { j.erase("text_config"); }), "missing required object 'text_config'");
  expect_error(with([](json& j) { j["text_config"]["hidden_size"] = "big"; }), "'text_config.hidden_size' must be an integer");
  expect_error(with([](json& j) { j["text_config"]["compress_ratios"][2] = 0; }), "kv source layer 2 has compress_ratio 0");
  expect_error(with([](json& j) { j["text_config"]["compress_ratios"].erase(42); }), "compress_ratios has 42 entries");
  expect_error(with([](json& j) { j["text_config"]["compress_ratios"][41] = 2; }), "DSpark stage 1");
  expect_error(with([](json& j) { j["text_config"]["compress_ratios"][5] = 1; }),
               "layer 5 reads compressed KV at ratio 1 but the kv source it shares (layer 2)");
  expect_error(with([](json& j) { j["text_config"]["index_source_layer_ids"] = json::array({8, 14, 20}); }),
               "kv source layer 2 is not in index_source_layer_ids");
  expect_error(with([](json& j) { j["text_config"]["kv_source_layer_ids"] = json::array({8, 2}); }), "ascending");
  expect_error(with([](json& j) { j["text_config"]["kv_source_layer_ids"] = json::array({2, 8, 14, 40}); }),
               "kv_source_layer_ids[3] = 40 is not a layer");
  expect_error(with([](json& j) { j["text_config"]["candidate_source_layer_id"] = 21; }),
               "candidate_source_layer_id 21 is not an index source");
  expect_error(with([](json& j) { j["text_config"]["engram_num_embeddings"][1] = 384016681; }),
               "engram_num_embeddings[1] is 384016681 but the prime buckets of engram layer 14 span 384016682 rows");
  expect_error(with([](json& j) { j["text_config"]["engram_head_dim"] = 100; }), "engram_head_dim must be a positive multiple of 32");
  expect_error(with([](json& j) { j["text_config"]["dspark_target_layer_ids"] = json::array({37, 40}); }),
               "dspark_target_layer_ids[1] = 40");
  expect_error(with([](json& j) { j["quantization_config"]["weight_block_size"] = json::array({128, 128}); }),
               "weight_block_size must be [32, 32]");
  expect_error(with([](json& j) { j["quantization_config"]["quant_method"] = "gptq"; }), "quant_method 'gptq' is not supported");
  expect_error(with([](json& j) { j["quantization_config"]["expert_dtype"] = "int4"; }), "expert_dtype 'int4'");
  expect_error(with([](json& j) { j["text_config"]["num_key_value_heads"] = 8; }), "num_key_value_heads must be 1");
  expect_error(with([](json& j) { j["text_config"]["tie_word_embeddings"] = true; }), "tie_word_embeddings must be false");
  expect_error(with([](json& j) { j["text_config"]["rope_scaling"]["rope_type"] = "linear"; }), "rope_type 'linear'");
  expect_error(with([](json& j) { j["model_type"] = "deepseek_v4"; }), "expected 'deepseek_v41'");
  expect_error(with([](json& j) { j["eos_token_id"] = 200000; }), "eos_token_id 200000 is outside the vocabulary");
}

TEST(DeepseekV41Config, ModelTypeIsPeekedWithoutParsing) {
  EXPECT_EQ(peek_model_type(R"({"model_type": "deepseek_v41"})"), "deepseek_v41");
  EXPECT_EQ(peek_model_type(R"({"vocab_size": 3})"), "");
  EXPECT_THROW(peek_model_type("[1]"), Error);
  EXPECT_THROW(peek_model_type("{"), Error);
}

}  // namespace
}  // namespace deepinfer::io
