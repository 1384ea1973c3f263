// Expert parallelism over the in-process transport: EP = 2 and 4 (ranks as threads, each with its
// own model, pool and sequences: attention data parallelism) give the logits of one rank running
// every sequence, bit for bit, on the V4 fixtures and the kjv model; with ranks that run out of
// sequences early (idle steps) and with an EPLB rebalance in the middle of generation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>

#include "dist/ep_moe.h"
#include "model/model.h"
#include "testing/random_seed.h"

namespace deepinfer::dist {
namespace {

const std::string kData = DEEPINFER_TEST_DATA_DIR;
const std::string kModels = DEEPINFER_MODELS_DIR;

using testing_util::argmax;
using testing_util::test_seed;

struct Work {
  std::vector<int32_t> prompt;
  int decode_steps = 0;
};

// Per sequence: the logits row of every step (the prompt's last row, then one per decode).
using Rows = std::vector<std::vector<float>>;

// Runs `mine` (indices into work) on model m in lockstep steps: step 0 prefills every prompt, step s
// decodes one greedy token of each sequence with more than s - 1 decodes left; `steps` steps in all
// (a rank with nothing left runs idle steps, when it has an executor). before_step(s) runs first.
std::vector<Rows> run_rank(const model::CausalLM& m, const std::vector<Work>& work, const std::vector<size_t>& mine,
                           int steps, const std::function<void(int)>& before_step) {
  const auto& layout = m.state_layout();
  const auto n = static_cast<int64_t>(mine.size());
  int64_t blocks = 0;
  for (size_t i : mine) blocks += layout.blocks_for(static_cast<int64_t>(work[i].prompt.size()) + work[i].decode_steps + 1);
  kv::StatePool pool(layout, std::max<int64_t>(n, 1), blocks + 1, m.backend().allocator());
  std::vector<int32_t> slots;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
  std::vector<int64_t> done(static_cast<size_t>(n), 0);
  std::vector<Rows> rows(static_cast<size_t>(n));
  std::vector<int32_t> feeds(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) slots.push_back(*pool.allocate_slot());
  for (int s = 0; s < steps; ++s) {
    before_step(s);
    model::ForwardBatch batch;
    std::vector<int64_t> owners;
    for (int64_t i = 0; i < n; ++i) {
      const Work& w = work[mine[static_cast<size_t>(i)]];
      if (s > w.decode_steps) continue;
      std::span<const int32_t> tokens;
      if (s == 0) {
        tokens = w.prompt;
      } else {
        feeds[static_cast<size_t>(i)] = argmax(rows[static_cast<size_t>(i)].back());
        tokens = std::span(&feeds[static_cast<size_t>(i)], 1);
      }
      const int64_t need = layout.blocks_for(done[i] + static_cast<int64_t>(tokens.size())) -
                           static_cast<int64_t>(tables[static_cast<size_t>(i)].size());
      EXPECT_TRUE(pool.allocate_blocks(need, tables[static_cast<size_t>(i)]));
      batch.add(slots[static_cast<size_t>(i)], tables[static_cast<size_t>(i)], done[i], tokens, true);
      owners.push_back(i);
      done[i] += static_cast<int64_t>(tokens.size());
    }
    if (batch.seqs.empty()) {
      if (m.moe_executor()) m.moe_idle_step();
      continue;
    }
    std::vector<float> logits;
    m.forward(batch, pool, logits);
    const auto V = m.vocab_size();
    for (size_t r = 0; r < owners.size(); ++r)
      rows[static_cast<size_t>(owners[r])].emplace_back(logits.begin() + static_cast<int64_t>(r) * V,
                                                        logits.begin() + static_cast<int64_t>(r + 1) * V);
  }
  return rows;
}

struct Case {
  std::string dir;
  int64_t max_len;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.dir; }

class ExpertParallel : public ::testing::TestWithParam<Case> {};

// world ranks; `rebalance_at` > 0: every rank rebalances before that step. Returns rank 0's
// placements (before, after) for the caller to check.
std::vector<Rows> run_ep(const std::string& dir, const model::LoadOptions& options, const std::vector<Work>& work,
                         int world, int steps, int rebalance_at, int64_t rebalance_slots,
                         std::pair<ExpertPlacement, ExpertPlacement>* placements, ExpertParallelStats* stats) {
  LocalHub hub(world, std::chrono::seconds(120));
  std::vector<std::unique_ptr<model::CausalLM>> models;
  for (int r = 0; r < world; ++r) models.push_back(model::load_model(dir, options));
  const auto& cfg = models[0]->config();
  std::vector<Rows> rows(work.size());
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      auto transport = hub.transport(r);
      try {
        ExpertParallelMoe ep(*transport, uniform_placement(cfg.num_hidden_layers, cfg.n_routed_experts, world));
        if (r == 0 && placements) placements->first = ep.placement();
        models[static_cast<size_t>(r)]->set_moe_executor(&ep);
        std::vector<size_t> mine;
        for (size_t i = 0; i < work.size(); ++i)
          if (static_cast<int>(i % static_cast<size_t>(world)) == r) mine.push_back(i);
        auto got = run_rank(*models[static_cast<size_t>(r)], work, mine, steps, [&](int s) {
          if (s > 0) ep.end_step();
          if (s == rebalance_at) ep.rebalance(rebalance_slots);
        });
        for (size_t j = 0; j < mine.size(); ++j) rows[mine[j]] = std::move(got[j]);
        if (r == 0 && placements) placements->second = ep.placement();
        if (r == 0 && stats) *stats = ep.stats();
        models[static_cast<size_t>(r)]->set_moe_executor(nullptr);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        transport->abort(e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return rows;
}

void expect_same_bits(const std::vector<Rows>& got, const std::vector<Rows>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << ": sequence " << i << " steps";
    for (size_t s = 0; s < want[i].size(); ++s) {
      const auto& a = got[i][s];
      const auto& b = want[i][s];
      ASSERT_EQ(a.size(), b.size()) << what;
      for (float v : b) ASSERT_TRUE(std::isfinite(v)) << what << ": the EP = 1 logits hold " << v;
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << what << ": sequence " << i << " step " << s << " differs from EP = 1";
    }
  }
}

TEST_P(ExpertParallel, BitIdenticalToOneRankWithIdleRanksAndARebalance) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED reruns it)");
  std::mt19937 rng(seed);
  model::LoadOptions options;
  options.batch_invariant = true;  // rank batches differ from EP = 1's: the forward must not care
  auto reference = model::load_model(GetParam().dir, options);
  const auto& cfg = reference->config();
  // 6 sequences of different lengths and decode counts: with EP = 4, ranks 2 and 3 hold one
  // sequence each and go idle before the others finish.
  std::vector<Work> work;
  constexpr int kSteps = 7;
  for (int i = 0; i < 6; ++i) {
    Work w;
    w.prompt.resize(static_cast<size_t>(4 + rng() % static_cast<uint32_t>(GetParam().max_len - 4)));
    for (auto& t : w.prompt) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(cfg.vocab_size - 3));
    w.decode_steps = kSteps - 1 - (i >= 2 ? 1 + i % 3 : 0);
    work.push_back(std::move(w));
  }
  std::vector<size_t> all(work.size());
  std::iota(all.begin(), all.end(), size_t{0});
  const auto want = run_rank(*reference, work, all, kSteps, [](int) {});

