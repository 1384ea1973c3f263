// The vLLM sampling controls, each against a distribution computed by hand in this file from its
// definition, on small random logits (seed printed; DEEPINFER_TEST_SEED replays): min_p,
// logit_bias, repetition / frequency / presence penalties with repeated tokens, min_tokens, and
// logprobs (log_softmax, rank, top-N). Comparisons use EXPECT_NEAR, which fails on NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/logprobs.h"
#include "sampling/penalties.h"
#include "sampling/sampler.h"
#include "sampling/sequence_sampler.h"

// Designated initialisers name only the fields a test cares about.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("DEEPINFER_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }();
  return seed;
}

#define TRACE_SEED() SCOPED_TRACE("seed " + std::to_string(run_seed()) + " (rerun with DEEPINFER_TEST_SEED)")

std::vector<float> random_logits(size_t n, uint64_t salt) {
  std::mt19937_64 rng(run_seed() ^ (salt * 0x9E3779B97F4A7C15ull));
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<float> out(n);
  for (auto& v : out) v = value(rng);
  return out;
}

// softmax(logits / temperature) over the finite entries, in double.
std::vector<double> softmax(const std::vector<double>& logits, double temperature = 1.0) {
  double max_value = -1e300;
  for (double v : logits)
    if (std::isfinite(v)) max_value = std::max(max_value, v / temperature);
  std::vector<double> p(logits.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isfinite(logits[i])) sum += p[i] = std::exp(logits[i] / temperature - max_value);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The sampler's distribution as a dense vector.
std::vector<double> dense(const std::vector<std::pair<int32_t, double>>& dist, size_t n) {
  std::vector<double> p(n, 0.0);
  for (const auto& [id, prob] : dist) p[static_cast<size_t>(id)] = prob;
  return p;
}

void expect_distribution(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

// What a SequenceSampler draws from at `step`, as a dense distribution.
std::vector<double> drawn_from(SequenceSampler& s, const std::vector<float>& row, uint64_t step) {
  SamplingScratch scratch;
  Sampler sampler;
  const auto processed = s.process(row, step, scratch);
  return dense(sampler.distribution(processed, s.params()), row.size());
}

TEST(SamplingControls, MinPKeepsTokensAboveTheFractionOfTheTopProbability) {
  TRACE_SEED();
  Sampler sampler;
  for (double min_p : {0.05, 0.2, 0.6}) {
    for (double temperature : {0.7, 1.0, 1.6}) {
      const auto logits = random_logits(40, 1);
      auto p = softmax(widen(logits), temperature);
      const double top = *std::max_element(p.begin(), p.end());
      for (double& v : p)
        if (v < min_p * top) v = 0;
      double sum = 0;
      for (double v : p) sum += v;
      for (double& v : p) v /= sum;
      SCOPED_TRACE("min_p " + std::to_string(min_p) + " temperature " + std::to_string(temperature));
      expect_distribution(dense(sampler.distribution(logits, {.temperature = temperature, .min_p = min_p}), 40), p);
    }
  }
  // min_p = 1 keeps only the top token(s); min_p combines with top_k (top_k first, same result).
  const auto logits = random_logits(40, 2);
  EXPECT_EQ(sampler.distribution(logits, {.min_p = 1.0}).size(), 1u);
  EXPECT_LE(sampler.distribution(logits, {.top_k = 3, .min_p = 0.01}).size(), 3u);
}

TEST(SamplingControls, LogitBiasIsAddedBeforeSoftmax) {
  TRACE_SEED();
  const auto logits = random_logits(30, 3);
  SamplingParams params{.temperature = 0.8};
  params.logit_bias = {{4, 3.5}, {17, -2.0}, {29, 100.0}};
  SequenceSampler s(params, std::vector<int32_t>{0, 1}, {});
  auto biased = widen(logits);
  biased[4] += 3.5;
  biased[17] -= 2.0;
  biased[29] += 100.0;
  expect_distribution(drawn_from(s, logits, 0), softmax(biased, 0.8));
  // A bias of -inf-like size removes a token in practice; greedy follows the biased argmax.
  SamplingParams greedy{.temperature = 0.0};
  greedy.logit_bias = {{7, 50.0}};
  SequenceSampler g(greedy, std::vector<int32_t>{0}, {});
  Sampler sampler;
  SamplingScratch scratch;
  EXPECT_EQ(g.sample(logits, 0, sampler, scratch).token, 7);
}

// vLLM's definitions written out: repetition over prompt + output, then frequency x count and
// presence over the output.
std::vector<double> penalised(std::vector<double> l, const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                              double repetition, double frequency, double presence) {
  std::map<int32_t, int> count;
  for (int32_t t : output) ++count[t];
  for (size_t t = 0; t < l.size(); ++t) {
    const auto id = static_cast<int32_t>(t);
    const bool seen = count.count(id) || std::find(prompt.begin(), prompt.end(), id) != prompt.end();
    if (seen) l[t] = l[t] > 0 ? l[t] / repetition : l[t] * repetition;
    if (count.count(id)) l[t] -= frequency * count[id] + presence;
  }
  return l;
}

TEST(SamplingControls, PenaltiesFollowVllmDefinitionsWithRepeatedTokens) {
  TRACE_SEED();
  const std::vector<int32_t> prompt = {3, 3, 8, 21, 8};
  const std::vector<int32_t> output = {5, 5, 5, 8, 12, 3, 5};  // 5 four times; 3 and 8 also in the prompt
  struct Case {
    double repetition, frequency, presence;
  };
  for (const Case& c : {Case{1.3, 0, 0}, Case{0.7, 0, 0}, Case{1, 0.5, 0}, Case{1, 0, 1.5}, Case{1, -0.4, -1.0},
                        Case{1.8, 1.1, 0.6}}) {
    SCOPED_TRACE("repetition " + std::to_string(c.repetition) + " frequency " + std::to_string(c.frequency) +
                 " presence " + std::to_string(c.presence));
    const auto logits = random_logits(24, 4);
    SamplingParams params{.temperature = 1.0};
    params.repetition_penalty = c.repetition;
    params.frequency_penalty = c.frequency;
    params.presence_penalty = c.presence;
    SequenceSampler s(params, prompt, {});
    for (int32_t t : output) s.accept(t);  // counts kept incrementally, token by token
    EXPECT_EQ(s.counts().output_count(5), 4);
    expect_distribution(drawn_from(s, logits, output.size()),
                        softmax(penalised(widen(logits), prompt, output, c.repetition, c.frequency, c.presence)));
  }
}

TEST(SamplingControls, PenaltiesLeaveMaskedTokensMasked) {
  std::vector<float> row = {1.0f, kNegInf, -2.0f, 3.0f};
  SamplingParams params{.repetition_penalty = 1.5};
  params.frequency_penalty = 2.0;
  params.presence_penalty = -2.0;
  TokenCounts counts;
  counts.add_prompt(std::vector<int32_t>{1, 2});
  counts.add_output(1);
  counts.add_output(3);
  counts.add_output(3);
  apply_penalties(row, params, counts);
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(row[1], kNegInf);
  EXPECT_FLOAT_EQ(row[2], -3.0f);
  EXPECT_FLOAT_EQ(row[3], 3.0f / 1.5f - 2.0f * 2 + 2.0f);
}

TEST(SamplingControls, MinTokensMasksStopIdsUntilReached) {
  // EOS (id 1) and a stop id (id 6) dominate the row: greedy picks EOS unless it is masked.
  std::vector<float> row(10, 0.0f);
  row[1] = 20.0f;
  row[6] = 19.0f;
  row[4] = 5.0f;
  SamplingParams params{.temperature = 0.0, .max_tokens = 10};
  params.min_tokens = 3;
  SequenceSampler s(params, std::vector<int32_t>{0}, SequenceSamplerOptions{.stop_ids = {6, 1}});
  Sampler sampler;
  SamplingScratch scratch;
  for (uint64_t step = 0; step < 3; ++step) EXPECT_EQ(s.sample(row, step, sampler, scratch).token, 4) << step;
  EXPECT_EQ(s.sample(row, 3, sampler, scratch).token, 1);
  // Sampled too: the stop ids have probability 0 before min_tokens.
  SamplingParams random{.temperature = 1.0, .max_tokens = 10};
  random.min_tokens = 2;
  SequenceSampler r(random, std::vector<int32_t>{0}, SequenceSamplerOptions{.stop_ids = {1, 6}});
  const auto before = drawn_from(r, row, 1), after = drawn_from(r, row, 2);
  EXPECT_EQ(before[1], 0.0);
  EXPECT_EQ(before[6], 0.0);
  EXPECT_GT(after[1], 0.5);
}

TEST(SamplingControls, LogprobsAreLogSoftmaxWithRankAndTopN) {
  TRACE_SEED();
  auto logits = random_logits(50, 5);
  logits[9] = kNegInf;  // masked: never in the top list
  std::vector<double> lp(logits.size());
  const auto p = softmax(widen(logits));
  for (size_t i = 0; i < p.size(); ++i) lp[i] = std::log(p[i]);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int32_t token : {order[0], order[7], order[30]}) {
    const TokenLogprob t = token_logprob(logits, token, 5);
    EXPECT_EQ(t.token_id, token);
    EXPECT_NEAR(t.logprob, lp[static_cast<size_t>(token)], 1e-5);
    EXPECT_EQ(t.rank, std::find(order.begin(), order.end(), token) - order.begin() + 1);
    ASSERT_EQ(t.top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(t.top[k].token_id, order[k]);
      EXPECT_NEAR(t.top[k].logprob, lp[static_cast<size_t>(order[k])], 1e-5);
    }
  }
  EXPECT_TRUE(token_logprob(logits, 3, 0).top.empty());
  const std::vector<float> two = {0.5f, kNegInf, kNegInf};
  EXPECT_EQ(token_logprob(two, 0, 3).top.size(), 1u);  // masked tokens are left out
  EXPECT_NEAR(token_logprob(two, 0, 3).logprob, 0.0, 1e-7);
}

TEST(SamplingControls, SampledLogprobsComeFromTheRawRowNotTheProcessedOne) {
  TRACE_SEED();
  const auto logits = random_logits(20, 6);
  SamplingParams params{.temperature = 0.5, .top_k = 3, .seed = 11};
  params.logit_bias = {{2, 4.0}};
  params.presence_penalty = 1.0;
  params.logprobs = 2;
  SequenceSampler s(params, std::vector<int32_t>{0}, {});
  s.accept(5);
  Sampler sampler;
  SamplingScratch scratch;
  const auto got = s.sample(logits, 1, sampler, scratch);
  ASSERT_TRUE(got.logprob.has_value());
  const auto want = token_logprob(logits, got.token, 2);
  EXPECT_EQ(got.logprob->logprob, want.logprob);
  EXPECT_EQ(got.logprob->rank, want.rank);
  EXPECT_EQ(got.logprob->top.size(), 2u);
}

TEST(SamplingControls, ValidateNamesTheField) {
  auto expect_rejected = [](SamplingParams p, const std::string& field, int64_t vocab = 100) {
    try {
      p.validate(vocab);
      ADD_FAILURE() << "accepted an invalid " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_rejected({.min_p = -0.1}, "min_p");
  expect_rejected({.min_p = 1.5}, "min_p");
  expect_rejected({.top_p = 0.0}, "top_p");
  expect_rejected({.n = 0}, "n must be");
  expect_rejected({.presence_penalty = 2.5}, "presence_penalty");
  expect_rejected({.frequency_penalty = -3}, "frequency_penalty");
  expect_rejected({.repetition_penalty = 0}, "repetition_penalty");
  expect_rejected({.repetition_penalty = -1}, "repetition_penalty");
  expect_rejected({.logit_bias = {{100, 1.0}}}, "logit_bias");
  expect_rejected({.logit_bias = {{-1, 1.0}}}, "logit_bias");
  expect_rejected({.logit_bias = {{3, std::nan("")}}}, "logit_bias");
  expect_rejected({.max_tokens = 4, .min_tokens = 5}, "min_tokens");
  expect_rejected({.min_tokens = -1}, "min_tokens");
  expect_rejected({.logprobs = -1}, "logprobs");
  expect_rejected({.logprobs = 21}, "logprobs");
  expect_rejected({.prompt_logprobs = 21}, "prompt_logprobs");
  expect_rejected({.stop_token_ids = {100}}, "stop token id");
  SamplingParams two;
  two.structured_outputs.regex = "a+";
  two.structured_outputs.json_object = true;
  expect_rejected(two, "structured_outputs");
  SamplingParams empty_choice;
  empty_choice.structured_outputs.choice.emplace();
  expect_rejected(empty_choice, "structured_outputs.choice");
  EXPECT_NO_THROW((SamplingParams{.logit_bias = {{99, -5}}, .min_tokens = 3, .logprobs = 20}.validate(100)));
}

}  // namespace
}  // namespace deepinfer::sampling
