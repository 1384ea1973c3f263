// Engine benchmarks.
//   BM_SchedulerStep/1000: scheduler overhead per step with 1,000 sequences decoding: the policy's
//     decision, applying it to the pool, and advancing the sequences (no model, no sampling).
//   BM_EngineStepFakeModel/1000: a whole LLMEngine::step() over 1,000 decoding sequences on the
//     fake model of tests/engine (ForwardBatch build, forward, 1,000 samples, stop checks);
//     `model_us` is the fake forward's share, `overhead_us` the rest.
//   BM_KjvDecode/N: CPU decode throughput of the bundled kjv-tiny-v4 with N sequences decoding at
//     once (contexts 64-192 tokens), tokens/s and the ratio to one sequence (target: >= 8x at 32).
#include <benchmark/benchmark.h>

#include <chrono>
#include <deque>
#include <memory>

#include "../tests/engine/fake_model.h"
#include "engine/llm_engine.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace {

using namespace deepinfer;
using Clock = std::chrono::steady_clock;

void BM_SchedulerStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  // 64-token blocks (as kjv): a sequence takes a new block every 64 steps.
  engine::testing::FakeModel model({.vocab = 64, .context = 1 << 30, .block_tokens = 64});
  kv::StatePool pool(model.state_layout(), n, n * 512);  // 32K positions each: enough for the fixed iterations
  engine::Scheduler scheduler(pool, engine::make_policy(engine::PolicyKind::DecodeFirst,
                                                        {.max_num_seqs = n, .max_num_batched_tokens = 8192}));
  std::deque<engine::Sequence> seqs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& s = seqs[static_cast<size_t>(i)];
    s.id = static_cast<uint64_t>(i);
    s.tokens.assign(16, 5);
    s.num_prompt_tokens = 16;
    s.max_positions = 1 << 30;
    scheduler.add(s);
  }
  auto run_step = [&] {
    const engine::StepPlan plan = scheduler.schedule();
    scheduler.complete(plan);
    for (const auto& e : plan.entries)
      if (e.sample) e.seq->tokens.push_back(7);
    return plan.entries.size();
  };
  while (scheduler.num_running() < n || seqs.back().num_output_tokens() == 0) run_step();  // all decoding
  size_t scheduled = 0;
  const auto start = Clock::now();
  for (auto _ : state) scheduled = run_step();
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  if (static_cast<int64_t>(scheduled) != n) state.SkipWithError("not every sequence was scheduled");
  state.counters["seqs"] = static_cast<double>(n);
  state.counters["us_per_step"] = total / static_cast<double>(state.iterations()) * 1e6;
  state.counters["ns_per_seq"] = total / static_cast<double>(state.iterations() * n) * 1e9;
}
BENCHMARK(BM_SchedulerStep)->Arg(1000)->Iterations(20000)->Unit(benchmark::kMicrosecond);

void BM_EngineStepFakeModel(benchmark::State& state) {
  const int64_t n = state.range(0);
  engine::testing::FakeModel model({.vocab = 64, .context = 1 << 30, .block_tokens = 64});
  model.record_sizes = false;
  engine::EngineOptions options;
  options.limits = {.max_num_seqs = n, .max_num_batched_tokens = 8192};
  options.kv_memory_bytes = size_t(n) * (model.state_layout().slot_bytes() + 128 * model.state_layout().block_bytes());
  engine::LLMEngine eng(model, nullptr, options);
  engine::RequestParams params;
  params.sampling.temperature = 0;
  params.sampling.max_tokens = 1 << 30;
  params.sampling.ignore_eos = true;
  for (int64_t i = 0; i < n; ++i) eng.add_request(std::vector<int32_t>(16, static_cast<int32_t>(2 + i % 60)), params);
  while (eng.step().size() < static_cast<size_t>(n)) {
  }
  model.forward_seconds = 0;
  const auto start = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(eng.step());
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  const auto steps = static_cast<double>(state.iterations());
  state.counters["us_per_step"] = total / steps * 1e6;
  state.counters["model_us"] = model.forward_seconds / steps * 1e6;
  state.counters["overhead_us"] = (total - model.forward_seconds) / steps * 1e6;
}
BENCHMARK(BM_EngineStepFakeModel)->Arg(1000)->Iterations(2000)->Unit(benchmark::kMicrosecond);

const model::CausalLM& kjv() {
  static std::unique_ptr<model::CausalLM> m = [] {
    return model::load_model(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4", model::load_options_from_env());
  }();
  return *m;
}

double g_batch1_tokens_per_second = 0;

void BM_KjvDecode(benchmark::State& state) {
  const int64_t n = state.range(0);
  constexpr int64_t kPrompt = 64, kRebuildEvery = 128;
  engine::EngineOptions options;
  options.limits = {.max_num_seqs = n, .max_num_batched_tokens = 8192};
  options.kv_memory_bytes = size_t(1) << 30;
  engine::LLMEngine eng(kjv(), nullptr, options);
  engine::RequestParams params;
  params.sampling.temperature = 0;
  params.sampling.max_tokens = 1 << 20;
  params.sampling.ignore_eos = true;
  std::vector<uint64_t> ids;
  // n fresh sequences with 64-token prompts, prefilled (untimed).
  auto rebuild = [&] {
    for (uint64_t id : ids) eng.abort(id);
    ids.clear();
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int32_t> prompt(kPrompt);
      for (int64_t t = 0; t < kPrompt; ++t) prompt[t] = static_cast<int32_t>(7 + (t * 131 + i * 17) % 4000);
      ids.push_back(eng.add_request(prompt, params));
    }
    while (eng.step().size() < static_cast<size_t>(n)) {
    }
  };
  int64_t steps = 0, tokens = 0;
  double seconds = 0;
  for (auto _ : state) {
    if (steps++ % kRebuildEvery == 0) {
      state.PauseTiming();
      rebuild();
      state.ResumeTiming();
    }
    const auto t0 = Clock::now();
    tokens += static_cast<int64_t>(eng.step().size());
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double rate = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
  if (n == 1) g_batch1_tokens_per_second = rate;
  state.SetItemsProcessed(tokens);
  state.counters["seqs"] = static_cast<double>(n);
  state.counters["tok_s"] = rate;
  state.counters["x_batch1"] = g_batch1_tokens_per_second > 0 ? rate / g_batch1_tokens_per_second : 0;
  state.counters["ms_per_step"] = seconds / static_cast<double>(std::max<int64_t>(steps, 1)) * 1e3;
}
BENCHMARK(BM_KjvDecode)->Arg(1)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
