// Guided decoding and logprobs through the public LLM on the bundled kjv model, sampled at
// temperature 1 with 20 different seeds per grammar. Every output is checked by an independent
// validator: a JSON Schema by nlohmann::json plus a hand-written check of this test's schema, a
// regex by std::regex_match, a choice by membership, a GBNF grammar by a hand-written recogniser.
// The grammars are bounded, so the mask itself forces termination: every output ends with
// finish_reason "stop" well inside max_tokens. Also: logprobs of guided rows, prompt logprobs
// against the model's own all-rows forward, n = 2 through the public API.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/llm.h"
#include "model/model.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";
constexpr int kSamples = 20;
constexpr int64_t kMaxTokens = 400;  // far above what any of these grammars can take

LLM& kjv() {
  static LLM llm(kKjv, EngineConfig{.max_num_seqs = 64, .seed = 2024});
  return llm;
}

// kSamples sampled generations of `prompt` under `so`, seeds 1000.., temperature 1.
std::vector<RequestOutput> sample(const StructuredOutputs& so, const std::string& prompt) {
  std::vector<SamplingParams> params;
  for (int i = 0; i < kSamples; ++i) {
    SamplingParams p;
    p.temperature = 1.0;
    p.seed = 1000 + static_cast<uint64_t>(i);
    p.max_tokens = kMaxTokens;
    p.structured_outputs = so;
    params.push_back(p);
  }
  return kjv().generate(std::vector<Prompt>(kSamples, Prompt(prompt)), params);
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void expect_stopped_by_grammar(const CompletionOutput& c) {
  EXPECT_EQ(c.finish_reason, "stop") << "the grammar must end the output: " << c.text;
  EXPECT_LT(static_cast<int64_t>(c.token_ids.size()), kMaxTokens);
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "book": {"enum": ["Genesis", "Exodus", "Psalms", "John"]},
    "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
    "text": {"type": "string", "maxLength": 24},
    "inspired": {"type": "boolean"}
  },
  "required": ["book", "chapter", "text", "inspired"],
  "additionalProperties": false
})";

// This schema checked by hand, independently of the grammar compiler.
std::string schema_violation(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "not JSON";
  if (!j.is_object()) return "not an object";
  if (j.size() != 4) return "expected exactly 4 members";
  static const std::set<std::string> books = {"Genesis", "Exodus", "Psalms", "John"};
  if (!j.contains("book") || !j["book"].is_string() || !books.count(j["book"].get<std::string>())) return "book";
  if (!j.contains("chapter") || !j["chapter"].is_number_integer()) return "chapter type";
  if (j["chapter"].get<int64_t>() < 1 || j["chapter"].get<int64_t>() > 150) return "chapter range";
  if (!j.contains("text") || !j["text"].is_string() || code_points(j["text"].get<std::string>()) > 24) return "text";
  if (!j.contains("inspired") || !j["inspired"].is_boolean()) return "inspired";
  return "";
}

TEST(GuidedDecodingKjv, EveryJsonSchemaSampleValidates) {
  StructuredOutputs so;
  so.json = kSchema;
  const auto outs = sample(so, "Genesis 1:1 In the beginning");
  std::set<std::string> distinct;
  for (const auto& out : outs) {
    const auto& c = out.outputs.at(0);
    EXPECT_EQ(schema_violation(c.text), "") << "seed " << c.seed << ": " << c.text;
    expect_stopped_by_grammar(c);
    distinct.insert(c.text);
  }
  EXPECT_GT(distinct.size(), 10u) << "temperature 1 with 20 seeds should give varied outputs";
}

TEST(GuidedDecodingKjv, EveryRegexSampleMatches) {
  const std::string pattern = "(Genesis|Exodus|Psalms) [1-9][0-9]?:[1-9][0-9]? [A-Za-z ,;]{1,30}\\.";
  StructuredOutputs so;
  so.regex = pattern;
  const std::regex re(pattern);
  for (const auto& out : sample(so, "Psalms 23:1 The LORD is my shepherd; I shall not want.\n")) {
    const auto& c = out.outputs.at(0);
    EXPECT_TRUE(std::regex_match(c.text, re)) << "seed " << c.seed << ": " << c.text;
    expect_stopped_by_grammar(c);
  }
}

TEST(GuidedDecodingKjv, EveryChoiceSampleIsOneOfTheChoices) {
  const std::vector<std::string> choices = {"yea", "nay", "verily, verily", "Amen."};
  StructuredOutputs so;
  so.choice = choices;
  std::set<std::string> seen;
  for (const auto& out : sample(so, "John 3:3 Jesus answered and said unto him,")) {
    const auto& c = out.outputs.at(0);
    EXPECT_NE(std::find(choices.begin(), choices.end(), c.text), choices.end()) << "seed " << c.seed << ": " << c.text;
    expect_stopped_by_grammar(c);
    seen.insert(c.text);
  }
  EXPECT_GE(seen.size(), 2u);
}

