// The sampling controls through LLMEngine on the fake model (fake_model.h): n completions per
// request (distinct seeds, reproducible), logprobs equal to log_softmax of the returned rows,
// prompt logprobs equal to the from-scratch rows whatever the chunking or preemption, penalties
// and logit_bias against a hand-written reference loop, min_tokens holding EOS back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "engine/fake_model.h"
#include "engine/llm_engine.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::engine {
namespace {

using testing::FakeModel;
using testing::FakeModelOptions;

constexpr int64_t kVocab = 64;

// Prefix caching off: these tests are about sampling (one test below covers the two together).
EngineOptions options(int64_t seqs, int64_t budget, size_t memory = size_t(1) << 26) {
  EngineOptions o;
  o.enable_prefix_caching = false;
  o.limits.max_num_seqs = seqs;
  o.limits.max_num_batched_tokens = budget;
  o.kv_memory_bytes = memory;
  o.seed = 7;
  return o;
}

struct Output {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  std::vector<sampling::TokenLogprob> logprobs;
  std::vector<std::optional<sampling::TokenLogprob>> prompt_logprobs;
  RequestDelta last;
};

// (request id, completion index) -> what it produced.
std::map<std::pair<uint64_t, size_t>, Output> run_all(LLMEngine& engine) {
  std::map<std::pair<uint64_t, size_t>, Output> out;
  while (engine.has_unfinished()) {
    for (auto& d : engine.step()) {
      auto& o = out[{d.id, d.index}];
      o.ids.insert(o.ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
      o.logits.insert(o.logits.end(), d.logits.begin(), d.logits.end());
      o.logprobs.insert(o.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      if (!d.prompt_logprobs.empty()) {
        EXPECT_TRUE(o.prompt_logprobs.empty()) << "prompt logprobs are delivered once";
        o.prompt_logprobs = d.prompt_logprobs;
      }
      if (d.finished) o.last = d;
    }
  }
  return out;
}

std::vector<double> log_softmax(std::span<const float> row) {
  double max_value = -1e300;
  for (float v : row) max_value = std::max<double>(max_value, v);
  double sum = 0;
  for (float v : row) sum += std::exp(v - max_value);
  std::vector<double> out;
  for (float v : row) out.push_back(v - max_value - std::log(sum));
  return out;
}

RequestParams sampled(int64_t max_tokens, std::optional<uint64_t> seed = {}) {
  RequestParams p;
  p.sampling.temperature = 1.0;
  p.sampling.max_tokens = max_tokens;
  p.seed = seed;
  return p;
}

TEST(EngineSampling, NCompletionsHaveDistinctSeedsAndReproduce) {
  FakeModel model;
  const std::vector<int32_t> prompt{0, 9, 4, 33};
  auto run = [&](RequestParams params) {
    LLMEngine engine(model, nullptr, options(8, 64));
    const uint64_t id = engine.add_request(prompt, params);
    EXPECT_EQ(engine.num_requests(), 1u);
    auto got = run_all(engine);
    EXPECT_EQ(engine.stats().finished_requests, 1);
    std::vector<Output> outs;
    for (size_t i = 0; i < static_cast<size_t>(params.sampling.n); ++i) outs.push_back(got.at({id, i}));
    EXPECT_EQ(got.size(), outs.size());
    return outs;
  };
  RequestParams seeded = sampled(20, 100);
  seeded.sampling.n = 3;
  const auto a = run(seeded), b = run(seeded);
  std::set<std::vector<int32_t>> streams;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].last.seed, 100 + i);  // vLLM: seed + index
    EXPECT_EQ(a[i].ids, b[i].ids);       // seeded completions reproduce
    streams.insert(a[i].ids);
  }
  EXPECT_EQ(streams.size(), 3u);  // three different continuations of the same prompt
  // Completion i equals a single request seeded with seed + i.
  const auto single = run(sampled(20, 101));
  EXPECT_EQ(single[0].ids, a[1].ids);

  RequestParams unseeded = sampled(20);
  unseeded.sampling.n = 2;
  const auto u = run(unseeded);
  EXPECT_NE(u[0].last.seed, u[1].last.seed);
  EXPECT_NE(u[0].ids, u[1].ids);
}

