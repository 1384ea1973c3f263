// Recorded decode steps (CUDA graphs): a model whose decode steps are captured and replayed gives,
// step after step, the same logits bit for bit as the same model launching every kernel
// (enforce_eager), while sequences grow across blocks, compressor windows and the next power of
// two of block capacity. On CUDA the steps must really be replayed (the statistics say so); a replay
// that stops matching partway falls back without changing a bit; a batch size outside
// cuda_graph_sizes is never replayed. On the CPU nothing is recorded and both paths are one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "model/model.h"
#include "testing/random_seed.h"

namespace deepinfer {
namespace {

using testing_util::argmax;
using testing_util::test_seed;

const std::string kData = DEEPINFER_TEST_DATA_DIR;
const std::string kModels = DEEPINFER_MODELS_DIR;

// `batch` sequences with prompts of mixed lengths, prefilled in one step, then `steps` decode steps
// run on both models with the same tokens (the eager model's greedy picks).
struct Lockstep {
  const model::CausalLM& eager;
  const model::CausalLM& recorded;
  int64_t batch, steps;
  uint32_t seed;

  void run() const {
    const auto& layout = eager.state_layout();
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> prompts;
    int64_t blocks = 0;
    for (int64_t i = 0; i < batch; ++i) {
      // Up to 200 tokens, within the model's positions after `steps` more.
      const int64_t longest = std::min<int64_t>(200, eager.config().max_position_embeddings - steps - 1);
      std::vector<int32_t> p(static_cast<size_t>(5 + rng() % static_cast<uint32_t>(longest - 4)));
      for (auto& t : p) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(eager.vocab_size() - 3));
      blocks += layout.blocks_for(static_cast<int64_t>(p.size()) + steps + 1);
      prompts.push_back(std::move(p));
    }
    kv::StatePool pool_e(layout, batch, blocks, eager.backend().allocator());
    kv::StatePool pool_r(layout, batch, blocks, recorded.backend().allocator());
    std::vector<int32_t> slots;
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
    std::vector<int64_t> length(static_cast<size_t>(batch), 0);
    for (int64_t i = 0; i < batch; ++i) {
      slots.push_back(*pool_e.allocate_slot());
      ASSERT_EQ(slots.back(), *pool_r.allocate_slot());
    }
    // Both pools hand out the same blocks: one table serves both.
    auto grow = [&](size_t i, int64_t tokens) {
      std::vector<int32_t> other = tables[i];
      const int64_t need = layout.blocks_for(length[i] + tokens) - static_cast<int64_t>(tables[i].size());
      ASSERT_TRUE(pool_e.allocate_blocks(need, tables[i]));
      ASSERT_TRUE(pool_r.allocate_blocks(need, other));
      ASSERT_EQ(tables[i], other);
    };
    std::vector<int32_t> feed(static_cast<size_t>(batch));
    const auto V = static_cast<size_t>(eager.vocab_size());
    for (int64_t step = 0; step <= steps; ++step) {
      model::ForwardBatch b;
      for (size_t i = 0; i < static_cast<size_t>(batch); ++i) {
        const std::span<const int32_t> tokens = step == 0 ? std::span<const int32_t>(prompts[i]) : std::span(&feed[i], 1);
        grow(i, static_cast<int64_t>(tokens.size()));
        b.add(slots[i], tables[i], length[i], tokens);
        length[i] += static_cast<int64_t>(tokens.size());
      }
      std::vector<float> le, lr;
      eager.forward(b, pool_e, le);
      recorded.forward(b, pool_r, lr);
      ASSERT_EQ(le.size(), V * static_cast<size_t>(batch));
      ASSERT_EQ(le.size(), lr.size());
      for (float v : lr) ASSERT_TRUE(std::isfinite(v)) << "seed " << seed << " step " << step;
      ASSERT_EQ(0, std::memcmp(le.data(), lr.data(), le.size() * sizeof(float)))
          << "seed " << seed << ", batch " << batch << ", step " << step << " (0 = prefill)";
      for (size_t i = 0; i < static_cast<size_t>(batch); ++i)
        feed[i] = argmax(std::span<const float>(le).subspan(i * V, V));
    }
  }
};

class StepGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(StepGraphs, ReplayedDecodeStepsEqualEagerOnesBitForBit) {
  const uint32_t seed = test_seed();
  model::LoadOptions eager_options;
  eager_options.enforce_eager = true;
  model::LoadOptions recorded_options;
  recorded_options.cuda_graph_sizes = {1, 2, 4, 8};  // 3 is left out on purpose
  const auto eager = model::load_model(GetParam(), eager_options);
  const auto recorded = model::load_model(GetParam(), recorded_options);
  const bool cuda = recorded->backend().name() == "cuda";
  std::printf("seed %u, device %s\n", seed, std::string(recorded->backend().name()).c_str());

