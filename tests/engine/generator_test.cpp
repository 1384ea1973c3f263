// Generator against a deterministic toy CausalLM: chunked prefill, stopping rules, seeding, streaming.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/fake_model.h"
#include "sampling/random.h"

// Designated initialisers name only the fields a test cares about; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::engine {
namespace {

using sampling::SamplingParams;

// Logits are a hash of the whole context (see fake_model.h), so any mistake in what reaches the
// model (a lost chunk, a token fed twice, a wrong order) changes the output. `eos_after` forces EOS
// once the context holds that many tokens.
class ToyModel : public testing::FakeModel {
 public:
  explicit ToyModel(int64_t vocab, int64_t eos_after = -1, int64_t context = 4096)
      : FakeModel({.vocab = vocab, .context = context, .eos_after = eos_after}) {}
  // The reference: next-token logits after `context`, computed from scratch.
  std::vector<float> logits_for(const std::vector<int32_t>& context) const { return reference_logits(context); }
};

// What generation must produce: sample from the from-scratch logits at each step.
std::vector<int32_t> reference_generation(const ToyModel& model, std::vector<int32_t> context,
                                          const SamplingParams& params) {
  sampling::Sampler sampler;
  std::vector<int32_t> out;
  for (int64_t step = 0; step < params.max_tokens; ++step) {
    const int32_t id = sampler.sample(model.logits_for(context), params, static_cast<uint64_t>(step));
    out.push_back(id);
    context.push_back(id);
    if (id == 1) break;
  }
  return out;
}

const std::vector<int32_t> kPrompt{0, 5, 9, 33, 2, 17, 41, 8, 8, 60};

TEST(Generator, GreedyMatchesFromScratchReference) {
  ToyModel model(64);
  Generator generator(model);
  const SamplingParams params{.temperature = 0.0, .max_tokens = 20};
  const auto result = generator.generate(kPrompt, params);
  EXPECT_EQ(result.ids, reference_generation(model, kPrompt, params));
  EXPECT_EQ(result.ids.size(), 20u);
  EXPECT_EQ(result.finish, FinishReason::Length);
  EXPECT_STREQ(to_string(result.finish), "length");
  EXPECT_TRUE(result.text.empty());
}

TEST(Generator, PrefillRunsInChunksAndChunkSizeDoesNotChangeTokens) {
  ToyModel model(64);
  const SamplingParams params{.temperature = 0.0, .max_tokens = 5};
  Generator chunked(model, nullptr, GeneratorOptions{.prefill_chunk = 4});
  const auto a = chunked.generate(kPrompt, params);
  EXPECT_EQ(model.forward_sizes, (std::vector<int64_t>{4, 4, 2, 1, 1, 1, 1}));
  model.forward_sizes.clear();
  Generator whole(model);
  const auto b = whole.generate(kPrompt, params);
  EXPECT_EQ(model.forward_sizes, (std::vector<int64_t>{10, 1, 1, 1, 1}));
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_THROW(Generator(model, nullptr, GeneratorOptions{.prefill_chunk = 0}), Error);
}

TEST(Generator, StopsAtEosAndReportsIt) {
  ToyModel model(64, /*eos_after=*/kPrompt.size() + 3);
  Generator generator(model);
  std::vector<TokenEvent> events;
  const auto result = generator.generate(kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 50},
                                         [&](const TokenEvent& e) { events.push_back(e); });
  ASSERT_EQ(result.ids.size(), 4u);  // three tokens, then EOS
  EXPECT_EQ(result.ids.back(), 1);
  EXPECT_EQ(result.finish, FinishReason::Stop);
  EXPECT_STREQ(to_string(result.finish), "stop");
  ASSERT_EQ(events.size(), 4u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].id, result.ids[i]);
    EXPECT_EQ(events[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(events[i].is_stop, i == 3);
    EXPECT_EQ(events[i].is_last, i == 3);
  }
}

TEST(Generator, IgnoreEosAndExtraStopIds) {
  ToyModel model(64, /*eos_after=*/kPrompt.size() + 1);
  Generator generator(model);
  auto result = generator.generate(kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 6, .ignore_eos = true});
  EXPECT_EQ(result.ids.size(), 6u);
  EXPECT_EQ(result.finish, FinishReason::Length);

  ToyModel free_model(64);
  Generator free_generator(free_model);
  const auto plain = free_generator.generate(kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 6});
  const int32_t third = plain.ids[2];
  result = free_generator.generate(
      kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 6, .stop_token_ids = {third}});
  EXPECT_EQ(result.finish, FinishReason::Stop);
  ASSERT_GE(result.ids.size(), 1u);
  EXPECT_EQ(result.ids.back(), third);
  EXPECT_LE(result.ids.size(), 3u);
}

