// Golden prompts: every case in tests/data/encoding/golden_<format>.json must render byte for byte
// (V3 against Jinja2's rendering of the real chat_template; the others against an independent
// Python implementation of DeepSeek's reference encoders), and error cases must throw.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "encoding/chat_encoding.h"
#include "testing/big_file.h"

namespace deepinfer::encoding {
namespace {

const std::string kDataDir = DEEPINFER_TEST_DATA_DIR;

Json load_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return Json::parse(in);
}

ChatEncoder encoder_for(ChatFormat format) {
  if (format != ChatFormat::kV3) return ChatEncoder(format);
  return ChatEncoder(format, jinja_source_from_tokenizer_config(kDataDir + "/tokenizers/deepseek-v3/tokenizer_config.json"));
}

struct GoldenCount {
  int passed = 0;
  int errors = 0;
};

GoldenCount check_golden_file(const std::string& format_name) {
  Json golden = load_json(kDataDir + "/encoding/golden_" + format_name + ".json");
  ChatFormat format = parse_chat_format(golden["format"].get<std::string>());
  ChatEncoder encoder = encoder_for(format);
  GoldenCount count;
  for (const auto& test_case : golden["cases"]) {
    std::string name = test_case["name"].get<std::string>();
    SCOPED_TRACE(format_name + "/" + name);
    if (test_case.contains("error")) {
      EXPECT_THROW(encoder.render(chat_request_from_json(test_case["request"])), Error);
      ++count.errors;
      continue;
    }
    std::string actual = encoder.render(chat_request_from_json(test_case["request"])).text;
    std::string expected = test_case["expected"].get<std::string>();
    EXPECT_EQ(actual, expected);
    if (actual == expected) ++count.passed;
  }
  return count;
}

TEST(GoldenPrompts, V3MatchesJinja2) {
  GoldenCount count = check_golden_file("v3");
  EXPECT_GE(count.passed, 20);
}

TEST(GoldenPrompts, V31) {
  GoldenCount count = check_golden_file("v3.1");
  EXPECT_GE(count.passed, 10);
  EXPECT_GE(count.errors, 1);
}

TEST(GoldenPrompts, V32) {
  GoldenCount count = check_golden_file("v3.2");
  EXPECT_GE(count.passed, 15);
}

TEST(GoldenPrompts, V4) {
  GoldenCount count = check_golden_file("v4");
  EXPECT_GE(count.passed, 25);
}

TEST(GoldenPrompts, V41) {
  GoldenCount count = check_golden_file("v4.1");
  EXPECT_GE(count.passed, 30);
  EXPECT_GE(count.errors, 4);
}

TEST(ChatRequest, RejectsMalformedBodies) {
  EXPECT_THROW(chat_request_from_json(Json::array()), Error);
  EXPECT_THROW(chat_request_from_json(Json{{"messages", "hi"}}), Error);
  EXPECT_THROW(chat_request_from_json(Json{{"messages", Json::array({Json{{"content", "x"}}})}}), Error);
  EXPECT_THROW(chat_request_from_json(Json::parse(R"({"messages":[],"thinking":"yes"})")), Error);
  EXPECT_THROW(chat_request_from_json(Json::parse(R"({"messages":[],"tools":{}})")), Error);
}

TEST(ChatRequest, ReadsThinkingFromTemplateKwargs) {
  ChatRequest request =
      chat_request_from_json(Json::parse(R"({"messages":[],"chat_template_kwargs":{"thinking":true}})"));
  EXPECT_TRUE(request.thinking);
  EXPECT_TRUE(request.add_generation_prompt);
}

TEST(ChatFormat, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_chat_format("v4.1"), ChatFormat::kV4_1);
  EXPECT_EQ(parse_chat_format("deepseek_v32"), ChatFormat::kV3_2);
  EXPECT_EQ(parse_chat_format("V3.1"), ChatFormat::kV3_1);
  EXPECT_THROW(parse_chat_format("v5"), Error);
  // V3 needs its chat template. (void): clang reads `ChatEncoder(ChatFormat::kV3);` as a declaration.
  EXPECT_THROW((void)ChatEncoder(ChatFormat::kV3), Error);
}

TEST(ChatFormat, PicksFormatFromModelFolder) {
  auto dir = std::filesystem::temp_directory_path() / ("deepinfer_encoding_format_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* file, const std::string& text) { std::ofstream(dir / file) << text; };
  write("config.json", R"({"model_type": "deepseek_v4"})");
  EXPECT_EQ(chat_format_from_model_dir(dir), ChatFormat::kV4);
  write("config.json", R"({"model_type": "deepseek_v3"})");
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}</think>"})");
  EXPECT_EQ(chat_format_from_model_dir(dir), ChatFormat::kV3_1);
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}"})");
  EXPECT_EQ(chat_format_from_model_dir(dir), ChatFormat::kV3);
  write("config.json", R"({"model_type": "llama"})");
  EXPECT_THROW(chat_format_from_model_dir(dir), Error);
  std::filesystem::remove_all(dir);
}

// Crafted model folders: "a 2 GB string" (a sparse file) and deep nesting are one-line errors.
TEST(ChatFormat, HugeAndDeeplyNestedFilesAreOneLineErrors) {
  auto dir = std::filesystem::temp_directory_path() / ("deepinfer_encoding_crafted_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto expect_error = [](auto&& load, const std::string& mention) {
    try {
      load();
      ADD_FAILURE() << "accepted; expected an error mentioning " << mention;
    } catch (const Error& e) {
      EXPECT_TRUE(testing_util::is_one_line(e.what())) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  };
  testing_util::write_sparse_file(dir / "config.json", R"({"model_type": ")");
  expect_error([&] { chat_format_from_model_dir(dir); }, "(model config) is 2.0 GB, over the 16 MB limit");
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  std::ofstream(dir / "config.json", std::ios::trunc) << "{\"model_type\": " << nested << "}";
  expect_error([&] { chat_format_from_model_dir(dir); }, "levels deep");
  std::ofstream(dir / "tokenizer_config.json") << "{\"chat_template\": " << nested << "}";
  expect_error([&] { jinja_source_from_tokenizer_config(dir / "tokenizer_config.json"); }, "levels deep");
  testing_util::write_sparse_file(dir / "tokenizer_config.json", R"({"chat_template": ")");
  expect_error([&] { jinja_source_from_tokenizer_config(dir / "tokenizer_config.json"); }, "over the 64 MB limit");
  std::filesystem::remove_all(dir);
}

TEST(PythonJson, MatchesPythonDumps) {
  EXPECT_EQ(python_json_dumps(Json::parse(R"({"b": [1, 2.5, null, true], "a": "é\"\n\u0001"})")),
            "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\\u0001\"}");
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(python_float_repr(-2.5e-10), "-2.5e-10");
}

}  // namespace
}  // namespace deepinfer::encoding
