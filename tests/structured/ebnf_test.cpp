#include <gtest/gtest.h>

#include "structured/compiled_grammar.h"
#include "structured/ebnf.h"

namespace deepinfer::structured {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& text) { return CompiledGrammar::compile(parse_ebnf(text)); }

TEST(Ebnf, ArithmeticWithRecursionAndComments) {
  auto g = compile(R"g(
    # arithmetic
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= factor ("*" factor)*
    factor ::= [0-9]+ | "(" expr ")"
  )g");
  EXPECT_TRUE(g->accepts("1+2*(3-4)"));
  EXPECT_TRUE(g->accepts("((7))"));
  EXPECT_FALSE(g->accepts("1+"));
  EXPECT_FALSE(g->accepts("(1"));
  EXPECT_FALSE(g->accepts(""));
}

TEST(Ebnf, RepetitionCountsClassesAndEscapes) {
  auto g = compile(R"g(root ::= [a-c]{2,3} "\n" [^0-9x]? "\x41" "\u00e9" .)g");
  EXPECT_TRUE(g->accepts("ab\nAé€"));
  EXPECT_TRUE(g->accepts("abc\nzAéz"));
  EXPECT_FALSE(g->accepts("a\nAéz"));
  EXPECT_FALSE(g->accepts("abcd\nAéz"));
  EXPECT_FALSE(g->accepts("ab\nxAéz"));
  auto bounded = compile("root ::= \"a\"{,2} \"b\"{2,}");
  EXPECT_TRUE(bounded->accepts("bb"));
  EXPECT_TRUE(bounded->accepts("aabbbb"));
  EXPECT_FALSE(bounded->accepts("aaabb"));
  EXPECT_FALSE(bounded->accepts("ab"));
}

TEST(Ebnf, RulesSpanLinesUntilTheNextDefinition) {
  auto g = compile("root ::= \"a\"\n  | \"b\"\n  item\nitem ::= \"c\"");
  EXPECT_TRUE(g->accepts("a"));
  EXPECT_TRUE(g->accepts("bc"));
  EXPECT_FALSE(g->accepts("b"));
}

void expect_error(const std::string& text, GrammarErrorKind kind) {
  try {
    compile(text);
    FAIL() << "no error for: " << text;
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.kind(), kind) << text << ": " << e.what();
  }
}

TEST(Ebnf, TypedErrors) {
  expect_error("item ::= \"a\"", GrammarErrorKind::kInvalid);            // no root
  expect_error("root ::= missing", GrammarErrorKind::kInvalid);          // undefined rule
  expect_error("root ::= \"a", GrammarErrorKind::kInvalid);              // unterminated literal
  expect_error("root ::= (\"a\"", GrammarErrorKind::kInvalid);           // missing ')'
  expect_error("root = \"a\"", GrammarErrorKind::kInvalid);              // no ::=
  expect_error("root ::= root \"a\" | \"b\"", GrammarErrorKind::kUnsupported);  // left recursion
  expect_error("root ::= x\nx ::= \"b\" | x \"a\"", GrammarErrorKind::kUnsupported);
  expect_error("root ::= x\nx ::= x", GrammarErrorKind::kUnsatisfiable);
  expect_error("root ::= x\nx ::= \"a\" x", GrammarErrorKind::kUnsatisfiable);  // no finite string
  expect_error("root ::= [b-a]", GrammarErrorKind::kInvalid);
}

}  // namespace
}  // namespace deepinfer::structured
