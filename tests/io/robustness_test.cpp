// Randomly damaged inputs: the reader and the config parser must either accept the input or throw
// deepinfer::Error with a one-line message; never crash, hang or throw anything else. Seeds are
// fixed so a failure reproduces.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io_test_util.h"
#include "testing/big_file.h"

namespace deepinfer::io {
namespace {

using namespace deepinfer::io::testing;
using json = nlohmann::json;

std::string valid_file() {
  std::vector<OwnedTensor> tensors;
  tensors.push_back(make_owned_tensor<uint16_t>("model.embed.weight", DType::BF16, {4, 3},
                                                {0x3f80, 0x4000, 0xbf80, 0x3f00, 0x4040, 0x4080, 1, 2, 3, 4, 5, 6}));
  tensors.push_back(make_owned_tensor<int64_t>("tid2eid", DType::I64, {2, 2}, {0, 1, 2, 3}));
  tensors.push_back(make_owned_tensor<uint8_t>("w", DType::F8_E4M3, {2, 4}, {0x38, 0x40, 0xb8, 0x01, 2, 3, 4, 5}));
  tensors.push_back(make_owned_tensor<uint8_t>("w.scale", DType::F8_E8M0, {1, 1}, {127}));
  return serialize_safetensors(tensors, {{"format", "pt"}});
}

// Opens the bytes; on success every tensor must lie inside the mapping and convert cleanly.
void open_and_read(const fs::path& path, const std::string& bytes, uint64_t& accepted, uint64_t& rejected) {
  write_bytes(path, bytes);
  try {
    auto file = SafeTensorsFile::open(path);
    for (const auto& [name, t] : file->tensors()) {
      ASSERT_LE(8 + t.nbytes, bytes.size()) << name;
      if (t.dtype != DType::F4_E2M1) (void)to_float(t);
    }
    ++accepted;
  } catch (const Error& e) {
    ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    ++rejected;
  }
}

TEST(Robustness, MutatedSafetensorsFilesAreAcceptedOrRejectedCleanly) {
  ScratchDir dir;
  const std::string good = valid_file();
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(good[i]);
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  const std::string printable = "{}[]\",:0123456789-eE.abcdFIU_ \\";
  uint64_t accepted = 0, rejected = 0;
  for (int iter = 0; iter < 1000; ++iter) {
    std::string bytes = good;
    const int kind = iter % 5;
    if (kind == 0) {  // random byte anywhere in the header
      bytes[8 + rng() % header_len] = static_cast<char>(byte(rng));
    } else if (kind == 1) {  // JSON-ish character in the header, more likely to stay parseable
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
        bytes[8 + rng() % header_len] = printable[rng() % printable.size()];
      }
    } else if (kind == 2) {  // truncate anywhere
      bytes.resize(rng() % bytes.size());
    } else if (kind == 3) {  // corrupt the length field
      bytes[rng() % 8] = static_cast<char>(byte(rng));
    } else {  // replace one digit of the header by another (offsets and shapes shift)
      std::vector<size_t> digits;
      for (size_t i = 8; i < 8 + header_len; ++i) {
        if (bytes[i] >= '0' && bytes[i] <= '9') digits.push_back(i);
      }
      bytes[digits[rng() % digits.size()]] = static_cast<char>('0' + rng() % 10);
    }
    open_and_read(dir / "m.safetensors", bytes, accepted, rejected);
    if (HasFatalFailure()) return;
  }
  // Both outcomes must actually occur, or the mutations are not exercising the validator.
  EXPECT_GT(accepted, 10u);
  EXPECT_GT(rejected, 300u);
}

TEST(Robustness, ConfigWithRandomlyRetypedFieldsIsAcceptedOrRejectedCleanly) {
  const json base = json::parse(R"({
    "model_type": "deepseek_v4", "vocab_size": 512, "hidden_size": 64, "moe_intermediate_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 32,
    "q_lora_rank": 48, "num_experts_per_tok": 2, "n_routed_experts": 4, "o_groups": 4, "o_lora_rank": 16,
    "index_n_heads": 4, "index_head_dim": 32, "index_topk": 4, "max_position_embeddings": 256,
    "sliding_window": 12, "num_nextn_predict_layers": 0, "partial_rotary_factor": 0.5, "eos_token_id": [1, 2],
    "compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 32},
    "layer_types": ["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention",
                    "compressed_sparse_attention"],
    "mlp_layer_types": ["hash_moe", "moe", "moe", "moe"],
    "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0},
                        "compress": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16,
                                     "rope_theta": 160000.0, "attention_factor": 1.0}},
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}
  })");
  ASSERT_NO_THROW(parse_model_config(base.dump()));
  const std::vector<json> replacements{nullptr, "x", -1, 0, 3, 1e300, -0.5, 0.5, true, json::array(), json::object(),
                                       json{1, "a"}, 9223372036854775807ll, 18446744073709551615ull, 4.0};
  // Every key path, nested ones included.
  std::vector<json::json_pointer> paths;
  const json flat = base.flatten();
  for (const auto& [key, value] : flat.items()) {
    paths.emplace_back(key);
    json::json_pointer parent = json::json_pointer(key).parent_pointer();
    if (!parent.empty()) paths.push_back(parent);
  }
  std::mt19937 rng(777);
  uint64_t accepted = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    json j = base;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 2); ++k) {
      const auto& path = paths[rng() % paths.size()];
      const bool erase = rng() % 6 == 0;
      const json& replacement = replacements[rng() % replacements.size()];
      try {  // a path made invalid by the previous mutation is simply skipped
        if (erase) {
          if (j.contains(path) && j[path.parent_pointer()].is_object()) j[path.parent_pointer()].erase(path.back());
        } else if (j.contains(path.parent_pointer()) && j[path.parent_pointer()].is_structured()) {
          j[path] = replacement;
        }
      } catch (const json::exception&) {
      }
    }
    try {
      const ModelConfig c = parse_model_config(j.dump());
      EXPECT_EQ(c.layer_types.size(), static_cast<size_t>(c.num_hidden_layers));
      ++accepted;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(rejected, 1000u);
}

