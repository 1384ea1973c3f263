#include <gtest/gtest.h>

#include <regex>

#include "structured/compiled_grammar.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

bool grammar_accepts(const std::string& pattern, const std::string& text) {
  return CompiledGrammar::compile(regex_grammar(pattern))->accepts(text);
}

// Patterns checked against std::regex (ECMAScript, full match) on many strings.
TEST(Regex, AgreesWithStdRegexOnAsciiPatterns) {
  const std::vector<std::string> patterns = {
      "abc", "a|b|cd", "a*", "a+b?", "(ab)*c", "[a-c]+", "[^a-c]x", "\\d{2,4}", "\\w+@\\w+\\.com", "a{3}",
      "a{2,}", "(a|b){0,3}c", "[\\d.]+", "\\s*x\\s*", "[A-Z][a-z]*( [A-Z][a-z]*)*", "x.y", "(?:ab|cd)+",
      "-?(0|[1-9][0-9]*)(\\.[0-9]+)?", "[-a]", "[a-]", "\\(\\)", "\\x41\\u0042",
  };
  const std::vector<std::string> texts = {
      "", "a", "b", "ab", "abc", "cd", "aaa", "aaaa", "abababc", "c", "bbx", "dx", "12", "12345", "123",
      "foo@bar.com", "a.b", "  x ", "x", "Hello World", "Hello world", "xzy", "x\ny", "abcd", "-0.5", "01",
      "-", "a{,2}", "()", "AB", "12.5.", "aa",
  };
  for (auto& p : patterns) {
    std::regex reference(p, std::regex::ECMAScript);
    for (auto& t : texts) {
      EXPECT_EQ(grammar_accepts(p, t), std::regex_match(t, reference)) << "pattern /" << p << "/ text '" << t << "'";
    }
  }
}

TEST(Regex, UnicodeClassesMatchWholeCharacters) {
  EXPECT_TRUE(grammar_accepts("[à-ÿ]+", "éü"));
  EXPECT_FALSE(grammar_accepts("[à-ÿ]+", "e"));
  EXPECT_TRUE(grammar_accepts(".", "€"));
  EXPECT_FALSE(grammar_accepts(".", "\xE2\x82"));  // a partial UTF-8 sequence is not a character
  EXPECT_TRUE(grammar_accepts("[^a]", "😀"));
  EXPECT_TRUE(grammar_accepts("\\u{1F600}", "😀"));
  EXPECT_TRUE(grammar_accepts("\\uD83D\\uDE00", "😀"));
}

TEST(Regex, AnchorsAtTheEndsAreAccepted) {
  EXPECT_TRUE(grammar_accepts("^abc$", "abc"));
  EXPECT_FALSE(grammar_accepts("^abc$", "xabc"));
}

TEST(Regex, SearchModeMatchesAnywhere) {
  RegexOptions options;
  options.anchoring = RegexOptions::Anchoring::kSearch;
  auto g = CompiledGrammar::compile(single_rule_grammar(parse_regex("b+", options)));
  EXPECT_TRUE(g->accepts("abbc"));
  EXPECT_FALSE(g->accepts("ac"));
  auto anchored = CompiledGrammar::compile(single_rule_grammar(parse_regex("^b", options)));
  EXPECT_TRUE(anchored->accepts("bx"));
  EXPECT_FALSE(anchored->accepts("xb"));
}

void expect_error(const std::string& pattern, GrammarErrorKind kind) {
  try {
    regex_grammar(pattern);
    FAIL() << "no error for /" << pattern << "/";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.kind(), kind) << pattern << ": " << e.what();
  }
}

