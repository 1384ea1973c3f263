#include <gtest/gtest.h>

#include "structured/ebnf.h"
#include "structured/regex.h"
#include "test_vocab.h"

namespace deepinfer::structured {
namespace {

using testing::brute_force_mask;
using testing::synthetic_vocab;

std::shared_ptr<const TokenGrammar> token_grammar(const GrammarSpec& spec) {
  static GrammarCompiler compiler(synthetic_vocab());
  return compiler.compile(spec);
}

std::vector<GrammarSpec> specs() {
  JsonSchemaOptions compact{JsonSchemaOptions::Whitespace::kCompact, 0};
  return {
      {GrammarKind::kRegex, "[a-c]+(x|yz)?", {}},
      {GrammarKind::kRegex, "(ab|ba)*€é?", {}},
      {GrammarKind::kEbnf, "root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= \"a\" | root", {}},
      {GrammarKind::kEbnf, "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"", {}},
      {GrammarKind::kJsonSchema,
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name"]})",
       {}},
      {GrammarKind::kJsonSchema, R"({"type":"array","items":{"enum":["ab","ba",null,12]},"maxItems":3})", compact},
      {GrammarKind::kAnyJson, "", {}},
      // More than 8 members: member tails become shared rules (calls).
      {GrammarKind::kJsonSchema,
       R"({"properties":{"a":{"type":"integer"},"b":{"type":"null"},"c":{"type":"boolean"},"d":{"enum":[12]},
          "e":{"type":"integer"},"f":{"type":"null"},"g":{"type":"boolean"},"h":{"type":"string","maxLength":2},
          "i":{"type":"integer"},"j":{"type":"null"}},"required":["c","h"],"additionalProperties":false})",
       compact},
      // A long bounded string: its middle positions share one mask entry.
      {GrammarKind::kJsonSchema, R"({"type":"array","items":{"type":"string","maxLength":30},"maxItems":2})", compact},
      // Two states read 'a' into the same string loop of a called rule, and tokens such as
      // `ab")` leave that rule partway: a shared subtree walk with run-time checked tokens.
      {GrammarKind::kEbnf, "root ::= item\nitem ::= (\"\\\"\" | \"'\" [0-9]?) [a-z]* \"\\\"\" | \"(\" item \")\"", {}},
  };
}

// The cached masks (accepted / rejected / run-time checked tokens) must equal a brute force
// check of every token at every state reached by random walks.
TEST(Matcher, MaskEqualsBruteForceAlongRandomWalks) {
  std::mt19937 rng(7);
  for (auto& spec : specs()) {
    auto grammar = token_grammar(spec);
    GrammarMatcher matcher(grammar);
    const auto& vocab = grammar->vocab();
    std::vector<int32_t> mask(vocab.mask_words());
    for (int walk = 0; walk < 6; ++walk) {
      matcher.reset();
      for (int step = 0; step < 25; ++step) {
        matcher.fill_next_token_bitmask(mask);
        auto expected = brute_force_mask(matcher);
        ASSERT_EQ(mask, expected) << spec.text << " at step " << step;
        auto ids = testing::allowed_ids(mask, vocab.vocab_size());
        ASSERT_FALSE(ids.empty()) << "dead end in " << spec.text;
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        ASSERT_TRUE(matcher.accept_token(id));
        if (matcher.is_terminated()) break;
      }
    }
  }
}

TEST(Matcher, RandomWalksEndInAcceptedStrings) {
  std::mt19937 rng(11);
  for (auto& spec : specs()) {
    auto grammar = token_grammar(spec);
    auto reference = compile_grammar(spec);
    GrammarMatcher matcher(grammar);
    int ended = 0;
    for (int walk = 0; walk < 30; ++walk) {
      matcher.reset();
      auto result = testing::random_walk(matcher, rng, 60, 0.5);
      ASSERT_FALSE(result.dead_end) << spec.text;
      if (result.ended) {
        ++ended;
        EXPECT_TRUE(reference->accepts(result.text)) << spec.text << " produced " << result.text;
      }
    }
    EXPECT_GT(ended, 0) << spec.text;
  }
}

TEST(Matcher, StopTokenOnlyWhenComplete) {
  auto grammar = token_grammar({GrammarKind::kRegex, "abc", {}});
  GrammarMatcher matcher(grammar);
  const int32_t eos = grammar->vocab().stop_tokens()[0];
  std::vector<int32_t> mask(grammar->vocab().mask_words());
  matcher.fill_next_token_bitmask(mask);
  EXPECT_FALSE(test_mask_bit(mask, eos));
  EXPECT_FALSE(matcher.accept_token(eos));
  ASSERT_TRUE(matcher.accept_token('a'));
  ASSERT_TRUE(matcher.accept_token('b'));
  EXPECT_FALSE(matcher.can_end());
  ASSERT_TRUE(matcher.accept_token('c'));
  EXPECT_TRUE(matcher.can_end());
  matcher.fill_next_token_bitmask(mask);
  EXPECT_EQ(testing::allowed_ids(mask, grammar->vocab().vocab_size()), std::vector<int32_t>{eos});
  EXPECT_FALSE(matcher.accept_token(static_cast<int32_t>(grammar->vocab().vocab_size() - 1)));  // other special
  EXPECT_TRUE(matcher.accept_token(eos));
  EXPECT_TRUE(matcher.is_terminated());
  matcher.fill_next_token_bitmask(mask);
  EXPECT_TRUE(testing::allowed_ids(mask, grammar->vocab().vocab_size()).empty());
}

