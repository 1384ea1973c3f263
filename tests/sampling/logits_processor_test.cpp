#include "sampling/logits_processor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "structured/grammar_compiler.h"

namespace deepinfer::sampling {
namespace {

using namespace deepinfer::structured;

// Vocabulary: 0 "a", 1 "b", 2 "ab", 3 "c", 4 <eos> (stop), 5 <pad> (special).
std::shared_ptr<const TokenGrammar> grammar(const std::string& regex) {
  Vocabulary v;
  v.tokens = {"a", "b", "ab", "c", "<eos>", "<pad>"};
  v.special = {0, 0, 0, 0, 1, 1};
  v.stop_tokens = {4};
  static GrammarCompiler compiler(std::make_shared<const TokenizerIndex>(std::move(v)));
  return compiler.compile_regex(regex);
}

std::vector<bool> finite(const std::vector<float>& logits) {
  std::vector<bool> out;
  for (float x : logits) out.push_back(std::isfinite(x));
  return out;
}

TEST(GrammarLogitsProcessor, MasksDisallowedTokensToMinusInfinity) {
  GrammarLogitsProcessor processor(grammar("(ab)+c?"));
  std::vector<float> logits(8, 1.5f);  // two padding rows beyond the vocabulary
  processor.apply(logits);
  EXPECT_EQ(finite(logits), (std::vector<bool>{true, false, true, false, false, false, false, false}));
  EXPECT_EQ(logits[0], 1.5f);  // allowed logits are untouched
  ASSERT_TRUE(processor.accept(0));
  std::fill(logits.begin(), logits.end(), 0.f);
  processor.apply(logits);
  EXPECT_EQ(finite(logits), (std::vector<bool>{false, true, false, false, false, false, false, false}));
  ASSERT_TRUE(processor.accept(1));
  std::fill(logits.begin(), logits.end(), 0.f);
  processor.apply(logits);
  EXPECT_EQ(finite(logits), (std::vector<bool>{true, false, true, true, true, false, false, false}));
  EXPECT_FALSE(processor.is_finished());
  EXPECT_FALSE(processor.accept(1));
  ASSERT_TRUE(processor.accept(4));
  EXPECT_TRUE(processor.is_finished());
}

TEST(GrammarLogitsProcessor, RollbackAndPrefetch) {
  GrammarLogitsProcessor processor(grammar("(ab)+c?"));
  std::vector<float> before(6, 0.f), after(6, 0.f);
  processor.apply(before);
  ASSERT_TRUE(processor.accept(2));
  ASSERT_TRUE(processor.accept(3));
  processor.rollback(2);
  processor.prefetch_mask();  // computed on a worker thread, used by apply()
  processor.apply(after);
  EXPECT_EQ(finite(before), finite(after));
  processor.prefetch_mask();
  EXPECT_TRUE(processor.accept(0));  // waits for the pending mask first
  std::fill(after.begin(), after.end(), 0.f);
  processor.apply(after);
  EXPECT_EQ(finite(after), (std::vector<bool>{false, true, false, false, false, false}));
}

}  // namespace
}  // namespace deepinfer::sampling
