// `deepinfer generate --input`: the vLLM sampling fields per line. Guided decoding
// ("structured_outputs": json / regex / choice / grammar / json_object) gives outputs in the
// language, n > 1 lists its completions in "outputs", logprobs / prompt_logprobs appear when
// asked, and a bad field is a one-line error naming its line before any weights load.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace {

namespace fs = std::filesystem;
using namespace deepinfer::cli_test;
using nlohmann::json;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";

class GenerateSampling : public CliHarness {
 protected:
  GenerateSampling() : CliHarness("deepinfer_generate_sampling_test_") {}

  fs::path write(const std::string& name, const std::vector<std::string>& lines) const {
    const fs::path path = scratch_ / name;
    std::ofstream out(path, std::ios::binary);
    for (const auto& l : lines) out << l << "\n";
    return path;
  }
  std::vector<json> generate(const std::vector<std::string>& lines) const {
    const fs::path input = write("in.jsonl", lines), output = scratch_ / "out.jsonl";
    const auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string(),
                        "--seed", "5"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> out;
    for (const auto& line : lines_of(read_file(output))) out.push_back(json::parse(line));
    return out;
  }
  void expect_line_error(const std::string& line, const std::string& mention) const {
    const fs::path input = write("bad.jsonl", {R"({"prompt": "In the beginning"})", line});
    const fs::path output = scratch_ / "bad_out.jsonl";
    const auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string()});
    EXPECT_NE(r.exit_code, 0) << line;
    const auto err = lines_of(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_NE(err[0].find("line 2:"), std::string::npos) << err[0];
    EXPECT_NE(err[0].find(mention), std::string::npos) << "expected '" << mention << "' in: " << err[0];
    EXPECT_FALSE(fs::exists(output)) << "no work before every line is checked";
    EXPECT_EQ(r.err.find("loaded"), std::string::npos) << "weights were loaded before the error: " << r.err;
  }
};

TEST_F(GenerateSampling, StructuredOutputsPerLine) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"maxLength", 12}}},
                         {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 999}}}}},
                       {"required", {"name", "age"}},
                       {"additionalProperties", false}};
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i)
    lines.push_back(json{{"prompt", "And Adam lived"}, {"seed", i}, {"max_tokens", 300},
                         {"structured_outputs", {{"json", schema}}}}
                        .dump());
  lines.push_back(json{{"prompt", "Psalms 23:"}, {"seed", 1}, {"max_tokens", 50},
                       {"structured_outputs", {{"regex", "[1-9][0-9]?:[1-9] [a-z]{1,6}"}}}}
                      .dump());
  lines.push_back(json{{"prompt", "John 3:3 Jesus answered,"}, {"n", 3}, {"seed", 9}, {"logprobs", 2},
                       {"structured_outputs", {{"choice", {"yea", "nay", "verily"}}}}}
                      .dump());
  lines.push_back(json{{"prompt", "Genesis 1:3"}, {"max_tokens", 40},
                       {"structured_outputs", {{"grammar", "root ::= \"[\" [0-9] (\",\" [0-9]){0,3} \"]\""}}}}
                      .dump());
  const auto res = generate(lines);
  ASSERT_EQ(res.size(), lines.size());
  for (int i = 0; i < 3; ++i) {
    const json j = json::parse(res[i]["text"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(j.is_object()) << res[i]["text"];
    EXPECT_EQ(j.size(), 2u) << j.dump();
    EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 12 * 4) << j.dump();
    EXPECT_TRUE(j["age"].is_number_integer() && j["age"] >= 0 && j["age"] <= 999) << j.dump();
    EXPECT_EQ(res[i]["finish_reason"], "stop");
    EXPECT_FALSE(res[i].contains("outputs"));  // n = 1: the single-output fields, as before
  }
  EXPECT_TRUE(std::regex_match(res[3]["text"].get<std::string>(), std::regex("[1-9][0-9]?:[1-9] [a-z]{1,6}")))
      << res[3]["text"];
  // n = 3: an "outputs" array, each completion in the list, with one logprob entry per token.
  const json& choice = res[4];
  EXPECT_FALSE(choice.contains("text"));
  ASSERT_EQ(choice["outputs"].size(), 3u) << choice.dump();
  for (size_t k = 0; k < 3; ++k) {
    const json& c = choice["outputs"][k];
    EXPECT_EQ(c["index"], k);
    EXPECT_TRUE(std::set<std::string>({"yea", "nay", "verily"}).count(c["text"].get<std::string>())) << c.dump();
    EXPECT_EQ(c["finish_reason"], "stop");
    ASSERT_EQ(c["logprobs"].size(), c["token_ids"].size());
    for (size_t t = 0; t < c["token_ids"].size(); ++t) {
      EXPECT_EQ(c["logprobs"][t]["token_id"], c["token_ids"][t]);
      EXPECT_LE(c["logprobs"][t]["logprob"].get<double>(), 0.0);
      EXPECT_GE(c["logprobs"][t]["rank"].get<int64_t>(), 1);
      EXPECT_LE(c["logprobs"][t]["top_logprobs"].size(), 2u);
    }
  }
  EXPECT_TRUE(std::regex_match(res[5]["text"].get<std::string>(), std::regex("\\[[0-9](,[0-9]){0,3}\\]")))
      << res[5]["text"];
}