// Crafted hostile inputs: each loader answers with one line, never a crash or a stack overflow.
void expect_one_line_error(const std::function<void()>& load, const std::string& mention, const std::string& what) {
  try {
    load();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find(mention), std::string::npos) << what << ": " << message;
    EXPECT_LT(message.size(), 600u) << what << ": the error must not echo the input";
  }
}

TEST(Robustness, DeeplyNestedJsonIsAOneLineError) {
  const std::string nested = std::string(300000, '[') + std::string(300000, ']');
  expect_one_line_error([&] { parse_model_config(nested, "deep/config.json"); }, "deep/config.json", "V4 config");
  expect_one_line_error([&] { parse_deepseek_v41_config(nested, "deep/config.json"); }, "deep/config.json",
                        "V4.1 config");
  const std::string in_object = "{\"model_type\": \"deepseek_v4\", \"hidden_size\": " + nested + "}";
  expect_one_line_error([&] { parse_model_config(in_object, "deep/config.json"); }, "hidden_size",
                        "V4 config with a deep member");
  std::string file(8, '\0');
  const uint64_t length = nested.size();
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xff);
  expect_one_line_error([&] { SafeTensorsFile::from_bytes(file + nested, "deep.safetensors"); }, "deep.safetensors",
                        "safetensors header");
  ScratchDir dir;
  write_bytes(dir / "model.safetensors.index.json", "{\"weight_map\": " + nested + "}");
  expect_one_line_error([&] { Checkpoint::open(dir.path()); }, "model.safetensors.index.json", "weight index");
}

// Each loader sees "a 2 GB string" (a sparse file: the start of a JSON string, then 2 GB of NULs)
// and refuses it from the file size before reading it.
TEST(Robustness, TwoGigabyteFilesAreRefusedBeforeTheyAreRead) {
  using testing_util::write_sparse_file;
  ScratchDir dir;
  write_sparse_file(dir / "config.json", R"({"model_type": ")");
  expect_one_line_error([&] { load_model_config(dir.path()); }, "over the 16 MB limit for a model config",
                        "V4 config.json");
  expect_one_line_error([&] { load_deepseek_v41_config_if_v41(dir.path()); }, "config.json (model config) is 2.0 GB",
                        "V4.1 config.json");
  write_sparse_file(dir / "model.safetensors.index.json", R"({"metadata": {"note": ")");
  expect_one_line_error([&] { Checkpoint::open(dir.path()); }, "over the 256 MB limit for a weight index",
                        "model.safetensors.index.json");
  // A safetensors header that claims 2 GB (the file is that long too): refused by the header limit.
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[static_cast<size_t>(i)] = static_cast<char>((testing_util::kTwoGigabytes >> (8 * i)) & 0xff);
  write_sparse_file(dir / "big.safetensors", length + R"({"w": {"dtype": ")", testing_util::kTwoGigabytes + 8);
  expect_one_line_error([&] { SafeTensorsFile::open(dir / "big.safetensors"); }, "big.safetensors",
                        "2 GB safetensors header");
}

TEST(Robustness, HugeAndOverflowingValuesAreOneLineErrors) {
  // A shape whose element count overflows 64 bits when multiplied.
  const std::string header =
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  expect_one_line_error([&] { SafeTensorsFile::from_bytes(file + header, "big.safetensors"); }, "overflows",
                        "overflowing shape");
  // A header length past the end of the file.
  std::string past(8, '\0');
  past[0] = static_cast<char>(0xff);
  past[1] = static_cast<char>(0x7f);
  expect_one_line_error([&] { SafeTensorsFile::from_bytes(past + "{}", "short.safetensors"); }, "truncated",
                        "header length past the file");
  // Numbers out of range and a very long string in a config.
  expect_one_line_error([&] { parse_model_config(R"({"model_type": "deepseek_v4", "hidden_size": 1e400})"); },
                        "number overflow", "1e400");
  const std::string long_type = "{\"model_type\": \"" + std::string(size_t{64} << 20, 'x') + "\"}";
  expect_one_line_error([&] { parse_model_config(long_type, "long/config.json"); }, "model_type", "64 MB string");
  // Whatever builds a message, no error is longer than 8 KB.
  EXPECT_LE(std::string(Error(std::string(size_t{1} << 20, 'y')).what()).size(), 8192u);
}

}  // namespace
}  // namespace deepinfer::io