TEST(Generator, SeededSamplingIsReproducibleAndMatchesStatelessSampler) {
  ToyModel model(64);
  Generator generator(model);
  const SamplingParams params{.temperature = 1.0, .top_p = 0.95, .top_k = 20, .seed = 7, .max_tokens = 24};
  const auto a = generator.generate(kPrompt, params);
  const auto b = generator.generate(kPrompt, params);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.ids, reference_generation(model, kPrompt, params));
  SamplingParams other = params;
  other.seed = 8;
  EXPECT_NE(generator.generate(kPrompt, other).ids, a.ids);
}

TEST(Generator, RejectsBadPromptsAndParams) {
  ToyModel model(64, -1, /*context=*/12);
  Generator generator(model);
  const SamplingParams greedy{.temperature = 0.0};
  EXPECT_THROW(generator.generate(std::vector<int32_t>{}, greedy), Error);
  EXPECT_THROW(generator.generate(std::vector<int32_t>{0, 64}, greedy), Error);
  EXPECT_THROW(generator.generate(std::vector<int32_t>{0, -1}, greedy), Error);
  EXPECT_THROW(generator.generate(std::vector<int32_t>(13, 3), greedy), Error);
  EXPECT_THROW(generator.generate(kPrompt, SamplingParams{.temperature = -1.0}), Error);
}

TEST(Generator, StopsAtTheContextLimit) {
  ToyModel model(64, -1, /*context=*/12);
  Generator generator(model);
  // 10 prompt tokens fill positions 0-9; tokens fed at 10 and 11 give 3 generated tokens in all.
  const auto result = generator.generate(kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 50});
  EXPECT_EQ(result.ids.size(), 3u);
  EXPECT_EQ(result.finish, FinishReason::Length);
}

TEST(Generator, ReportsStats) {
  ToyModel model(64);
  Generator generator(model);
  const auto result = generator.generate(kPrompt, SamplingParams{.temperature = 0.0, .max_tokens = 8});
  EXPECT_EQ(result.stats.prompt_tokens, 10);
  EXPECT_EQ(result.stats.generated_tokens, 8);
  EXPECT_GT(result.stats.prefill_seconds, 0.0);
  EXPECT_GT(result.stats.decode_seconds, 0.0);
  EXPECT_GT(result.stats.prefill_tokens_per_second(), 0.0);
  EXPECT_GT(result.stats.decode_tokens_per_second(), 0.0);
  GenerationStats one{.prompt_tokens = 3, .generated_tokens = 1, .prefill_seconds = 0.5};
  EXPECT_DOUBLE_EQ(one.prefill_tokens_per_second(), 6.0);
  EXPECT_EQ(one.decode_tokens_per_second(), 0.0);
}

TEST(Generator, StreamsTextThatConcatenatesToTheDecodedIds) {
  const auto tokenizer = Tokenizer::from_model_dir(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4");
  ToyModel model(static_cast<int64_t>(tokenizer.vocab_size()), /*eos_after=*/30);
  Generator generator(model, &tokenizer);
  EXPECT_NE(std::find(generator.eos_ids().begin(), generator.eos_ids().end(), 1), generator.eos_ids().end());
  const auto prompt = tokenizer.encode_with_bos("In the beginning");
  std::string streamed;
  int events = 0;
  const auto result = generator.generate(prompt, SamplingParams{.temperature = 1.0, .seed = 3, .max_tokens = 200},
                                         [&](const TokenEvent& e) {
                                           streamed += e.text;
                                           ++events;
                                         });
  ASSERT_EQ(result.finish, FinishReason::Stop);
  EXPECT_EQ(events, static_cast<int>(result.ids.size()));
  EXPECT_EQ(streamed, result.text);
  std::vector<int32_t> without_eos(result.ids.begin(), result.ids.end() - 1);
  EXPECT_EQ(result.text, tokenizer.decode(without_eos));
  EXPECT_FALSE(result.text.empty());
}

TEST(ParseTokenIds, AcceptsSeparatedIntegersInRange) {
  EXPECT_EQ(parse_token_ids("0 17 5", 100), (std::vector<int32_t>{0, 17, 5}));
  EXPECT_EQ(parse_token_ids(" 0,17,\n5  99 ", 100), (std::vector<int32_t>{0, 17, 5, 99}));
}

TEST(ParseTokenIds, RejectsGarbageAndOutOfRange) {
  for (const char* bad : {"", "   ", "a", "1 2 x", "1.5", "-1", "100", "99999999999999999999", "0x10", "3+"})
    EXPECT_THROW(parse_token_ids(bad, 100), Error) << bad;
}

}  // namespace
}  // namespace deepinfer::engine
