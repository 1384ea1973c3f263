// Very long inputs: no regex stack or match limits hit, exact round trips, and the same ids as
// encoding the text in word-sized chunks would give where splitting cannot change the result.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const std::filesystem::path kDataDir = DEEPINFER_TEST_DATA_DIR;

std::string repeat(std::string_view unit, size_t total_bytes) {
  std::string out;
  while (out.size() < total_bytes) out += unit;
  return out;
}

TEST(TokenizerLongInput, MegabyteRunsRoundTrip) {
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kDataDir / "tokenizers" / "deepseek-v3");
  const size_t megabyte = 1 << 20;
  for (const std::string& text :
       {repeat(" ", megabyte), repeat("a", megabyte), repeat("7", megabyte), repeat("你", megabyte),
        repeat("👨‍👩‍👧‍👦", megabyte), repeat("\r\n", megabyte), repeat(" \t", megabyte), repeat("!?", megabyte),
        repeat("word ", megabyte), repeat("<｜User｜>", megabyte / 4)}) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    ASSERT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), text.size() + 1);
    EXPECT_EQ(tokenizer.decode(ids), text) << "run of " << text.substr(0, 8);
  }
}

TEST(TokenizerLongInput, DigitsSplitIntoGroupsOfThree) {
  // \p{N}{1,3} isolates digit groups, so a long number is the concatenation of its 3-digit groups.
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kDataDir / "tokenizers" / "deepseek-v3");
  const std::string digits = repeat("1234567890", 30000);
  std::vector<int32_t> expected;
  for (size_t i = 0; i < digits.size(); i += 3) {
    const auto group = tokenizer.encode(digits.substr(i, 3));
    expected.insert(expected.end(), group.begin(), group.end());
  }
  EXPECT_EQ(tokenizer.encode(digits), expected);
}

}  // namespace
}  // namespace deepinfer