// Stacked and nested quantifiers (found by the fuzz campaign: one such request line took minutes
// to check): they fold where the language allows and otherwise build without a quadratic closure,
// agreeing with std::regex; what is still too large is a typed "size" error, not a hang.
TEST(Regex, StackedQuantifiersCompileAndAgreeWithStdRegex) {
  // Each pattern beside one of the same language without the stacking, for std::regex (whose
  // backtracking takes exponential time on the stacked forms themselves).
  const std::vector<std::pair<std::string, std::string>> patterns = {
      {"p?++++++++++++++", "p*"},          {"(a?)+b", "a*b"},        {"(a*)*", "a*"},
      {"(a+)+c", "a+c"},                   {"(a?){2,3}", "a{0,3}"}, {"(a+)?", "a*"},
      {"(a{2,})+", "a{2,}"},               {"(a{2,}){3,}", "a{6,}"}, {"(a{2,})*", "(a{2,})?"},
      {"(a?)?", "a?"},                     {"((a?b?)+c?)+d", "[abc]*d"}, {"(a|b?)+", "[ab]*"},
      {"(a{2}){3}", "a{6}"},               {"(a+){0,2}", "a*"},
      {"(a{0,3}){0,2}", "a{0,6}"},         {"(a{1,2}){0,3}", "a{0,6}"},
      {"(a{2}){1,3}", "aa|aaaa|aaaaaa"},  {"(a{2,3}){0,2}", "|aa|aaa|aaaa|aaaaa|aaaaaa"},
      {"(a{0,2}){3}", "a{0,6}"},          {"(a{3,4}){2}", "a{6,8}"},
      {"rZZZdZZZZ?}}}+r++}p?++++++++++++++gggg1>:", "rZZZdZZZZ?\\}\\}\\}+r+\\}p*gggg1>:"},
  };
  const std::vector<std::string> texts = {"", "a", "aa", "aaa", "aaaa", "aaaaa", "aaaaaa", "aaaaaaa", "p", "ppp", "b",
                                          "ab", "aab", "c", "ac", "aac", "d", "abd", "abcd", "cd", "aabbcd", "ba",
                                          "rZZZdZZZ}}}rr}gggg1>:", "rZZZdZZZZ}}}}rrr}pppgggg1>:"};
  for (const auto& [p, plain] : patterns) {
    std::regex reference(plain, std::regex::ECMAScript);
    for (const auto& t : texts)
      EXPECT_EQ(grammar_accepts(p, t), std::regex_match(t, reference)) << "pattern /" << p << "/ text '" << t << "'";
  }
}

TEST(Regex, NestedCountsTooLargeToBuildAreASizeError) {
  // a{0,2} doubled 13 times: 2^13 nullable copies in a chain, whose epsilon closures would hold
  // tens of millions of transitions (the closure budget); doubled 16 times, more states than any
  // automaton may have. (Each level's "|b" keeps the counts from folding into one a{0,2^14}.)
  for (const auto& [levels, words] : {std::pair{13, "transitions"}, std::pair{16, "automaton states"}}) {
    std::string p = "a{0,2}";
    for (int i = 0; i < levels; ++i) p = "(" + p + "|b){2}";
    try {
      CompiledGrammar::compile(regex_grammar(p));
      ADD_FAILURE() << levels << " levels compiled";
    } catch (const GrammarError& e) {
      EXPECT_EQ(e.kind(), GrammarErrorKind::kUnsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST(Regex, RejectsUnsupportedConstructsWithTypedErrors) {
  expect_error("(a)\\1", GrammarErrorKind::kUnsupported);
  expect_error("a(?=b)", GrammarErrorKind::kUnsupported);
  expect_error("a(?!b)", GrammarErrorKind::kUnsupported);
  expect_error("(?<=a)b", GrammarErrorKind::kUnsupported);
  expect_error("\\bword", GrammarErrorKind::kUnsupported);
  expect_error("\\p{L}", GrammarErrorKind::kUnsupported);
  expect_error("a^b", GrammarErrorKind::kUnsupported);
}

TEST(Regex, RejectsMalformedPatternsAsInvalid) {
  expect_error("(ab", GrammarErrorKind::kInvalid);
  expect_error("ab)", GrammarErrorKind::kInvalid);
  expect_error("*a", GrammarErrorKind::kInvalid);
  expect_error("[b-a]", GrammarErrorKind::kInvalid);
  expect_error("a{3,2}", GrammarErrorKind::kInvalid);
  expect_error("[abc", GrammarErrorKind::kInvalid);
}

}  // namespace
}  // namespace deepinfer::structured