// root ::= verse ("; " verse)? "."   verse ::= [a-z]+ (" " [a-z]+){0,4}   (words of <= 8 letters)
TEST(GuidedDecodingKjv, EveryGbnfSampleIsInTheLanguage) {
  StructuredOutputs so;
  so.grammar = "root ::= verse (\"; \" verse)? \".\"\nverse ::= word (\" \" word){0,4}\nword ::= [a-z]{1,8}\n";
  const std::regex language("[a-z]{1,8}( [a-z]{1,8}){0,4}(; [a-z]{1,8}( [a-z]{1,8}){0,4})?\\.");
  for (const auto& out : sample(so, "Genesis 1:3 And God said,")) {
    const auto& c = out.outputs.at(0);
    EXPECT_TRUE(std::regex_match(c.text, language)) << "seed " << c.seed << ": " << c.text;
    expect_stopped_by_grammar(c);
  }
}

TEST(GuidedDecodingKjv, JsonObjectOutputsParse) {
  // Any JSON object is unbounded, so only check what finished; compact whitespace keeps it short.
  StructuredOutputs so;
  so.json_object = true;
  so.disable_any_whitespace = true;
  int finished = 0;
  for (const auto& out : sample(so, "Exodus 20:3")) {
    const auto& c = out.outputs.at(0);
    if (c.finish_reason != "stop") continue;
    ++finished;
    EXPECT_TRUE(json::parse(c.text, nullptr, false).is_object()) << c.text;
  }
  EXPECT_GT(finished, 0);
}

TEST(GuidedDecodingKjv, GuidedLogprobsAreOfTheMaskedRow) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 5;
  p.max_tokens = 60;
  p.logprobs = 5;
  p.return_logits = true;
  p.structured_outputs.regex = "[0-9]{2,4}";
  const auto out = kjv().generate({"Psalms 119:"}, p).at(0).outputs.at(0);
  const auto vocab = static_cast<size_t>(kjv().vocab_size());
  ASSERT_EQ(out.logprobs.size(), out.token_ids.size());
  ASSERT_EQ(out.logits.size(), out.token_ids.size() * vocab);
  double cumulative = 0;
  for (size_t k = 0; k < out.token_ids.size(); ++k) {
    const float* row = out.logits.data() + k * vocab;
    double max_value = -INFINITY, sum = 0;
    size_t allowed = 0;
    for (size_t i = 0; i < vocab; ++i) max_value = std::max<double>(max_value, row[i]);
    for (size_t i = 0; i < vocab; ++i) {
      sum += std::exp(row[i] - max_value);
      allowed += std::isfinite(row[i]);
    }
    const auto& t = out.logprobs[k];
    EXPECT_EQ(t.token_id, out.token_ids[k]);
    EXPECT_NEAR(t.logprob, row[t.token_id] - max_value - std::log(sum), 1e-4);
    EXPECT_LT(allowed, vocab) << "the row is masked by the grammar";
    EXPECT_EQ(t.top.size(), std::min<size_t>(5, allowed));  // masked tokens never listed
    cumulative += t.logprob;
  }
  ASSERT_TRUE(out.cumulative_logprob.has_value());
  EXPECT_NEAR(*out.cumulative_logprob, cumulative, 1e-3);
  EXPECT_EQ(out.finish_reason, "stop");
}

TEST(GuidedDecodingKjv, PromptLogprobsEqualTheModelsAllRowsForward) {
  const std::string text = "Genesis 1:1 In the beginning God created the heaven and the earth.";
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 2;
  p.prompt_logprobs = 3;
  const auto out = kjv().generate({text}, p).at(0);
  const auto& ids = out.prompt_token_ids;
  ASSERT_EQ(out.prompt_logprobs.size(), ids.size());
  EXPECT_FALSE(out.prompt_logprobs[0].has_value());

  const auto model = model::load_model(kKjv, {});
  auto state = model->new_sequence();
  std::vector<float> logits;
  model->forward(*state, ids, logits, /*all_logits=*/true);
  const auto vocab = static_cast<size_t>(model->vocab_size());
  for (size_t k = 1; k < ids.size(); ++k) {
    const float* row = logits.data() + (k - 1) * vocab;
    double max_value = -INFINITY, sum = 0;
    for (size_t i = 0; i < vocab; ++i) max_value = std::max<double>(max_value, row[i]);
    for (size_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - max_value);
    ASSERT_TRUE(out.prompt_logprobs[k].has_value());
    EXPECT_EQ(out.prompt_logprobs[k]->token_id, ids[k]);
    EXPECT_NEAR(out.prompt_logprobs[k]->logprob, row[ids[k]] - max_value - std::log(sum), 1e-3) << "token " << k;
    EXPECT_EQ(out.prompt_logprobs[k]->top.size(), 3u);
  }
}