TEST(EngineSampling, AbortingAnNRequestFreesEverySequence) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(8, 16));
  RequestParams p = sampled(30, 1);
  p.sampling.n = 4;
  const uint64_t id = engine.add_request({0, 1, 2, 3, 4, 5}, p);
  const uint64_t other = engine.add_request({0, 7}, sampled(3, 2));
  size_t other_tokens = 0;
  for (int i = 0; i < 2; ++i)
    for (const auto& d : engine.step()) other_tokens += d.id == other ? d.new_token_ids.size() : 0;
  EXPECT_TRUE(engine.abort(id));
  EXPECT_FALSE(engine.abort(id + 1));  // a completion's sequence id is not a request id
  const auto got = run_all(engine);
  EXPECT_EQ(other_tokens + got.at({other, 0}).ids.size(), 3u);
  EXPECT_EQ(engine.pool().free_slot_count(), engine.pool().num_slots());
  EXPECT_EQ(engine.stats().aborted_requests, 1);
}

TEST(EngineSampling, LogprobsAreLogSoftmaxOfTheReturnedRows) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(4, 64));
  RequestParams p = sampled(12, 3);
  p.sampling.logprobs = 4;
  p.sampling.top_k = 5;
  p.sampling.temperature = 0.7;
  p.sampling.presence_penalty = 1.0;  // processing does not change the reported logprobs
  p.return_logits = true;
  const uint64_t id = engine.add_request({0, 5, 6}, p);
  const auto got = run_all(engine).at({id, 0});
  ASSERT_EQ(got.logprobs.size(), got.ids.size());
  ASSERT_EQ(got.logits.size(), got.ids.size() * kVocab);
  for (size_t k = 0; k < got.ids.size(); ++k) {
    const auto row = std::span<const float>(got.logits).subspan(k * kVocab, kVocab);
    const auto lp = log_softmax(row);
    const auto& t = got.logprobs[k];
    EXPECT_EQ(t.token_id, got.ids[k]);
    EXPECT_NEAR(t.logprob, lp[static_cast<size_t>(t.token_id)], 1e-5) << "token " << k;
    int64_t rank = 1;
    for (double v : lp) rank += v > lp[static_cast<size_t>(t.token_id)];
    EXPECT_EQ(t.rank, rank);
    ASSERT_EQ(t.top.size(), 4u);
    for (const auto& top : t.top) EXPECT_NEAR(top.logprob, lp[static_cast<size_t>(top.token_id)], 1e-5);
    EXPECT_GE(t.top[0].logprob, t.top[3].logprob);
    EXPECT_NEAR(t.top[0].logprob, *std::max_element(lp.begin(), lp.end()), 1e-5);
  }
}

TEST(EngineSampling, PromptLogprobsMatchTheFromScratchRowsWhateverTheChunking) {
  FakeModel model;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> token(2, kVocab - 1);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(3 + 11 * i));
    for (auto& t : p) t = token(rng);
    prompts.push_back(p);
  }
  prompts.push_back({0});  // one token: nothing to report but the leading null
  // A tight pool (preemption mid-prompt) and a small step budget (prefill in chunks).
  for (size_t memory : {size_t(1) << 26, size_t(0)}) {
    EngineOptions o = options(4, 9, memory);
    if (memory == 0) {
      const auto& layout = model.state_layout();
      o.kv_memory_bytes = kv::StatePool::budget_for(layout, 4, 12);
    }
    LLMEngine engine(model, nullptr, o);
    std::vector<uint64_t> ids;
    for (const auto& p : prompts) {
      RequestParams params = sampled(25, 9);
      params.sampling.prompt_logprobs = 3;
      params.sampling.n = 2;  // only completion 0 carries them
      ids.push_back(engine.add_request(p, params));
    }
    const auto got = run_all(engine);
    if (memory == 0) {
      EXPECT_GT(engine.stats().preemptions, 0);
    }
    for (size_t r = 0; r < prompts.size(); ++r) {
      const auto& prompt = prompts[r];
      const auto& pl = got.at({ids[r], 0}).prompt_logprobs;
      EXPECT_TRUE(got.at({ids[r], 1}).prompt_logprobs.empty());
      ASSERT_EQ(pl.size(), prompt.size());
      EXPECT_FALSE(pl[0].has_value());
      for (size_t k = 1; k < prompt.size(); ++k) {
        ASSERT_TRUE(pl[k].has_value());
        const auto row = model.reference_logits(std::span<const int32_t>(prompt).first(k));
        const auto lp = log_softmax(row);
        EXPECT_EQ(pl[k]->token_id, prompt[k]);
        EXPECT_NEAR(pl[k]->logprob, lp[static_cast<size_t>(prompt[k])], 1e-5) << "prompt " << r << " token " << k;
        ASSERT_EQ(pl[k]->top.size(), 3u);
        EXPECT_NEAR(pl[k]->top[0].logprob, *std::max_element(lp.begin(), lp.end()), 1e-5);
      }
    }
    EXPECT_EQ(engine.available_blocks(), engine.pool().num_blocks());
  }
}