TEST_F(GenerateSampling, LogprobsAndPenaltyFields) {
  const auto res = generate({
      R"({"prompt": "In the beginning", "max_tokens": 6, "temperature": 0, "logprobs": 3, "prompt_logprobs": 1})",
      R"({"prompt": "In the beginning", "max_tokens": 6, "temperature": 0, "logit_bias": {"265": 50}})",
      R"({"prompt": "In the beginning", "max_tokens": 12, "min_tokens": 12, "temperature": 0.8, "min_p": 0.05, )"
      R"("presence_penalty": 0.5, "frequency_penalty": 0.3, "repetition_penalty": 1.2, "seed": 4})",
      R"({"prompt": "In the beginning", "max_tokens": 30, "temperature": 0, "stop": ["law"], )"
      R"("include_stop_str_in_output": true, "skip_special_tokens": false})",
      R"({"prompt": "In the beginning", "max_tokens": 30, "temperature": 0, "stop": ["law"]})",
  });
  ASSERT_EQ(res.size(), 5u);
  const json& lp = res[0];
  ASSERT_EQ(lp["logprobs"].size(), 6u);
  EXPECT_EQ(lp["logprobs"][0]["rank"], 1);  // greedy picks the most likely raw token
  EXPECT_EQ(lp["logprobs"][0]["top_logprobs"][0]["token_id"], lp["token_ids"][0]);
  ASSERT_EQ(lp["prompt_logprobs"].size(), lp["prompt_token_ids"].size());
  EXPECT_TRUE(lp["prompt_logprobs"][0].is_null());
  for (size_t k = 1; k < lp["prompt_token_ids"].size(); ++k)
    EXPECT_EQ(lp["prompt_logprobs"][k]["token_id"], lp["prompt_token_ids"][k]);
  EXPECT_FALSE(res[1].contains("logprobs"));
  EXPECT_EQ(res[1]["token_ids"], json(std::vector<int>(6, 265)));  // the bias wins every step
  EXPECT_EQ(res[2]["token_ids"].size(), 12u);
  // Greedy kjv writes "... because of the law, ...": the stop string is kept only when asked.
  const std::string kept = res[3]["text"], trimmed = res[4]["text"];
  EXPECT_EQ(res[3]["finish_reason"], "stop");
  EXPECT_EQ(kept, trimmed + "law");
}

TEST_F(GenerateSampling, BadFieldsAreErrorsNamingTheLine) {
  expect_line_error(R"({"prompt": "x", "n": 0})", "'n'");
  expect_line_error(R"({"prompt": "x", "n": 1.5})", "'n'");
  expect_line_error(R"({"prompt": "x", "min_p": 1.5})", "min_p");
  expect_line_error(R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty");
  expect_line_error(R"({"prompt": "x", "frequency_penalty": "a"})", "frequency_penalty");
  expect_line_error(R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty");
  expect_line_error(R"({"prompt": "x", "logit_bias": {"4096": 1}})", "logit_bias");
  expect_line_error(R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias");
  expect_line_error(R"({"prompt": "x", "logit_bias": [1]})", "logit_bias");
  expect_line_error(R"({"prompt": "x", "min_tokens": 100, "max_tokens": 10})", "min_tokens");
  expect_line_error(R"({"prompt": "x", "logprobs": 21})", "logprobs");
  expect_line_error(R"({"prompt": "x", "prompt_logprobs": -1})", "prompt_logprobs");
  expect_line_error(R"({"prompt": "x", "include_stop_str_in_output": "yes"})", "include_stop_str_in_output");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"regex": "(a"}})", "structured_outputs.regex");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"json": {"type": "strin"}}})", "structured_outputs.json");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"grammar": "root ::= nope"}})",
                    "structured_outputs.grammar");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"choice": []}})", "structured_outputs.choice");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"choice": [1]}})", "structured_outputs.choice");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"regex": "a", "json_object": true}})",
                    "structured_outputs");
  expect_line_error(R"({"prompt": "x", "structured_outputs": {"regexp": "a"}})", "structured_outputs.regexp");
  expect_line_error(R"({"prompt": "x", "structured_outputs": "a"})", "structured_outputs");
}

TEST_F(GenerateSampling, HelpListsTheFields) {
  const auto r = run({"generate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* field : {"min_p", "logit_bias", "logprobs", "prompt_logprobs", "structured_outputs", "choice",
                            "json_object", "\"outputs\""})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << "\n" << r.out;
}

}  // namespace
