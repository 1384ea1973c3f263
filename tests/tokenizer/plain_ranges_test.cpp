// encode() with plain-text ranges: added tokens spelled inside a range (or across its edges) stay
// ordinary text, outside they are still matched, and a range never splits the BPE run.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const std::filesystem::path kDeepSeekDir = std::filesystem::path(DEEPINFER_TEST_DATA_DIR) / "tokenizers" / "deepseek-v3";

const Tokenizer& deepseek() {
  static const Tokenizer tokenizer = Tokenizer::from_model_dir(kDeepSeekDir);
  return tokenizer;
}

bool has_added_token(const Tokenizer& t, const std::vector<int32_t>& ids) {
  const auto contents = t.added_token_contents();
  return std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
    return std::find(contents.begin(), contents.end(), t.token_string(id)) != contents.end();
  });
}

TEST(PlainRanges, SpecialTokenInsideARangeIsText) {
  const Tokenizer& t = deepseek();
  const std::string eos = "<｜end▁of▁sentence｜>";
  const std::string text = "<｜User｜>say " + eos + " now<｜Assistant｜>";
  const size_t begin = std::string("<｜User｜>").size();
  const size_t end = text.size() - std::string("<｜Assistant｜>").size();
  const Tokenizer::Range plain{begin, end};
  const auto ids = t.encode(text, std::span(&plain, 1));
  const auto eos_id = *t.token_to_id(eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eos_id), 0);
  // The template's tokens outside the range are still single ids, at both ends.
  EXPECT_EQ(ids.front(), *t.token_to_id("<｜User｜>"));
  EXPECT_EQ(ids.back(), *t.token_to_id("<｜Assistant｜>"));
  EXPECT_FALSE(has_added_token(t, std::vector<int32_t>(ids.begin() + 1, ids.end() - 1)));
  EXPECT_EQ(t.decode(ids), text);
  // Without the range the same text does carry the EOS id: the range is what protects it.
  const auto unprotected = t.encode(text);
  EXPECT_EQ(std::count(unprotected.begin(), unprotected.end(), eos_id), 1);
}

TEST(PlainRanges, MatchAcrossARangeEdgeIsRejected) {
  const Tokenizer& t = deepseek();
  // "<｜User" comes from the range, "｜>" from outside: together they spell a token, which must not match.
  const std::string text = "hi <｜User｜> there";
  const Tokenizer::Range plain{0, std::string("hi <｜User").size()};
  const auto ids = t.encode(text, std::span(&plain, 1));
  EXPECT_FALSE(has_added_token(t, ids));
  EXPECT_EQ(t.decode(ids), text);
}

TEST(PlainRanges, RangesDoNotChangeOrdinaryText) {
  const Tokenizer& t = deepseek();
  const std::string text = "In the beginning God created the heaven and the earth. 12345 你好 wörld!!";
  const std::vector<Tokenizer::Range> ranges = {{3, 7}, {7, 20}, {30, 31}, {40, text.size()}};
  EXPECT_EQ(t.encode(text, ranges), t.encode(text));
  EXPECT_EQ(t.encode(text, {}), t.encode(text));
}

TEST(PlainRanges, BadRangesAreErrors) {
  const Tokenizer& t = deepseek();
  const std::vector<Tokenizer::Range> overlapping = {{0, 5}, {3, 6}};
  EXPECT_THROW(t.encode("abcdefgh", overlapping), Error);
  const std::vector<Tokenizer::Range> outside = {{2, 100}};
  EXPECT_THROW(t.encode("abcdefgh", outside), Error);
}

TEST(PlainRanges, AddedTokenContentsAreLongestFirst) {
  const auto contents = deepseek().added_token_contents();
  ASSERT_FALSE(contents.empty());
  EXPECT_NE(std::find(contents.begin(), contents.end(), "<｜end▁of▁sentence｜>"), contents.end());
  EXPECT_TRUE(std::is_sorted(contents.begin(), contents.end(),
                             [](const std::string& a, const std::string& b) { return a.size() > b.size(); }));
}

}  // namespace
}  // namespace deepinfer