  constexpr int64_t kSteps = 100;  // kjv: prompts up to 200 tokens, so tables grow past 4 blocks
  for (const int64_t batch : {1, 8}) {
    const auto before = recorded->backend().step_graph_stats();
    Lockstep{*eager, *recorded, batch, kSteps, seed + static_cast<uint32_t>(batch)}.run();
    if (HasFatalFailure()) return;
    const auto after = recorded->backend().step_graph_stats();
    std::printf("batch %lld: eager %lld, captures %lld, replays %lld, mismatches %lld, capture failures %lld\n",
                static_cast<long long>(batch), static_cast<long long>(after.eager - before.eager),
                static_cast<long long>(after.captures - before.captures),
                static_cast<long long>(after.replays - before.replays),
                static_cast<long long>(after.mismatches - before.mismatches),
                static_cast<long long>(after.capture_failures - before.capture_failures));
    if (cuda) {
      EXPECT_EQ(after.capture_failures, before.capture_failures);
      // Each block capacity the steps pass through costs one eager step and one capture; a few
      // mismatches (a scratch buffer that grew) are allowed, most steps must replay.
      EXPECT_GE(after.replays - before.replays, kSteps * 3 / 4) << "batch " << batch;
      EXPECT_LE(after.mismatches - before.mismatches, 4) << "batch " << batch;
    } else {
      EXPECT_EQ(after.replays, 0);
      EXPECT_EQ(after.captures, 0);
    }
  }

  // A replay whose launches stop matching partway (here: forced at op 40, inside the third segment)
  // has run its first segments from the graphs and runs the rest eagerly; one whose first op
  // differs runs eagerly. Both capture again the next step, and every step still agrees.
  for (const auto& [batch, op] : {std::pair<int64_t, int64_t>{4, 40}, {2, 1}}) {
    const auto before = recorded->backend().step_graph_stats();
    recorded->backend().perturb_next_replay(op);
    Lockstep{*eager, *recorded, batch, 12, seed + 7 + static_cast<uint32_t>(batch)}.run();
    if (HasFatalFailure()) return;
    const auto after = recorded->backend().step_graph_stats();
    std::printf("batch %lld, replay perturbed at op %lld: captures %lld, replays %lld, mismatches %lld\n",
                static_cast<long long>(batch), static_cast<long long>(op),
                static_cast<long long>(after.captures - before.captures),
                static_cast<long long>(after.replays - before.replays),
                static_cast<long long>(after.mismatches - before.mismatches));
    if (cuda) {
      EXPECT_EQ(after.mismatches - before.mismatches, 1) << "batch " << batch;
      // The first capture and the one after the mismatch (one more where tables reach the next capacity).
      EXPECT_GE(after.captures - before.captures, 2) << "batch " << batch;
      EXPECT_GE(after.replays - before.replays, 12 - 6) << "batch " << batch;
    }
  }

  // A batch size outside cuda_graph_sizes launches kernel by kernel, and still agrees.
  const auto before = recorded->backend().step_graph_stats();
  Lockstep{*eager, *recorded, 3, 24, seed + 3}.run();
  if (HasFatalFailure()) return;
  const auto after = recorded->backend().step_graph_stats();
  EXPECT_EQ(after.replays, before.replays);
  EXPECT_EQ(after.captures, before.captures);
  // The eager model never records.
  EXPECT_EQ(eager->backend().step_graph_stats().replays, 0);
  EXPECT_EQ(eager->backend().step_graph_stats().captures, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, StepGraphs,
                         ::testing::Values(kModels + "/kjv-tiny-v4", kData + "/fixtures/v4_tiny_a",
                                           kData + "/fixtures/v4_tiny_b"),
                         [](const auto& info) { return std::to_string(info.index); });

}  // namespace
}  // namespace deepinfer
