// StreamingDetokenizer: never emits broken UTF-8, and its pieces add up to decode().
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

const std::filesystem::path kDataDir = DEEPINFER_TEST_DATA_DIR;

const Tokenizer& deepseek() {
  static const Tokenizer tokenizer = Tokenizer::from_model_dir(kDataDir / "tokenizers" / "deepseek-v3");
  return tokenizer;
}

// The id of the single-byte token for `byte` (its GPT-2 alphabet character).
int32_t byte_token(unsigned char byte) {
  std::string character;
  utf8::append_code_point(character, utf8::byte_to_code_point()[byte]);
  const auto id = deepseek().token_to_id(character);
  if (!id) throw std::runtime_error("no byte token for " + std::to_string(byte));
  return *id;
}

bool valid_utf8(const std::string& text) { return utf8::find_invalid_byte(text) == std::string::npos; }

TEST(StreamingDetokenizer, HoldsSplitMultiByteCharacter) {
  StreamingDetokenizer stream(deepseek());
  EXPECT_EQ(stream.push(byte_token('a')), "a");
  EXPECT_EQ(stream.push(byte_token(0xE4)), "");  // 你 = E4 BD A0
  EXPECT_EQ(stream.push(byte_token(0xBD)), "");
  EXPECT_EQ(stream.push(byte_token(0xA0)), "你");
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamingDetokenizer, EmojiAcrossTokens) {
  const std::string text = "family: 👨‍👩‍👧‍👦 and 🫠!";
  const std::vector<int32_t> ids = deepseek().encode(text);
  // Meaningful only if some token carries a partial character.
  bool some_token_partial = false;
  for (int32_t id : ids) some_token_partial |= !valid_utf8(deepseek().token_bytes(id));
  ASSERT_TRUE(some_token_partial);

  StreamingDetokenizer stream(deepseek());
  std::string joined;
  int held_back = 0;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << nlohmann::json(piece).dump();
    held_back += piece.empty();
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_GT(held_back, 0);
  EXPECT_EQ(joined, text);
}

TEST(StreamingDetokenizer, FlushReplacesUnfinishedBytes) {
  StreamingDetokenizer stream(deepseek());
  EXPECT_EQ(stream.push(byte_token(0xF0)), "");
  EXPECT_EQ(stream.push(byte_token(0x9F)), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // one U+FFFD for the unfinished character
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(stream.push(byte_token('x')), "x");
}

TEST(StreamingDetokenizer, InvalidBytesAreReplacedWithoutWaiting) {
  StreamingDetokenizer stream(deepseek());
  EXPECT_EQ(stream.push(byte_token(0xFF)), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(byte_token(0xE4)), "");
  EXPECT_EQ(stream.push(byte_token('a')), "\xEF\xBF\xBD" "a");  // E4 cannot continue with 'a'
  EXPECT_EQ(stream.push(byte_token(0xED)), "");
  EXPECT_EQ(stream.push(byte_token(0xA0)), "\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate half: two subparts
}

TEST(StreamingDetokenizer, SkipsSpecialTokensWhenAsked) {
  StreamingDetokenizer skipping(deepseek(), /*skip_special_tokens=*/true);
  StreamingDetokenizer keeping(deepseek());
  EXPECT_EQ(skipping.push(0), "");
  EXPECT_EQ(keeping.push(0), "<｜begin▁of▁sentence｜>");
}

TEST(StreamingDetokenizer, PiecesAddUpToLossyDecodeOfRandomIds) {
  std::mt19937 random(1234);
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(deepseek().vocab_size()) - 1);
  std::uniform_int_distribution<int> any_byte(0, 255);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 20; ++i) ids.push_back(i % 2 ? any_id(random) : byte_token(static_cast<unsigned char>(any_byte(random))));
    StreamingDetokenizer stream(deepseek());
    std::string joined;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      ASSERT_TRUE(valid_utf8(piece));
      joined += piece;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, deepseek().decode(ids)) << "trial " << trial;
  }
}

TEST(StreamingDetokenizer, CorpusStreamsBackExactly) {
  std::ifstream file(kDataDir / "tokenizer" / "corpus.jsonl");
  std::string line;
  int checked = 0;
  while (std::getline(file, line) && checked < 800) {
    const std::string text = nlohmann::json::parse(line).get<std::string>();
    StreamingDetokenizer stream(deepseek());
    std::string joined;
    for (int32_t id : deepseek().encode(text)) joined += stream.push(id);
    joined += stream.flush();
    EXPECT_EQ(joined, text);
    ++checked;
  }
  EXPECT_EQ(checked, 800);
}

TEST(Utf8, RepairMatchesRustLossyRule) {
  EXPECT_EQ(utf8::repair_lossy("ok"), "ok");
  EXPECT_EQ(utf8::repair_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");                        // truncated: one
  EXPECT_EQ(utf8::repair_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");              // overlong: two
  EXPECT_EQ(utf8::repair_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: three
  EXPECT_EQ(utf8::repair_lossy("a\xE4\xBD" "b"), "a\xEF\xBF\xBD" "b");               // maximal subpart: one
  EXPECT_EQ(utf8::repair_lossy("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
}

}  // namespace
}  // namespace deepinfer
