// Recorded decode steps (CUDA graphs): a model whose decode steps are captured and replayed gives,
// step after step, the same logits bit for bit as the same model launching every kernel
// (enforce_eager), while sequences grow across blocks, compressor windows and the next power of
// two of block capacity. On CUDA the steps must really be replayed (the statistics say so); a replay
// that stops matching partway falls back without changing a bit; a batch size between recorded
// ones is padded up and replayed; one past the largest is never replayed. On the CPU nothing is
// recorded or padded and both paths are one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "model/forward_common.h"
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
  recorded_options.cuda_graph_sizes = {1, 2, 4, 8};  // 3 is left out on purpose: padded to 4
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

  // A batch size between recorded ones (3) runs padded to the next one (4): padding rows in the
  // pools' scratch slot and block, replayed, and the real rows still agree bit for bit. One past
  // the largest recorded size (9) launches kernel by kernel, and agrees too.
  {
    const auto before = recorded->backend().step_graph_stats();
    Lockstep{*eager, *recorded, 3, 24, seed + 3}.run();
    if (HasFatalFailure()) return;
    const auto after = recorded->backend().step_graph_stats();
    std::printf("batch 3 (padded to 4): padded steps %lld, padding rows %lld, replays %lld\n",
                static_cast<long long>(after.padded_steps - before.padded_steps),
                static_cast<long long>(after.padding_rows - before.padding_rows),
                static_cast<long long>(after.replays - before.replays));
    if (cuda) {
      EXPECT_EQ(after.padded_steps - before.padded_steps, 24);  // every decode step, not the prefill
      EXPECT_EQ(after.padding_rows - before.padding_rows, 24);
      EXPECT_GE(after.replays - before.replays, 24 - 6);
    } else {
      EXPECT_EQ(after.padded_steps, 0);
    }
  }
  {
    const auto before = recorded->backend().step_graph_stats();
    Lockstep{*eager, *recorded, 9, 12, seed + 9}.run();
    if (HasFatalFailure()) return;
    const auto after = recorded->backend().step_graph_stats();
    EXPECT_EQ(after.replays, before.replays);
    EXPECT_EQ(after.captures, before.captures);
    EXPECT_EQ(after.padded_steps, before.padded_steps);
  }
  // The eager model never records.
  EXPECT_EQ(eager->backend().step_graph_stats().replays, 0);
  EXPECT_EQ(eager->backend().step_graph_stats().captures, 0);
}

// Padding rows (padded_decode_batch) leave the real rows' logits and state as they were, on any
// backend: the same model runs `batch` sequences in two pools, unpadded and padded to 8 sequences,
// for a prefill and 20 decode steps, and every real row agrees bit for bit (to GEMM rounding where
// the default mode picks its GEMM by the number of rows: Backend::batching_keeps_bits).
TEST(PaddedDecodeBatch, PaddingRowsChangeNoRealRow) {
  const uint32_t seed = test_seed();
  const auto model = model::load_model(kModels + "/kjv-tiny-v4");
  std::printf("seed %u, device %s\n", seed, std::string(model->backend().name()).c_str());
  const auto& layout = model->state_layout();
  constexpr int64_t kBatch = 3, kPadded = 8, kSteps = 20;
  std::mt19937 rng(seed);
  kv::StatePool plain(layout, kBatch, 64, model->backend().allocator());
  kv::StatePool padded(layout, kBatch, 64, model->backend().allocator());
  std::vector<std::vector<int32_t>> tables(kBatch);
  std::vector<int32_t> slots, feed(kBatch);
  std::vector<int64_t> length(kBatch, 0);
  for (int64_t i = 0; i < kBatch; ++i) {
    slots.push_back(*plain.allocate_slot());
    ASSERT_EQ(slots.back(), *padded.allocate_slot());
    ASSERT_TRUE(plain.allocate_blocks(20, tables[static_cast<size_t>(i)]));
    std::vector<int32_t> other;
    ASSERT_TRUE(padded.allocate_blocks(20, other));
    ASSERT_EQ(other, tables[static_cast<size_t>(i)]);
  }
  std::vector<std::vector<int32_t>> prompts(kBatch);
  for (auto& p : prompts) {
    p.resize(5 + rng() % 60);
    for (auto& t : p) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(model->vocab_size() - 3));
  }
  const auto V = static_cast<size_t>(model->vocab_size());
  for (int64_t step = 0; step <= kSteps; ++step) {
    model::ForwardBatch b;
    for (size_t i = 0; i < kBatch; ++i) {
      const std::span<const int32_t> tokens = step == 0 ? std::span<const int32_t>(prompts[i]) : std::span(&feed[i], 1);
      b.add(slots[i], tables[i], length[i], tokens);
      length[i] += static_cast<int64_t>(tokens.size());
    }
    std::vector<int32_t> scratch_table;
    const model::ForwardBatch p = step == 0 ? b : model::padded_decode_batch(b, kPadded, padded, scratch_table);
    if (step > 0) {
      ASSERT_EQ(p.seqs.size(), static_cast<size_t>(kPadded));
      ASSERT_EQ(p.logit_rows.size(), static_cast<size_t>(kPadded));
      EXPECT_EQ(p.seqs.back().slot, padded.scratch_slot());
    }
    std::vector<float> lp, lq;
    model->forward(b, plain, lp);
    model->forward(p, padded, lq);
    ASSERT_EQ(lp.size(), V * kBatch);
    ASSERT_EQ(lq.size(), V * static_cast<size_t>(step == 0 ? kBatch : kPadded));
    for (float v : lq) ASSERT_TRUE(std::isfinite(v)) << "seed " << seed << " step " << step;
    if (model->backend().batching_keeps_bits()) {
      ASSERT_EQ(0, std::memcmp(lp.data(), lq.data(), lp.size() * sizeof(float))) << "seed " << seed << " step " << step;
    } else {
      // The default mode picks its GEMM by the number of rows (CUDA: 3 rows on the CUDA-core tile,
      // 8 padded ones on the tensor cores), as batching may: the real rows agree to GEMM rounding.
      double diff = 0;
      ASSERT_TRUE(testing_util::within_gemm_rounding(lp, std::span<const float>(lq).first(lp.size()), &diff))
          << "seed " << seed << " step " << step << ": " << diff;
    }
    for (size_t i = 0; i < kBatch; ++i) feed[i] = argmax(std::span<const float>(lp).subspan(i * V, V));
  }
  // Padding a step down is a caller's bug.
  model::ForwardBatch b;
  const int32_t token = 5;
  b.add(slots[0], tables[0], length[0], std::span<const int32_t>(&token, 1));
  b.add(slots[1], tables[1], length[1], std::span<const int32_t>(&token, 1));
  std::vector<int32_t> scratch_table;
  EXPECT_THROW(model::padded_decode_batch(b, 1, padded, scratch_table), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, StepGraphs,
                         ::testing::Values(kModels + "/kjv-tiny-v4", kData + "/fixtures/v4_tiny_a",
                                           kData + "/fixtures/v4_tiny_b", kData + "/fixtures/v41_tiny_bf16",
                                           kData + "/fixtures/v41_tiny_fp8"),
                         [](const auto& info) { return std::to_string(info.index); });

}  // namespace
}  // namespace deepinfer
