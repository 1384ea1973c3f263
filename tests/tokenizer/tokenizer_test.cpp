// Loading errors, the public API on the real tokenizers, and small hand-checked encodings.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "testing/big_file.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const std::filesystem::path kDataDir = DEEPINFER_TEST_DATA_DIR;
const std::filesystem::path kModelsDir = DEEPINFER_MODELS_DIR;
const std::filesystem::path kDeepSeekDir = kDataDir / "tokenizers" / "deepseek-v3";

// A scratch folder per test, removed afterwards.
class ScratchDir : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("deepinfer_tok_") + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& content) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::filesystem::path write_json(const std::string& name, const nlohmann::json& content) {
    return write(name, content.dump());
  }
  std::filesystem::path dir_;
};

// A character-level BPE (no byte-level steps): a, b, c and merges towards "abc".
nlohmann::json tiny_tokenizer() {
  return nlohmann::json::parse(R"({
    "normalizer": null, "pre_tokenizer": null, "decoder": null, "added_tokens": [],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
              "merges": ["a b", "ab c"]}})");
}

// Runs `load` and checks it throws deepinfer::Error whose message contains every `needle`.
template <typename Load>
void expect_load_error(Load load, std::initializer_list<std::string> needles) {
  try {
    load();
    ADD_FAILURE() << "expected deepinfer::Error";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

using TokenizerLoading = ScratchDir;

TEST_F(TokenizerLoading, MissingFileNamesThePath) {
  const auto path = dir_ / "nope" / "tokenizer.json";
  expect_load_error([&] { Tokenizer::from_file(path); }, {"cannot open", path.string()});
  expect_load_error([&] { Tokenizer::from_model_dir(dir_ / "nope"); }, {"cannot open"});
}

TEST_F(TokenizerLoading, MalformedJsonIsRejected) {
  const auto path = write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {)");
  expect_load_error([&] { Tokenizer::from_file(path); }, {"not valid JSON", path.string()});
}

TEST_F(TokenizerLoading, UnknownModelTypeIsRejected) {
  auto config = tiny_tokenizer();
  config["model"]["type"] = "WordPiece";
  expect_load_error([&] { Tokenizer::from_file(write_json("t.json", config)); }, {"BPE", "WordPiece"});
}

TEST_F(TokenizerLoading, MissingModelIsRejected) {
  expect_load_error([&] { Tokenizer::from_file(write("t.json", R"({"vocab": {}})")); }, {"model"});
}

TEST_F(TokenizerLoading, UnsupportedNormalizerIsRejected) {
  auto config = tiny_tokenizer();
  config["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  expect_load_error([&] { Tokenizer::from_file(write_json("t.json", config)); }, {"normalizer", "NFC"});
}

TEST_F(TokenizerLoading, UnsupportedPreTokenizerAndBehaviourAreRejected) {
  auto config = tiny_tokenizer();
  config["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_load_error([&] { Tokenizer::from_file(write_json("a.json", config)); }, {"pre_tokenizer", "Whitespace"});
  config["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}, {"invert", false}};
  expect_load_error([&] { Tokenizer::from_file(write_json("b.json", config)); }, {"behavior", "Sideways"});
  config["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_load_error([&] { Tokenizer::from_file(write_json("c.json", config)); }, {"regex", "(unclosed"});
  config["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers",
                              {{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}},
                               {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Isolated"}}}}};
  expect_load_error([&] { Tokenizer::from_file(write_json("d.json", config)); }, {"follows ByteLevel"});
}

TEST_F(TokenizerLoading, UnsupportedDecoderPostProcessorAndBpeOptionsAreRejected) {
  auto config = tiny_tokenizer();
  config["decoder"] = {{"type", "WordPiece"}};
  expect_load_error([&] { Tokenizer::from_file(write_json("a.json", config)); }, {"decoder", "WordPiece"});
  config = tiny_tokenizer();
  config["post_processor"] = {{"type", "TemplateProcessing"}};
  expect_load_error([&] { Tokenizer::from_file(write_json("b.json", config)); }, {"post_processor", "TemplateProcessing"});
  config = tiny_tokenizer();
  config["model"]["dropout"] = 0.1;
  expect_load_error([&] { Tokenizer::from_file(write_json("c.json", config)); }, {"dropout"});
}

TEST_F(TokenizerLoading, BadMergesAreRejected) {
  auto config = tiny_tokenizer();
  config["model"]["merges"] = {"a z"};
  expect_load_error([&] { Tokenizer::from_file(write_json("a.json", config)); }, {"merge 0", "\"z\""});
  config["model"]["merges"] = {"abc"};
  expect_load_error([&] { Tokenizer::from_file(write_json("b.json", config)); }, {"merge 0", "one space"});
  config["model"]["merges"] = {{"a"}};
  expect_load_error([&] { Tokenizer::from_file(write_json("c.json", config)); }, {"merge 0"});
}

TEST_F(TokenizerLoading, ConfigBosMustBeAToken) {
  write_json("tokenizer.json", tiny_tokenizer());
  write_json("tokenizer_config.json", {{"bos_token", "<s>"}, {"add_bos_token", true}});
  expect_load_error([&] { Tokenizer::from_model_dir(dir_); }, {"bos_token", "<s>"});
}

// Crafted files: "a 2 GB string" (a sparse file) is refused from its size, deep nesting by depth.
TEST_F(TokenizerLoading, HugeAndDeeplyNestedFilesAreOneLineErrors) {
  using testing_util::is_one_line;
  testing_util::write_sparse_file(dir_ / "tokenizer.json", R"({"model": {"type": ")");
  expect_load_error([&] { Tokenizer::from_model_dir(dir_); },
                    {"tokenizer.json (tokenizer) is 2.0 GB, over the 512 MB limit"});
  write_json("tokenizer.json", tiny_tokenizer());
  testing_util::write_sparse_file(dir_ / "tokenizer_config.json", R"({"chat_template": ")");
  expect_load_error([&] { Tokenizer::from_model_dir(dir_); }, {"tokenizer_config.json", "over the 64 MB limit"});
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  write("tokenizer_config.json", "{\"bos_token\": " + nested + "}");
  expect_load_error([&] { Tokenizer::from_model_dir(dir_); }, {"tokenizer_config.json", "levels deep"});
  write("tokenizer.json", "{\"normalizer\": " + nested + "}");
  expect_load_error([&] { Tokenizer::from_model_dir(dir_); }, {"tokenizer.json", "levels deep"});
  try {
    Tokenizer::from_model_dir(dir_);
  } catch (const Error& e) {
    EXPECT_TRUE(is_one_line(e.what())) << e.what();
  }
}

TEST_F(TokenizerLoading, BothMergeFormsAndConfigForms) {
  auto pairs = tiny_tokenizer();
  pairs["model"]["merges"] = nlohmann::json::parse(R"([["a", "b"], ["ab", "c"]])");
  const Tokenizer pair_form = Tokenizer::from_file(write_json("pairs.json", pairs));
  write_json("tokenizer.json", tiny_tokenizer());
  write_json("tokenizer_config.json", {{"bos_token", {{"content", "c"}}}, {"eos_token", "b"}, {"add_bos_token", true}});
  const Tokenizer tokenizer = Tokenizer::from_model_dir(dir_);
  // Expected ids checked against the npm tokenizers package on the same JSON.
  for (const Tokenizer* t : {&tokenizer, &pair_form}) {
    EXPECT_EQ(t->encode("abcab"), (std::vector<int32_t>{4, 3}));
    EXPECT_EQ(t->encode("cba"), (std::vector<int32_t>{2, 1, 0}));
    EXPECT_EQ(t->encode("axb"), (std::vector<int32_t>{3}));  // no unk_token: "x" is dropped, a+b still merge
  }
  EXPECT_EQ(tokenizer.bos_id(), 2);
  EXPECT_EQ(tokenizer.eos_id(), 1);
  EXPECT_TRUE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.encode_with_bos("ab"), (std::vector<int32_t>{2, 3}));
  // No decoder: HF joins token strings with spaces.
  const std::vector<int32_t> ids{4, 3, 2};
  EXPECT_EQ(tokenizer.decode(ids), "abc ab c");
  EXPECT_EQ(tokenizer.vocab_size(), 5u);
}

TEST(Tokenizer, DeepSeekV3Api) {
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kDeepSeekDir);
  std::ifstream file(kDeepSeekDir / "tokenizer.json");
  const auto json = nlohmann::json::parse(file);
  int32_t max_id = 0;
  for (const auto& token : json["added_tokens"]) max_id = std::max(max_id, token["id"].get<int32_t>());
  EXPECT_EQ(tokenizer.vocab_size(), static_cast<size_t>(max_id) + 1);

  const auto the = tokenizer.token_to_id("Ġthe");
  ASSERT_TRUE(the.has_value());
  EXPECT_EQ(*the, json["model"]["vocab"]["Ġthe"].get<int32_t>());
  EXPECT_EQ(tokenizer.token_string(*the), "Ġthe");
  EXPECT_EQ(tokenizer.token_bytes(*the), " the");
  EXPECT_EQ(tokenizer.token_bytes(-1), "");
  EXPECT_EQ(tokenizer.token_string(1 << 30), "");
  EXPECT_FALSE(tokenizer.token_to_id("definitely not a token").has_value());

  EXPECT_EQ(tokenizer.bos_id(), 0);
  EXPECT_EQ(tokenizer.eos_id(), 1);
  EXPECT_TRUE(tokenizer.add_bos());
  EXPECT_TRUE(tokenizer.is_special(0));
  EXPECT_EQ(tokenizer.token_bytes(0), "<｜begin▁of▁sentence｜>");
  const auto user = tokenizer.token_to_id("<｜User｜>");
  ASSERT_TRUE(user.has_value());
  EXPECT_FALSE(tokenizer.is_special(*user));  // an added token, but not marked special
  EXPECT_FALSE(tokenizer.is_special(*the));

  const std::vector<int32_t> ids = tokenizer.encode("Hello world");
  ASSERT_FALSE(ids.empty());
  std::vector<int32_t> with_bos = tokenizer.encode_with_bos("Hello world");
  ASSERT_EQ(with_bos.size(), ids.size() + 1);
  EXPECT_EQ(with_bos[0], 0);
  EXPECT_EQ(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()), ids);
  EXPECT_EQ(tokenizer.decode(with_bos), "<｜begin▁of▁sentence｜>Hello world");
  EXPECT_EQ(tokenizer.decode(with_bos, /*skip_special_tokens=*/true), "Hello world");
  EXPECT_TRUE(tokenizer.encode("").empty());

  // Unknown ids are skipped, as HF does.
  std::vector<int32_t> with_unknown = ids;
  with_unknown.push_back(-7);
  with_unknown.push_back(1 << 30);
  EXPECT_EQ(tokenizer.decode(with_unknown), "Hello world");
}

TEST(Tokenizer, FromFileHasNoBos) {
  const Tokenizer tokenizer = Tokenizer::from_file(kModelsDir / "kjv-tiny-v4" / "tokenizer.json");
  EXPECT_FALSE(tokenizer.bos_id().has_value());
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.encode_with_bos("In the beginning"), tokenizer.encode("In the beginning"));
  const Tokenizer with_config = Tokenizer::from_model_dir(kModelsDir / "kjv-tiny-v4");
  EXPECT_EQ(with_config.bos_id(), 0);  // bos_token given as a plain string
  EXPECT_EQ(with_config.eos_id(), 1);
}

TEST(Tokenizer, InvalidUtf8InputIsRejected) {
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kModelsDir / "kjv-tiny-v4");
  expect_load_error([&] { tokenizer.encode("abc\xE4\xBD"); }, {"UTF-8", "offset 3"});
  expect_load_error([&] { tokenizer.encode("\xFF"); }, {"0xFF", "offset 0"});
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kDeepSeekDir);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("sample " + std::to_string(i * 7919) + " 你好 <｜User｜> wörld " + std::string(i % 5, ' '));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& text : texts) expected.push_back(tokenizer.encode(text));
  auto check = [&](std::vector<int>& failures) {
    for (int round = 0; round < 5; ++round)
      for (size_t i = 0; i < texts.size(); ++i)
        if (tokenizer.encode(texts[i]) != expected[i]) failures.push_back(static_cast<int>(i));
  };
  std::vector<int> failures_a, failures_b;
  std::thread a(check, std::ref(failures_a)), b(check, std::ref(failures_b));
  a.join();
  b.join();
  EXPECT_TRUE(failures_a.empty());
  EXPECT_TRUE(failures_b.empty());
}

}  // namespace
}  // namespace deepinfer