  for (int world : {1, 2, 4}) {
    const std::string what = GetParam().dir + ", EP = " + std::to_string(world);
    ExpertParallelStats stats;
    expect_same_bits(run_ep(GetParam().dir, options, work, world, kSteps, -1, 0, nullptr, &stats), want, what);
    if (world > 1) EXPECT_GT(stats.rows_sent, 0) << what << ": no row left rank 0";
    // Rebalanced before step 4 onto one replica slot per rank more than the experts.
    std::pair<ExpertPlacement, ExpertPlacement> placements;
    const int64_t slots = (cfg.n_routed_experts + world - 1) / world * world + world;
    expect_same_bits(run_ep(GetParam().dir, options, work, world, kSteps, 4, slots, &placements, nullptr), want,
                     what + " with a rebalance before step 4");
    EXPECT_EQ(placements.second.slots, slots);
    EXPECT_NE(placements.first.phy2log, placements.second.phy2log) << what << ": the rebalance changed nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(V4, ExpertParallel,
                         ::testing::Values(Case{kData + "/fixtures/v4_tiny_a", 40}, Case{kData + "/fixtures/v4_tiny_b", 40},
                                           Case{kModels + "/kjv-tiny-v4", 80}),
                         [](const auto& info) {
                           const std::string d = info.param.dir;
                           std::string name = d.substr(d.find_last_of('/') + 1);
                           for (char& c : name) if (c == '-') c = '_';
                           return name;
                         });

TEST(ExpertParallelPlacement, UniformPlacementHoldsEveryExpertAndSplitsEvenly) {
  for (int64_t experts : {4, 6, 8, 256})
    for (int64_t ranks : {1, 2, 3, 4, 8}) {
      const ExpertPlacement p = uniform_placement(3, experts, ranks);
      EXPECT_EQ(p.slots % ranks, 0);
      EXPECT_GE(p.slots, experts);
      EXPECT_LT(p.slots, experts + ranks);
      for (int64_t l = 0; l < 3; ++l)
        for (int32_t e = 0; e < experts; ++e) {
          for (int64_t t = 0; t < 5; ++t) {
            const int owner = p.owner(l, e, t);
            ASSERT_TRUE(owner >= 0 && owner < ranks);
            EXPECT_TRUE(p.holds(owner, l, e)) << "expert " << e << " routed to rank " << owner << ", which lacks it";
          }
        }
    }
}

}  // namespace
}  // namespace deepinfer::dist
