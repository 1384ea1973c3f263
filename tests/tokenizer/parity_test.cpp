// Parity with the Hugging Face `tokenizers` library: every corpus string must encode to the ids
// the npm package produced (tools/tokenizer_oracle/oracle.js) and decode to the same text.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const std::filesystem::path kDataDir = DEEPINFER_TEST_DATA_DIR;
const std::filesystem::path kModelsDir = DEEPINFER_MODELS_DIR;

std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path.string());
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

std::string ids_text(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

struct ParityCase {
  const char* name;
  std::filesystem::path model_dir;
};

class TokenizerParity : public testing::TestWithParam<ParityCase> {};

TEST_P(TokenizerParity, EveryCorpusStringMatchesHuggingFace) {
  const ParityCase& param = GetParam();
  const Tokenizer tokenizer = Tokenizer::from_model_dir(param.model_dir);
  const auto corpus = read_json_lines(kDataDir / "tokenizer" / "corpus.jsonl");
  const auto expected = read_json_lines(kDataDir / "tokenizer" / (std::string("expected_") + param.name + ".jsonl"));
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(corpus.size(), expected.size()) << "corpus and expected ids are out of sync; rerun the oracle";

  size_t encode_mismatches = 0, decode_mismatches = 0, round_trips = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto want_ids = expected[i].at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tokenizer.encode(text);
    if (ids != want_ids) {
      ++encode_mismatches;
      ADD_FAILURE() << param.name << " line " << i + 1 << " " << nlohmann::json(text).dump() << "\n  ours: " << ids_text(ids)
                    << "\n  HF:   " << ids_text(want_ids);
    }
    const std::string want_decoded = expected[i].at("decoded").get<std::string>();
    const std::string want_skip = expected[i].at("decoded_skip_special").get<std::string>();
    const std::string decoded = tokenizer.decode(want_ids);
    const std::string decoded_skip = tokenizer.decode(want_ids, /*skip_special_tokens=*/true);
    if (decoded != want_decoded || decoded_skip != want_skip) {
      ++decode_mismatches;
      ADD_FAILURE() << param.name << " line " << i + 1 << " decode differs\n  ours: " << nlohmann::json(decoded).dump()
                    << " / " << nlohmann::json(decoded_skip).dump() << "\n  HF:   " << nlohmann::json(want_decoded).dump()
                    << " / " << nlohmann::json(want_skip).dump();
    }
    if (want_decoded == text) {
      ++round_trips;
      EXPECT_EQ(tokenizer.decode(ids), text) << param.name << " line " << i + 1 << ": decode(encode(s)) != s";
    }
  }
  EXPECT_EQ(encode_mismatches, 0u);
  EXPECT_EQ(decode_mismatches, 0u);
  // Byte-level BPE round-trips everything; if this drops, the oracle data is suspect.
  EXPECT_GT(round_trips, corpus.size() * 9 / 10);
  std::cout << param.name << ": " << corpus.size() << " strings, " << encode_mismatches << " encode mismatches, "
            << decode_mismatches << " decode mismatches, " << round_trips << " round-trips checked\n";
}

INSTANTIATE_TEST_SUITE_P(BothTokenizers, TokenizerParity,
                         testing::Values(ParityCase{"deepseek-v3", kDataDir / "tokenizers" / "deepseek-v3"},
                                         ParityCase{"kjv-tiny-v4", kModelsDir / "kjv-tiny-v4"}),
                         [](const testing::TestParamInfo<ParityCase>& info) {
                           std::string name = info.param.name;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// Variants of the small tokenizer that switch on options the real ones leave off
// (tools/tokenizer_oracle/make_variants.js); checked on a third of the corpus plus flag probes.
class TokenizerVariantParity : public testing::TestWithParam<const char*> {};

TEST_P(TokenizerVariantParity, SubsetMatchesHuggingFace) {
  const std::string name = GetParam();
  const Tokenizer tokenizer = Tokenizer::from_file(kDataDir / "tokenizer" / "variants" / (name + ".json"));
  const auto corpus = read_json_lines(kDataDir / "tokenizer" / "corpus.jsonl");
  const auto expected = read_json_lines(kDataDir / "tokenizer" / ("expected_variant_" + name + ".jsonl"));
  ASSERT_GE(expected.size(), 900u);
  size_t mismatches = 0;
  for (const auto& entry : expected) {
    const size_t line = entry.at("line").get<size_t>();
    ASSERT_GE(line, 1u);
    ASSERT_LE(line, corpus.size());
    const std::string text = corpus[line - 1].get<std::string>();
    const auto want_ids = entry.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tokenizer.encode(text);
    const std::string decoded = tokenizer.decode(want_ids);
    const std::string decoded_skip = tokenizer.decode(want_ids, /*skip_special_tokens=*/true);
    if (ids != want_ids || decoded != entry.at("decoded").get<std::string>() ||
        decoded_skip != entry.at("decoded_skip_special").get<std::string>()) {
      ++mismatches;
      ADD_FAILURE() << name << " line " << line << " " << nlohmann::json(text).dump() << "\n  ours: " << ids_text(ids)
                    << " " << nlohmann::json(decoded).dump() << " / " << nlohmann::json(decoded_skip).dump()
                    << "\n  HF:   " << ids_text(want_ids) << " " << entry.at("decoded").dump() << " / "
                    << entry.at("decoded_skip_special").dump();
    }
  }
  EXPECT_EQ(mismatches, 0u);
  std::cout << "variant " << name << ": " << expected.size() << " strings, " << mismatches << " mismatches\n";
}

INSTANTIATE_TEST_SUITE_P(Variants, TokenizerVariantParity,
                         testing::Values("gpt2_style", "split_behaviors", "split_invert", "added_flags"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace deepinfer
