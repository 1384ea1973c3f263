// Guided decoding in the sampling layer, on the bundled kjv tokenizer: specs compile once through
// the bounded (LRU) cache, bad specs fail naming the field, a choice list is exactly its strings,
// the mask applies from the first token or, when the prompt ends inside <think>, only after the
// model writes </think>, and the grammar's end is reported.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/guided_decoding.h"
#include "sampling/sequence_sampler.h"
#include "structured/compiled_grammar.h"
#include "tokenizer/tokenizer.h"

// Designated initialisers name only the fields a test cares about.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::sampling {
namespace {

const std::filesystem::path kKjv = std::filesystem::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";

const Tokenizer& kjv_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_model_dir(kKjv);
  return tokenizer;
}

StructuredOutputs regex(std::string pattern) {
  StructuredOutputs so;
  so.regex = std::move(pattern);
  return so;
}

std::string error_of(GrammarCache& cache, const StructuredOutputs& so) {
  try {
    cache.get(so);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GuidedDecoding, CompilesEachSpecOnceAndBoundsTheCache) {
  GrammarCache cache(kjv_tokenizer(), /*capacity=*/2);
  const auto a = cache.get(regex("[0-9]{1,3}"));
  EXPECT_EQ(cache.get(regex("[0-9]{1,3}")), a);  // the same compiled grammar
  EXPECT_EQ(cache.compiler().cache_hits(), 1u);
  cache.get(regex("(yes|no)"));
  cache.get(regex("[a-z]+"));  // a third spec: the least recently used one ("[0-9]{1,3}") goes
  EXPECT_EQ(cache.compiler().cache_size(), 2u);
  EXPECT_EQ(cache.compiler().cache_evictions(), 1u);
  const auto again = cache.get(regex("[0-9]{1,3}"));
  EXPECT_NE(again, a);
  EXPECT_EQ(cache.compiler().cache_hits(), 1u);
  EXPECT_EQ(cache.compiler().cache_size(), 2u);
}

TEST(GuidedDecoding, BadSpecsNameTheField) {
  GrammarCache cache(kjv_tokenizer());
  EXPECT_NE(error_of(cache, regex("(ab")).find("structured_outputs.regex"), std::string::npos);
  StructuredOutputs json;
  json.json = R"({"type": "object", "properties": {"a": {"type": "strin"}}})";
  EXPECT_NE(error_of(cache, json).find("structured_outputs.json"), std::string::npos) << error_of(cache, json);
  json.json = "{not json";
  EXPECT_NE(error_of(cache, json).find("structured_outputs.json"), std::string::npos);
  StructuredOutputs gbnf;
  gbnf.grammar = "root ::= missing";
  EXPECT_NE(error_of(cache, gbnf).find("structured_outputs.grammar"), std::string::npos) << error_of(cache, gbnf);
  // The front-end check (used before a model loads) gives the same errors.
  EXPECT_THROW(check_structured_outputs(regex("(ab")), Error);
  EXPECT_NO_THROW(check_structured_outputs(regex("ab")));
}

TEST(GuidedDecoding, ChoiceIsExactlyOneOfTheStrings) {
  StructuredOutputs so;
  so.choice = std::vector<std::string>{"yes", "no", "maybe so", "a|b*"};  // no regex meaning
  const auto grammar = structured::compile_grammar(grammar_spec(so));
  for (const char* s : {"yes", "no", "maybe so", "a|b*"}) EXPECT_TRUE(grammar->accepts(s)) << s;
  for (const char* s : {"", "ye", "yes ", "maybe", "a", "abb", "nono"}) EXPECT_FALSE(grammar->accepts(s)) << s;
}

TEST(GuidedDecoding, ThinkingPromptsStartTheGrammarAfterTheEndOfThinking) {
  const Tokenizer& tok = kjv_tokenizer();
  const ReasoningTokens reasoning = ReasoningTokens::of(tok);
  ASSERT_TRUE(reasoning.start && reasoning.end);
  const int32_t think = *reasoning.start, end = *reasoning.end;
  EXPECT_TRUE(reasoning.prompt_in_thinking(std::vector<int32_t>{0, 40, think}));
  EXPECT_TRUE(reasoning.prompt_in_thinking(std::vector<int32_t>{0, think, end, 7, think, 40}));
  EXPECT_FALSE(reasoning.prompt_in_thinking(std::vector<int32_t>{0, think, 40, end}));
  EXPECT_FALSE(reasoning.prompt_in_thinking(std::vector<int32_t>{0, 40, 41}));

  GrammarCache cache(tok);
  const auto digits = tok.encode("7");
  ASSERT_EQ(digits.size(), 1u);
  const std::vector<float> row(tok.vocab_size(), 0.0f);
  SamplingScratch scratch;
  SamplingParams params;
  params.structured_outputs = regex("[0-9]+");
  auto allowed = [&](SequenceSampler& s) {
    size_t n = 0;
    for (float v : s.process(row, 0, scratch)) n += std::isfinite(v);
    return n;
  };
  // Thinking: free text (special tokens like </think> included) until </think>, then digits only.
  SequenceSampler thinking(params, std::vector<int32_t>{0, think}, {.grammar = cache.get(params.structured_outputs),
                                                                     .grammar_after_token = end});
  EXPECT_FALSE(thinking.grammar_active());
  EXPECT_EQ(allowed(thinking), row.size());
  thinking.accept(40);
  EXPECT_EQ(allowed(thinking), row.size());
  thinking.accept(end);
  EXPECT_TRUE(thinking.grammar_active());
  const size_t after = allowed(thinking);
  EXPECT_LT(after, 100u);
  EXPECT_GT(after, 0u);
  EXPECT_TRUE(std::isfinite(thinking.process(row, 0, scratch)[static_cast<size_t>(digits[0])]));
  EXPECT_FALSE(std::isfinite(thinking.process(row, 0, scratch)[static_cast<size_t>(end)]));

  // No thinking: the grammar applies at once; EOS is allowed only once it can end, and accepting
  // it finishes the grammar.
  SequenceSampler plain(params, std::vector<int32_t>{0, 40}, {.grammar = cache.get(params.structured_outputs)});
  EXPECT_TRUE(plain.grammar_active());
  const int32_t eos = *tok.eos_id();
  EXPECT_FALSE(std::isfinite(plain.process(row, 0, scratch)[static_cast<size_t>(eos)]));
  plain.accept(digits[0]);
  EXPECT_TRUE(std::isfinite(plain.process(row, 1, scratch)[static_cast<size_t>(eos)]));
  EXPECT_FALSE(plain.grammar_finished());
  plain.accept(eos);
  EXPECT_TRUE(plain.grammar_finished());
  EXPECT_THROW(plain.accept(digits[0]), Error);  // nothing follows a complete output
}

TEST(GuidedDecoding, MinTokensYieldsWhenTheGrammarCanOnlyEnd) {
  const Tokenizer& tok = kjv_tokenizer();
  GrammarCache cache(tok);
  SamplingParams params{.temperature = 0.0, .max_tokens = 8};
  params.min_tokens = 4;
  params.structured_outputs = regex("7");
  const auto seven = tok.encode("7");
  ASSERT_EQ(seven.size(), 1u);
  const int32_t eos = *tok.eos_id();
  SequenceSampler s(params, std::vector<int32_t>{0},
                    {.stop_ids = {eos}, .grammar = cache.get(params.structured_outputs)});
  const std::vector<float> row(tok.vocab_size(), 0.0f);
  Sampler sampler;
  SamplingScratch scratch;
  EXPECT_EQ(s.sample(row, 0, sampler, scratch).token, seven[0]);
  s.accept(seven[0]);
  // Only EOS is left: min_tokens cannot mask it (nothing would remain to sample).
  EXPECT_EQ(s.sample(row, 1, sampler, scratch).token, eos);
}

}  // namespace
}  // namespace deepinfer::sampling