TEST(EngineSampling, PromptLogprobsSkipThePrefixCache) {
  // The same prompt twice, one after the other, with the prefix cache on: the second would hit
  // its first 5 blocks, but a request that wants prompt logprobs must compute every row.
  FakeModel model;
  EngineOptions o = options(4, 64);
  o.enable_prefix_caching = true;
  LLMEngine engine(model, nullptr, o);
  std::vector<int32_t> prompt(45);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(2 + (i * 7) % 60);
  std::vector<std::vector<std::optional<sampling::TokenLogprob>>> runs;
  for (int pass = 0; pass < 2; ++pass) {
    RequestParams params = sampled(4, 1);
    params.sampling.prompt_logprobs = 1;
    const uint64_t id = engine.add_request(prompt, params);
    runs.push_back(run_all(engine).at({id, 0}).prompt_logprobs);
  }
  ASSERT_EQ(runs[1].size(), prompt.size());
  for (size_t k = 1; k < prompt.size(); ++k) {
    ASSERT_TRUE(runs[0][k] && runs[1][k]) << k;
    EXPECT_EQ(runs[0][k]->logprob, runs[1][k]->logprob) << k;
  }
}

// Greedy with penalties and bias, written out from the definitions over from-scratch logits.
std::vector<int32_t> penalised_greedy(const FakeModel& model, std::vector<int32_t> context, int64_t max_tokens,
                                      double repetition, double frequency, double presence,
                                      const std::vector<std::pair<int32_t, double>>& bias) {
  const std::vector<int32_t> prompt = context;
  std::vector<int32_t> out;
  for (int64_t step = 0; step < max_tokens; ++step) {
    auto row = model.reference_logits(context);
    std::vector<double> l(row.begin(), row.end());
    for (const auto& [id, b] : bias) l[static_cast<size_t>(id)] += b;
    for (size_t t = 0; t < l.size(); ++t) {
      const auto id = static_cast<int32_t>(t);
      const auto count = std::count(out.begin(), out.end(), id);
      const bool seen = count > 0 || std::find(prompt.begin(), prompt.end(), id) != prompt.end();
      if (seen) l[t] = l[t] > 0 ? l[t] / repetition : l[t] * repetition;
      if (count > 0) l[t] -= frequency * static_cast<double>(count) + presence;
    }
    const auto id = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    out.push_back(id);
    context.push_back(id);
    if (id == 1) break;
  }
  return out;
}

TEST(EngineSampling, PenaltiesAndBiasMatchAHandWrittenReference) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(8, 20));
  struct Case {
    double repetition, frequency, presence;
    std::vector<std::pair<int32_t, double>> bias;
  };
  const std::vector<Case> cases = {
      {1.0, 0.0, 0.0, {}}, {1.5, 0.0, 0.0, {}}, {1.0, 0.6, 0.0, {}}, {1.0, 0.0, 1.2, {}},
      {1.3, 0.4, 0.5, {{10, 2.0}, {11, -3.0}}}, {1.0, 0.0, 0.0, {{20, 10.0}}}};
  const std::vector<int32_t> prompt{0, 12, 12, 40, 3};
  std::vector<std::pair<uint64_t, std::vector<int32_t>>> expected;
  for (const Case& c : cases) {
    RequestParams p;
    p.sampling.temperature = 0.0;
    p.sampling.max_tokens = 30;
    p.sampling.repetition_penalty = c.repetition;
    p.sampling.frequency_penalty = c.frequency;
    p.sampling.presence_penalty = c.presence;
    p.sampling.logit_bias = c.bias;
    const uint64_t id = engine.add_request(prompt, p);
    expected.emplace_back(id, penalised_greedy(model, prompt, 30, c.repetition, c.frequency, c.presence, c.bias));
  }
  const auto got = run_all(engine);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got.at({expected[i].first, 0}).ids, expected[i].second) << i;
  // The penalties did something: plain greedy repeats tokens, frequency 0.6 repeats fewer.
  auto repeats = [](const std::vector<int32_t>& ids) {
    return ids.size() - std::set<int32_t>(ids.begin(), ids.end()).size();
  };
  EXPECT_LT(repeats(expected[2].second), repeats(expected[0].second));
  EXPECT_NE(expected[5].second, expected[0].second);
}

