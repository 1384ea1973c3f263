// Generator on the real bundled model: greedy output equals transformers' golden ids whatever the
// prefill chunk size, and text streams out as the tokenizer decodes it.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/generator.h"
#include "io/safetensors.h"

namespace deepinfer::engine {
namespace {

const std::filesystem::path kKjv = std::filesystem::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";

std::vector<int32_t> golden(const std::string& name) {
  const auto checkpoint = io::Checkpoint::open_file(kKjv / "golden.safetensors");
  const auto wide = io::to_int64(checkpoint.get(name));
  return std::vector<int32_t>(wide.begin(), wide.end());
}

class KjvGenerator : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = model::load_model(kKjv).release();
    tokenizer_ = new Tokenizer(Tokenizer::from_model_dir(kKjv));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
  }
  static model::CausalLM* model_;
  static Tokenizer* tokenizer_;
};
model::CausalLM* KjvGenerator::model_ = nullptr;
Tokenizer* KjvGenerator::tokenizer_ = nullptr;

TEST_F(KjvGenerator, GreedyMatchesGoldenForEveryPrefillChunk) {
  sampling::SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = 48;
  for (const std::string prompt : {"prompt0", "prompt1"}) {
    const auto input = golden(prompt + ".input_ids");
    const auto expected = golden(prompt + ".greedy_ids");
    for (int64_t chunk : {1, 3, 4, 512}) {
      Generator generator(*model_, tokenizer_, GeneratorOptions{.prefill_chunk = chunk});
      const auto result = generator.generate(input, params);
      EXPECT_EQ(result.ids, expected) << prompt << " chunk " << chunk;
      EXPECT_EQ(result.finish, FinishReason::Length);
      EXPECT_EQ(result.text, tokenizer_->decode(expected));
    }
  }
}

TEST_F(KjvGenerator, PromptTextEncodesToTheGoldenInput) {
  // The CLI path: --prompt text -> encode_with_bos -> the ids the golden generation started from.
  EXPECT_EQ(tokenizer_->encode_with_bos("Psalms 23:1 The LORD is my shepherd; I"), golden("prompt1.input_ids"));
  EXPECT_EQ(tokenizer_->encode_with_bos("Genesis 1:1 In the beginning"), golden("prompt0.input_ids"));
}

TEST_F(KjvGenerator, SampledRunsAreReproducibleAndStreamCompleteText) {
  Generator generator(*model_, tokenizer_);
  sampling::SamplingParams params;
  params.temperature = 0.8;
  params.top_p = 0.95;
  params.seed = 2024;
  params.max_tokens = 64;
  std::string streamed;
  const auto a = generator.generate(golden("prompt0.input_ids"), params,
                                    [&](const TokenEvent& e) { streamed += e.text; });
  const auto b = generator.generate(golden("prompt0.input_ids"), params);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(streamed, a.text);
  EXPECT_FALSE(a.text.empty());
  EXPECT_GT(a.stats.decode_tokens_per_second(), 0.0);
}

// The V4 fixtures (no tokenizer): prompts of 45-133 tokens cross the sliding window and many
// compression windows, so chunk boundaries land everywhere inside them.
TEST(FixtureGenerator, GreedyMatchesGoldenForEveryPrefillChunk) {
  const auto fixtures = std::filesystem::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";
  sampling::SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = 13;
  for (const std::string fixture : {"v4_tiny_a", "v4_tiny_b"}) {
    const auto model = model::load_model(fixtures / fixture);
    const auto checkpoint = io::Checkpoint::open_file(fixtures / fixture / "golden.safetensors");
    for (const std::string prompt : {"p0", "p1"}) {
      const auto input_wide = io::to_int64(checkpoint.get(prompt + ".input_ids"));
      const auto expected_wide = io::to_int64(checkpoint.get(prompt + ".generated_ids"));
      const std::vector<int32_t> input(input_wide.begin(), input_wide.end());
      const std::vector<int32_t> expected(expected_wide.begin(), expected_wide.end());
      for (int64_t chunk : {1, 7, 16, 512}) {
        Generator generator(*model, nullptr, GeneratorOptions{.prefill_chunk = chunk});
        const auto result = generator.generate(input, params);
        EXPECT_EQ(result.ids, expected) << fixture << " " << prompt << " chunk " << chunk;
        EXPECT_TRUE(result.text.empty());
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::engine
