// Prefix-cache benchmarks (CPU).
//   BM_TimeToFirstToken/N/mode: kjv-tiny-v4, a prompt of N tokens whose first 90% (a whole number
//     of 64-token blocks) an earlier turn's prompt computed; the time from add_request to its first
//     token, against the same prompt with prefix caching off, in the same run. mode 0 = no cache,
//     1 = bounded replay (keep 140), 2 = exact (window-state snapshots). Counter `ratio` is
//     cached / uncached TTFT (target <= 0.15); `computed` the prompt tokens run through the model.
//   BM_ReplayDivergence/model/keep: how far bounded replay moves outputs from the exact ones.
//     8 prompts share a prefix; a second pass over the same prompts hits it. Against an uncached
//     engine (batch-invariant numerics): `max_abs_diff` of the first generated row's logits,
//     `greedy_agree` the fraction of the (up to 16) greedy tokens that agree before the first difference,
//     `same_runs` the fraction of prompts whose 16 tokens are all equal. model 0 = kjv, 1 =
//     v4_tiny_a, 2 = v4_tiny_b; keep 0 = the model's window.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "engine/llm_engine.h"
#include "model/model.h"

namespace {

using namespace deepinfer;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const fs::path kModels[] = {fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4",
                            fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures" / "v4_tiny_a",
                            fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures" / "v4_tiny_b"};

const model::CausalLM& model_at(size_t i) {
  static std::map<size_t, std::unique_ptr<model::CausalLM>> loaded;
  auto& m = loaded[i];
  if (!m) m = model::load_model(kModels[i], {.batch_invariant = true});
  return *m;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(n);
  for (auto& t : out) t = id(rng);
  return out;
}

engine::EngineOptions options(bool caching, int64_t keep) {
  engine::EngineOptions o;
  o.limits.max_num_seqs = 16;
  o.limits.max_num_batched_tokens = 4096;
  o.kv_memory_bytes = size_t{512} << 20;
  o.seed = 1;
  o.enable_prefix_caching = caching;
  o.swa_replay_keep = keep;
  return o;
}

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> first_row;
  double ttft = 0;
};

Result run_one(engine::LLMEngine& e, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  engine::RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = max_tokens;
  p.return_logits = true;
  Result r;
  const auto start = Clock::now();
  e.add_request(prompt, p);
  while (e.has_unfinished())
    for (const auto& d : e.step()) {
      if (r.ids.empty()) {
        r.ttft = std::chrono::duration<double>(Clock::now() - start).count();
        r.first_row.assign(d.logits.begin(), d.logits.begin() + static_cast<std::ptrdiff_t>(e.model().vocab_size()));
      }
      r.ids.insert(r.ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
    }
  return r;
}

void BM_TimeToFirstToken(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const int64_t mode = state.range(1);
  const model::CausalLM& kjv = model_at(0);
  const size_t cached = n * 9 / 10 / 64 * 64;
  std::mt19937_64 rng(42);
  const auto prefix = random_ids(rng, cached, kjv.vocab_size());
  auto make_prompt = [&] {
    auto p = prefix;
    const auto tail = random_ids(rng, n - cached, kjv.vocab_size());
    p.insert(p.end(), tail.begin(), tail.end());
    p[0] = 0;
    return p;
  };
  engine::LLMEngine uncached(kjv, nullptr, options(false, 0));
  engine::LLMEngine engine(kjv, nullptr, options(mode != 0, mode == 2 ? 0 : 140));
  // The earlier turn: the prefix and one more token (its state at the prefix's end is what exact
  // mode snapshots); it also warms both engines up.
  auto turn = prefix;
  turn.push_back(5);
  turn[0] = 0;
  run_one(engine, turn, 1);
  run_one(uncached, turn, 1);
  double cached_s = 0, uncached_s = 0;
  int64_t computed = 0;
  for (auto _ : state) {
    const auto prompt = make_prompt();
    const int64_t before = engine.stats().computed_prompt_tokens;
    cached_s += run_one(engine, prompt, 1).ttft;
    computed = engine.stats().computed_prompt_tokens - before;
    uncached_s += run_one(uncached, prompt, 1).ttft;
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["ttft_ms"] = cached_s / iters * 1e3;
  state.counters["uncached_ttft_ms"] = uncached_s / iters * 1e3;
  state.counters["ratio"] = cached_s / uncached_s;
  state.counters["computed"] = static_cast<double>(computed);
  state.counters["cached_fraction"] = static_cast<double>(cached) / static_cast<double>(n);
}
BENCHMARK(BM_TimeToFirstToken)
    ->ArgsProduct({{1280, 3200}, {0, 1, 2}})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

void BM_ReplayDivergence(benchmark::State& state) {
  const auto which = static_cast<size_t>(state.range(0));
  const model::CausalLM& model = model_at(which);
  int64_t window = 0;
  for (const auto& l : model.state_layout().layers) window = std::max(window, l.window.window);
  const int64_t keep = state.range(1) == 0 ? window : state.range(1);
  const size_t prefix_len = which == 0 ? 300 : 200;  // fixtures: 256 positions at most
  constexpr int64_t kTokens = 16;
  std::mt19937_64 rng(7 + which);
  auto prefix = random_ids(rng, prefix_len, model.vocab_size());
  prefix[0] = 0;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    auto p = prefix;
    const auto tail = random_ids(rng, 20 + rng() % 21, model.vocab_size());
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(std::move(p));
  }
  double max_diff = 0, agree = 0, same = 0;
  for (auto _ : state) {
    engine::LLMEngine exact(model, nullptr, options(false, 0));
    engine::LLMEngine replay(model, nullptr, options(true, keep));
    for (const auto& p : prompts) run_one(replay, p, kTokens);  // first pass: fills the cache
    max_diff = agree = same = 0;
    for (const auto& p : prompts) {
      const Result want = run_one(exact, p, kTokens), got = run_one(replay, p, kTokens);
      for (size_t v = 0; v < want.first_row.size(); ++v) {
        const double d = std::fabs(static_cast<double>(want.first_row[v]) - got.first_row[v]);
        max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
      }
      size_t equal = 0;
      while (equal < want.ids.size() && equal < got.ids.size() && want.ids[equal] == got.ids[equal]) ++equal;
      agree += want.ids.empty() ? 1.0 : static_cast<double>(equal) / static_cast<double>(want.ids.size());
      same += want.ids == got.ids ? 1 : 0;
    }
  }
  state.counters["keep"] = static_cast<double>(keep);
  state.counters["max_abs_diff"] = max_diff;
  state.counters["greedy_agree"] = agree / static_cast<double>(prompts.size());
  state.counters["same_runs"] = same / static_cast<double>(prompts.size());
}
BENCHMARK(BM_ReplayDivergence)
    ->ArgsProduct({{0, 1, 2}, {0, 140, 256}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