TEST(EngineSampling, MinTokensHoldsEosBack) {
  FakeModel model(FakeModelOptions{.eos_after = 0});  // EOS is always the top token
  LLMEngine engine(model, nullptr, options(4, 64));
  RequestParams p;
  p.sampling.temperature = 0.0;
  p.sampling.max_tokens = 20;
  const uint64_t plain = engine.add_request({0, 5}, p);
  p.sampling.min_tokens = 6;
  const uint64_t held = engine.add_request({0, 5}, p);
  p.sampling.stop_token_ids = {1};
  p.sampling.ignore_eos = true;  // a stop id is held back too
  const uint64_t stop_id = engine.add_request({0, 5}, p);
  const auto got = run_all(engine);
  EXPECT_EQ(got.at({plain, 0}).ids, std::vector<int32_t>{1});
  ASSERT_EQ(got.at({held, 0}).ids.size(), 7u);
  EXPECT_EQ(got.at({held, 0}).ids.back(), 1);
  EXPECT_EQ(std::count(got.at({held, 0}).ids.begin(), got.at({held, 0}).ids.end(), 1), 1);
  EXPECT_EQ(got.at({held, 0}).last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(got.at({stop_id, 0}).ids.size(), 7u);
}

TEST(OutputTextOptions, IncludeStopStringAndMinTokens) {
  const auto tokenizer = Tokenizer::from_model_dir(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4");
  auto push_all = [&](OutputText& text, const std::string& s) {
    for (int32_t id : tokenizer.encode(s))
      if (text.push(id)) return true;
    return false;
  };
  OutputText kept(&tokenizer, true, {"LORD"}, /*include_stop_str_in_output=*/true);
  EXPECT_TRUE(push_all(kept, "And the LORD said"));
  EXPECT_EQ(kept.text(), "And the LORD");
  EXPECT_EQ(kept.take_delta(), "And the LORD");
  OutputText trimmed(&tokenizer, true, {"LORD"});
  EXPECT_TRUE(push_all(trimmed, "And the LORD said"));
  EXPECT_EQ(trimmed.text(), "And the ");

  // min_tokens: a stop string completed by the first min_tokens tokens does not count (vLLM).
  const auto ids = tokenizer.encode("LORD LORD");
  const auto first = tokenizer.encode("LORD");
  OutputText late(&tokenizer, true, {"LORD"}, false, static_cast<int64_t>(first.size()));
  bool stopped = false;
  for (int32_t id : ids) stopped = stopped || late.push(id);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(late.text(), "LORD ");
}

TEST(EngineSampling, RejectsBadParametersNamingTheField) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(2, 64));
  auto message = [&](RequestParams p) -> std::string {
    try {
      engine.add_request({0, 3}, p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  RequestParams bias;
  bias.sampling.logit_bias = {{kVocab, 1.0}};
  EXPECT_NE(message(bias).find("logit_bias"), std::string::npos);
  RequestParams n;
  n.sampling.n = 0;
  EXPECT_NE(message(n).find("n must be >= 1"), std::string::npos);
  RequestParams guided;  // guided decoding needs a tokenizer
  guided.sampling.structured_outputs.regex = "[0-9]+";
  EXPECT_NE(message(guided).find("structured_outputs"), std::string::npos);
  EXPECT_FALSE(engine.has_unfinished());
}

}  // namespace
}  // namespace deepinfer::engine