TEST(GuidedDecodingKjv, TwoCompletionsPerPrompt) {
  SamplingParams p;
  p.n = 2;
  p.temperature = 1.0;
  p.seed = 77;
  p.max_tokens = 24;
  p.ignore_eos = true;
  std::vector<StreamEvent> events;
  const auto out = kjv().generate({"And God said"}, p, [&](const StreamEvent& e) { events.push_back(e); }).at(0);
  ASSERT_EQ(out.outputs.size(), 2u);
  EXPECT_EQ(out.outputs[0].index, 0u);
  EXPECT_EQ(out.outputs[1].index, 1u);
  EXPECT_EQ(out.outputs[0].seed, 77u);
  EXPECT_EQ(out.outputs[1].seed, 78u);
  EXPECT_NE(out.outputs[0].token_ids, out.outputs[1].token_ids);
  // The streamed events carry the completion index and end with one request_finished.
  size_t finished = 0, request_finished = 0;
  std::vector<int32_t> streamed[2];
  for (const auto& e : events) {
    streamed[e.output_index].insert(streamed[e.output_index].end(), e.new_token_ids.begin(), e.new_token_ids.end());
    finished += e.finished;
    request_finished += e.request_finished;
  }
  EXPECT_EQ(finished, 2u);
  EXPECT_EQ(request_finished, 1u);
  EXPECT_TRUE(events.back().request_finished);
  EXPECT_EQ(streamed[0], out.outputs[0].token_ids);
  EXPECT_EQ(streamed[1], out.outputs[1].token_ids);
  // Completion 1 equals a single request seeded with 78.
  p.n = 1;
  p.seed = 78;
  EXPECT_EQ(kjv().generate({"And God said"}, p).at(0).outputs.at(0).token_ids, out.outputs[1].token_ids);
}

TEST(GuidedDecodingKjv, APromptEndingInsideThinkingStartsTheGrammarAfterEndOfThinking) {
  // kjv's ids 5 / 6 are <think> / </think>. A bias makes the model close its thinking at once; the
  // grammar then takes over (and masks </think>, which its language does not contain).
  std::vector<int32_t> prompt = kjv().encode("Psalms 90:10 The days of our years are");
  prompt.push_back(5);
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 3;
  p.max_tokens = 40;
  p.logit_bias = {{6, 100.0}};
  p.structured_outputs.regex = "[0-9]{3}";
  const auto thinking = kjv().generate({Prompt(prompt)}, p).at(0).outputs.at(0);
  ASSERT_GE(thinking.token_ids.size(), 2u);
  EXPECT_EQ(thinking.token_ids[0], 6);  // free before </think>
  EXPECT_TRUE(std::regex_match(thinking.text, std::regex("[0-9]{3}"))) << thinking.text;
  EXPECT_EQ(thinking.finish_reason, "stop");
  // Without the open <think>, the grammar applies from the first token: </think> is masked.
  prompt.back() = 6;
  const auto plain = kjv().generate({Prompt(prompt)}, p).at(0).outputs.at(0);
  EXPECT_NE(plain.token_ids.at(0), 6);
  EXPECT_TRUE(std::regex_match(plain.text, std::regex("[0-9]{3}"))) << plain.text;
}

TEST(GuidedDecodingKjv, InvalidSpecsFailNamingTheField) {
  auto message = [](SamplingParams p) -> std::string {
    try {
      kjv().generate({"x"}, p);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  SamplingParams regex;
  regex.structured_outputs.regex = "(unclosed";
  EXPECT_NE(message(regex).find("structured_outputs.regex"), std::string::npos) << message(regex);
  SamplingParams schema;
  schema.structured_outputs.json = R"({"type": "object", "minProperties": 2})";
  EXPECT_NE(message(schema).find("structured_outputs.json"), std::string::npos) << message(schema);
  SamplingParams two;
  two.structured_outputs.regex = "a";
  two.structured_outputs.choice = std::vector<std::string>{"a"};
  EXPECT_NE(message(two).find("structured_outputs"), std::string::npos);
  SamplingParams bias;
  bias.logit_bias = {{static_cast<int32_t>(kjv().vocab_size()), 1.0}};
  EXPECT_NE(message(bias).find("logit_bias"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