TEST(Matcher, TokensSpanningSymbolsAndPartialUtf8) {
  auto grammar = token_grammar({GrammarKind::kRegex, "€+", {}});
  GrammarMatcher matcher(grammar);
  const auto& vocab = grammar->vocab();
  auto id_of = [&](const std::string& bytes) {
    for (size_t i = 0; i < vocab.vocab_size(); ++i) {
      if (vocab.token(static_cast<int32_t>(i)) == bytes && !vocab.is_special(static_cast<int32_t>(i))) return static_cast<int32_t>(i);
    }
    return -1;
  };
  std::vector<int32_t> mask(vocab.mask_words());
  matcher.fill_next_token_bitmask(mask);
  EXPECT_TRUE(test_mask_bit(mask, id_of("\xE2\x82")));
  EXPECT_TRUE(test_mask_bit(mask, id_of("\xE2\x82\xAC")));
  EXPECT_FALSE(test_mask_bit(mask, id_of("\xAC")));
  ASSERT_TRUE(matcher.accept_token(id_of("\xE2\x82")));
  EXPECT_FALSE(matcher.can_end());
  matcher.fill_next_token_bitmask(mask);
  auto allowed = testing::allowed_ids(mask, vocab.vocab_size());
  ASSERT_FALSE(allowed.empty());
  for (int32_t id : allowed) EXPECT_EQ(vocab.token(id), "\xAC");  // the single byte and its duplicate
}

// Inside "(" item ")", a token such as `ab")` finishes the string rule and continues in the
// caller: it is decided at run time, also when its subtree walk is shared between states.
TEST(Matcher, TokensLeavingARuleFromASharedSubtree) {
  auto grammar = token_grammar(specs().back());
  const auto& vocab = grammar->vocab();
  auto id_of = [&](const std::string& bytes) {
    for (size_t i = 0; i < vocab.vocab_size(); ++i) {
      if (vocab.token(static_cast<int32_t>(i)) == bytes) return static_cast<int32_t>(i);
    }
    return -1;
  };
  std::vector<int32_t> mask(vocab.mask_words());
  for (const char* prefix : {"(\"", "('", "(('7"}) {
    GrammarMatcher matcher(grammar);
    ASSERT_TRUE(matcher.accept_bytes(prefix)) << prefix;
    matcher.fill_next_token_bitmask(mask);
    EXPECT_EQ(mask, brute_force_mask(matcher)) << prefix;
    EXPECT_TRUE(test_mask_bit(mask, id_of("ab\")"))) << prefix;
    EXPECT_EQ(test_mask_bit(mask, id_of("b\"))")), prefix[1] == '(') << prefix;
  }
}

TEST(Matcher, RollbackRestoresMasksExactly) {
  std::mt19937 rng(3);
  for (auto& spec : specs()) {
    auto grammar = token_grammar(spec);
    GrammarMatcher matcher(grammar);
    const auto& vocab = grammar->vocab();
    std::vector<std::vector<int32_t>> masks;
    std::vector<int32_t> mask(vocab.mask_words());
    for (int step = 0; step < 20; ++step) {
      matcher.fill_next_token_bitmask(mask);
      masks.push_back(mask);
      auto ids = testing::allowed_ids(mask, vocab.vocab_size());
      int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
      if (vocab.is_stop_token(id)) break;
      ASSERT_TRUE(matcher.accept_token(id));
    }
    while (matcher.tokens_accepted() > 0) {
      size_t n = std::min<size_t>(matcher.tokens_accepted(), 1 + matcher.tokens_accepted() % 3);
      matcher.rollback(n);
      matcher.fill_next_token_bitmask(mask);
      EXPECT_EQ(mask, masks[matcher.tokens_accepted()]) << spec.text;
    }
    EXPECT_THROW(matcher.rollback(1), Error);
  }
}

TEST(Matcher, AsyncMaskEqualsSyncMask) {
  auto grammar = token_grammar(specs()[4]);
  GrammarMatcher matcher(grammar);
  ASSERT_TRUE(matcher.accept_bytes("{\"name\":\"ab"));
  std::vector<int32_t> sync(grammar->vocab().mask_words()), async(grammar->vocab().mask_words(), -1);
  matcher.fill_next_token_bitmask(sync);
  auto future = matcher.fill_next_token_bitmask_async(async);
  future.get();
  EXPECT_EQ(sync, async);
}

TEST(GrammarCompiler, CachesByGrammarText) {
  GrammarCompiler compiler(synthetic_vocab());
  auto a = compiler.compile_regex("a+b");
  auto b = compiler.compile_regex("a+b");
  auto c = compiler.compile_regex("a+c");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(compiler.cache_hits(), 1u);
  EXPECT_EQ(compiler.cache_size(), 2u);
  EXPECT_THROW(compiler.compile_regex("(a"), GrammarError);
  EXPECT_EQ(compiler.cache_size(), 2u);  // errors are not cached
}

TEST(GrammarCompiler, ConcurrentCompilesShareOneResult) {
  GrammarCompiler compiler(synthetic_vocab());
  std::vector<std::future<std::shared_ptr<const TokenGrammar>>> futures;
  for (int i = 0; i < 4; ++i) {
    futures.push_back(std::async(std::launch::async, [&] { return compiler.compile_any_json(); }));
  }
  auto first = futures[0].get();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(futures[i].get().get(), first.get());
}

}  // namespace
}  // namespace deepinfer::structured
