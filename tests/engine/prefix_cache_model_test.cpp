// Prefix caching on the real kjv model: 50 requests sharing a 300-token prefix, each with its own
// suffix, run twice through one engine. The second pass must hit (> 0.8 of its prompt tokens by
// the cache's counters) and compute correspondingly fewer prompt tokens; in exact mode
// (swa_replay_keep = 0) every output is bit-identical to an engine without the cache (batch-
// invariant numerics). Bounded replay must never read another sequence's window: with every slot
// poisoned with NaN when handed out, its outputs are finite and bit-identical to unpoisoned ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "engine/llm_engine.h"
#include "model/model.h"

namespace deepinfer::engine {
namespace {

namespace fs = std::filesystem;
const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";

uint64_t test_seed() {
  if (const char* env = std::getenv("DEEPINFER_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  return std::random_device{}();
}

const model::CausalLM& kjv() {
  static const auto model = model::load_model(kKjv, {.batch_invariant = true});
  return *model;
}

// 50 prompts: BOS + a shared 299-token prefix + 30..60 tokens of their own.
std::vector<std::vector<int32_t>> shared_prefix_prompts(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(kjv().vocab_size() - 1));
  std::vector<int32_t> prefix{0};
  while (prefix.size() < 300) prefix.push_back(id(rng));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 50; ++i) {
    auto p = prefix;
    const auto extra = 30 + rng() % 31;
    for (size_t k = 0; k < extra; ++k) p.push_back(id(rng));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

struct Pass {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> cached_tokens;
  int64_t prompt_tokens = 0, computed_prompt_tokens = 0;
  kv::PrefixCacheStats cache;  // the counters' change over this pass
};

Pass run_pass(LLMEngine& engine, const std::vector<std::vector<int32_t>>& prompts) {
  const EngineStats before = engine.stats();
  const kv::PrefixCacheStats cache_before = engine.prefix_cache() ? engine.prefix_cache()->stats() : kv::PrefixCacheStats{};
  std::map<uint64_t, size_t> index;
  for (const auto& p : prompts) {
    RequestParams params;
    params.sampling.temperature = 0;
    params.sampling.max_tokens = 6;
    params.return_logits = true;
    index[engine.add_request(p, params)] = index.size();
  }
  Pass pass;
  pass.ids.resize(prompts.size());
  pass.logits.resize(prompts.size());
  pass.cached_tokens.resize(prompts.size(), -1);
  while (engine.has_unfinished())
    for (const RequestDelta& d : engine.step()) {
      const size_t i = index.at(d.id);
      pass.ids[i].insert(pass.ids[i].end(), d.new_token_ids.begin(), d.new_token_ids.end());
      pass.logits[i].insert(pass.logits[i].end(), d.logits.begin(), d.logits.end());
      if (d.finished) pass.cached_tokens[i] = d.num_cached_tokens;
    }
  pass.prompt_tokens = engine.stats().prompt_tokens - before.prompt_tokens;
  pass.computed_prompt_tokens = engine.stats().computed_prompt_tokens - before.computed_prompt_tokens;
  if (engine.prefix_cache()) {
    const auto& now = engine.prefix_cache()->stats();
    pass.cache.queries = now.queries - cache_before.queries;
    pass.cache.queried_tokens = now.queried_tokens - cache_before.queried_tokens;
    pass.cache.hit_tokens = now.hit_tokens - cache_before.hit_tokens;
    pass.cache.shortened_hits = now.shortened_hits - cache_before.shortened_hits;
  }
  return pass;
}

EngineOptions options(bool caching, int64_t keep) {
  EngineOptions o;
  o.limits.max_num_seqs = 64;
  o.limits.max_num_batched_tokens = 2048;
  o.kv_memory_bytes = size_t{256} << 20;
  o.seed = 1;
  o.enable_prefix_caching = caching;
  o.swa_replay_keep = keep;
  return o;
}

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

TEST(PrefixCacheKjv, ExactModeSecondPassHitsAndEqualsNoCacheBitForBit) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED)");
  const auto prompts = shared_prefix_prompts(seed);
  LLMEngine plain(kjv(), nullptr, options(false, 0));
  const Pass want = run_pass(plain, prompts);
  EXPECT_EQ(want.computed_prompt_tokens, want.prompt_tokens);

  LLMEngine cached(kjv(), nullptr, options(true, 0));
  ASSERT_NE(cached.prefix_cache(), nullptr);
  ASSERT_EQ(cached.prefix_cache()->snapshot_slots(), 64);
  const Pass first = run_pass(cached, prompts), second = run_pass(cached, prompts);
  const double rate = second.cache.hit_rate();
  EXPECT_GT(rate, 0.8) << second.cache.hit_tokens << " of " << second.cache.queried_tokens << " tokens";
  EXPECT_LT(second.computed_prompt_tokens, second.prompt_tokens / 5)
      << "a hit must skip the cached tokens (" << second.computed_prompt_tokens << " of " << second.prompt_tokens << ")";
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(first.ids[i], want.ids[i]) << "prompt " << i << ", first pass";
    EXPECT_EQ(second.ids[i], want.ids[i]) << "prompt " << i << ", second pass";
    EXPECT_TRUE(second.logits[i] == want.logits[i]) << "prompt " << i << ": logits not bit-identical after a hit";
    EXPECT_EQ(second.cached_tokens[i], (static_cast<int64_t>(prompts[i].size()) - 1) / 64 * 64) << "prompt " << i;
  }
}

TEST(PrefixCacheKjv, BoundedReplaySecondPassHitsAndComputesOnlyTheReplay) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED)");
  const auto prompts = shared_prefix_prompts(seed);
  LLMEngine cached(kjv(), nullptr, options(true, 140));
  run_pass(cached, prompts);
  const Pass second = run_pass(cached, prompts);
  EXPECT_GT(second.cache.hit_rate(), 0.8);
  // Per prompt: the replay (140 tokens before the hit) and the tokens after it.
  int64_t expect = 0;
  for (const auto& p : prompts) {
    const auto hit = (static_cast<int64_t>(p.size()) - 1) / 64 * 64;
    expect += std::min<int64_t>(140, hit) + static_cast<int64_t>(p.size()) - hit;
  }
  EXPECT_EQ(second.computed_prompt_tokens, expect);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_TRUE(all_finite(second.logits[i])) << "prompt " << i;
}

TEST(PrefixCacheKjv, BoundedReplayNeverReadsAnotherSequencesWindow) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED)");
  auto prompts = shared_prefix_prompts(seed);
  prompts.resize(12);
  std::vector<Pass> got;
  for (bool poison : {false, true}) {
    EngineOptions o = options(true, 140);
    o.limits.max_num_seqs = 4;  // slots are reused by other sequences
    LLMEngine engine(kjv(), nullptr, o);
    engine.poison_slots_for_testing(poison);
    run_pass(engine, prompts);
    got.push_back(run_pass(engine, prompts));
    EXPECT_GT(got.back().cache.hit_rate(), 0.8);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(all_finite(got[1].logits[i])) << "prompt " << i << " read a slot row it never wrote";
    EXPECT_TRUE(got[1].logits[i] == got[0].logits[i]) << "prompt " << i;
  }
}

}  // namespace
}  // namespace deepinfer::engine
