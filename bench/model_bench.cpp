// CPU forward throughput on the bundled kjv-tiny-v4 model: prefill tokens/s and decode tokens/s,
// with the weight bytes streamed per decode step so the rate can be read against memory bandwidth.
#include <benchmark/benchmark.h>

#include <memory>
#include <numeric>

#include "model/model.h"

namespace {

using namespace deepinfer;

const model::CausalLM& kjv() {
  static std::unique_ptr<model::CausalLM> m = model::load_model(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4");
  return *m;
}

std::vector<int32_t> tokens(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(7 + (i * 131) % 4000);
  return ids;
}

void BM_Prefill(benchmark::State& state) {
  const auto& m = kjv();
  const auto ids = tokens(state.range(0));
  std::vector<float> logits;
  for (auto _ : state) {
    auto seq = m.new_sequence();
    m.forward(*seq, ids, logits, false);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Prefill)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

// One decode step after a context of range(0) tokens; the context is rebuilt outside the timer
// every 64 steps so its length stays near range(0).
void BM_Decode(benchmark::State& state) {
  const auto& m = kjv();
  const auto ids = tokens(state.range(0));
  std::vector<float> logits;
  std::unique_ptr<model::SequenceState> seq;
  int64_t steps = 0;
  for (auto _ : state) {
    if (steps++ % 64 == 0) {
      state.PauseTiming();
      seq = m.new_sequence();
      m.forward(*seq, ids, logits, false);
      state.ResumeTiming();
    }
    const int32_t next = 7 + static_cast<int32_t>(steps % 4000);
    m.forward(*seq, std::span(&next, 1), logits, false);
    benchmark::DoNotOptimize(logits.data());
  }
  int64_t weight_bytes = 0;
  for (const auto& g : m.parameter_summary()) weight_bytes += g.bytes;
  state.SetItemsProcessed(state.iterations());
  state.counters["weight_MB"] = static_cast<double>(weight_bytes) / 1e6;
}
BENCHMARK(BM_Decode)->Arg(16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
