// Attention data parallelism (dp/data_parallel_engine.h) on the CPU backend, ranks as threads:
// requests spread over the ranks give the tokens one engine gives them (greedy and seeded sampling,
// batch-invariant forward), with idle ranks and EPLB rebalances in the middle of generation; a rank
// that fails stops the others with its error.
#include "dp/data_parallel_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "core/error.h"
#include "model/model.h"
#include "testing/random_seed.h"

namespace deepinfer::dp {
namespace {

const std::string kModel = std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4";

model::LoadOptions invariant() {
  model::LoadOptions o;
  o.batch_invariant = true;  // rank batches differ from one engine's: the forward must not care
  return o;
}

struct Req {
  std::vector<int32_t> prompt;
  engine::RequestParams params;
};

// Every request's tokens (by the order it was added), and its finish reason.
using Outcome = std::vector<std::pair<std::vector<int32_t>, engine::FinishReason>>;

Outcome run_one_engine(const std::vector<Req>& reqs) {
  auto m = model::load_model(kModel, invariant());
  engine::LLMEngine e(*m, nullptr);
  std::map<uint64_t, size_t> order;
  for (size_t i = 0; i < reqs.size(); ++i) order[e.add_request(reqs[i].prompt, reqs[i].params)] = i;
  Outcome out(reqs.size());
  while (e.has_unfinished())
    for (const auto& d : e.step()) {
      auto& o = out[order.at(d.id)];
      o.first.insert(o.first.end(), d.new_token_ids.begin(), d.new_token_ids.end());
      if (d.finished) o.second = d.finish_reason;
    }
  return out;
}

Outcome run_data_parallel(const std::vector<Req>& reqs, int ranks, int64_t rebalance_every, std::vector<RankStats>* stats,
                          int add_late = 0) {
  std::vector<std::unique_ptr<model::CausalLM>> models;
  for (int r = 0; r < ranks; ++r) models.push_back(model::load_model(kModel, invariant()));
  DataParallelOptions o;
  o.rebalance_every = rebalance_every;
  o.timeout = std::chrono::seconds(120);
  DataParallelEngine e(std::move(models), nullptr, o);
  std::map<uint64_t, size_t> order;
  Outcome out(reqs.size());
  const size_t first = reqs.size() - static_cast<size_t>(add_late);
  for (size_t i = 0; i < first; ++i) order[e.add_request(reqs[i].prompt, reqs[i].params)] = i;
  int steps = 0;
  while (e.has_unfinished()) {
    for (const auto& d : e.step()) {
      auto& o = out[order.at(d.id)];
      o.first.insert(o.first.end(), d.new_token_ids.begin(), d.new_token_ids.end());
      if (d.finished) o.second = d.finish_reason;
    }
    if (++steps == 3)  // requests arriving while others decode
      for (size_t i = first; i < reqs.size(); ++i) order[e.add_request(reqs[i].prompt, reqs[i].params)] = i;
  }
  if (stats)
    for (int r = 0; r < ranks; ++r) stats->push_back(e.rank_stats(r));
  return out;
}

std::vector<Req> requests(std::mt19937& rng, int n, int64_t vocab) {
  std::vector<Req> reqs;
  for (int i = 0; i < n; ++i) {
    Req q;
    q.prompt.resize(static_cast<size_t>(3 + rng() % 40));
    for (auto& t : q.prompt) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3));
    // Different lengths; request 0 outlasts every other (added by step 3, done by step ~15), so
    // the ranks without it go idle.
    q.params.sampling.max_tokens = i == 0 ? 24 : 2 + static_cast<int64_t>(rng() % 10);
    q.params.sampling.ignore_eos = true;
    if (i % 3 == 1) {  // seeded sampling: the seed, not the rank, decides the draws
      q.params.sampling.temperature = 0.8f;
      q.params.seed = 1000 + static_cast<uint64_t>(i);
    } else {
      q.params.sampling.temperature = 0.0f;
    }
    reqs.push_back(std::move(q));
  }
  return reqs;
}

TEST(DataParallelEngine, RequestsOverRanksGiveOneEnginesTokens) {
  const uint32_t seed = testing_util::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED reruns it)");
  std::mt19937 rng(seed);
  const auto reqs = requests(rng, 7, model::load_model(kModel, invariant())->vocab_size());
  const Outcome want = run_one_engine(reqs);
  for (int ranks : {2, 3}) {
    for (int64_t rebalance_every : {int64_t{0}, int64_t{2}}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, rebalance every " + std::to_string(rebalance_every) + " steps");
      std::vector<RankStats> stats;
      const Outcome got = run_data_parallel(reqs, ranks, rebalance_every, &stats, /*add_late=*/2);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].first, want[i].first) << "request " << i;
        EXPECT_EQ(got[i].second, want[i].second) << "request " << i;
        EXPECT_EQ(static_cast<int64_t>(got[i].first.size()), reqs[i].params.sampling.max_tokens) << "request " << i;
      }
      int64_t placed = 0, idle = 0, sent = 0;
      for (const auto& s : stats) placed += s.requests, idle += s.idle_steps, sent += s.ep.rows_sent;
      EXPECT_EQ(placed, static_cast<int64_t>(reqs.size()));
      for (const auto& s : stats) EXPECT_GE(s.requests, 1) << "least-loaded placement spreads 7 requests";
      EXPECT_GT(idle, 0) << "the ranks without request 0 must have served idle";
      EXPECT_GT(sent, 0) << "no routed row crossed ranks";
    }
  }
}

// DataParallelRank as a process per GPU uses it: no coordinator, each rank its own loop. Rank 0
// holds a request, rank 1 none: both step (rank 1 idle, serving its experts) until rank 0 is done,
// then both see that no rank has work.
TEST(DataParallelRank, RanksAgreeOnStepsWithoutACoordinator) {
  dist::LocalHub hub(2, std::chrono::seconds(60));
  std::vector<std::unique_ptr<model::CausalLM>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model::load_model(kModel, invariant()));
  DataParallelOptions o;
  std::vector<int64_t> steps(2), sampled(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto transport = hub.transport(r);
      try {
        DataParallelRank rank(*models[static_cast<size_t>(r)], *transport, nullptr, o);
        if (r == 0) {
          engine::RequestParams p;
          p.sampling.max_tokens = 5;
          p.sampling.ignore_eos = true;
          rank.engine().add_request({5, 6, 7, 8}, p);
        }
        std::vector<engine::RequestDelta> deltas;
        while (rank.step(deltas))
          for (const auto& d : deltas) sampled[static_cast<size_t>(r)] += static_cast<int64_t>(d.new_token_ids.size());
        steps[static_cast<size_t>(r)] = rank.steps();
        if (r == 1) EXPECT_EQ(rank.stats().idle_steps, rank.steps());
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        transport->abort(e.what());
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(sampled[0], 5);
  EXPECT_EQ(sampled[1], 0);
  EXPECT_EQ(steps[0], steps[1]);
  EXPECT_GE(steps[0], 5);
}

// A model whose forward fails on its `fail_at`-th call (rank 1's, below); otherwise the wrapped one,
// with the executor this wrapper was given.
class FailingModel final : public model::CausalLM {
 public:
  FailingModel(std::unique_ptr<model::CausalLM> inner, int fail_at) : inner_(std::move(inner)), fail_at_(fail_at) {}
  const io::ModelConfig& config() const override { return inner_->config(); }
  const kv::StateLayout& state_layout() const override { return inner_->state_layout(); }
  void forward(const model::ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const override {
    DEEPINFER_CHECK(++calls_ != fail_at_, "injected failure in forward {}", calls_);
    inner_->set_moe_executor(moe_executor());
    inner_->forward(batch, pool, logits);
  }
  void moe_idle_step() const override {
    inner_->set_moe_executor(moe_executor());
    inner_->moe_idle_step();
  }
  std::vector<model::ParameterGroup> parameter_summary() const override { return inner_->parameter_summary(); }
  model::StateFootprint state_footprint() const override { return inner_->state_footprint(); }
  backend::Backend& backend() const override { return inner_->backend(); }

 private:
  std::unique_ptr<model::CausalLM> inner_;
  int fail_at_;
  mutable int calls_ = 0;
};

TEST(DataParallelEngine, ARankFailingStopsEveryRankWithItsError) {
  std::vector<std::unique_ptr<model::CausalLM>> models;
  models.push_back(model::load_model(kModel, invariant()));
  models.push_back(std::make_unique<FailingModel>(model::load_model(kModel, invariant()), 3));
  DataParallelOptions o;
  o.timeout = std::chrono::seconds(60);  // rank 0 must not wait this long: rank 1 aborts at once
  DataParallelEngine e(std::move(models), nullptr, o);
  engine::RequestParams p;
  p.sampling.max_tokens = 8;
  p.sampling.ignore_eos = true;
  const uint64_t a = e.add_request({5, 6, 7}, p), b = e.add_request({8, 9}, p);
  EXPECT_EQ(e.rank_of(a), 0);
  EXPECT_EQ(e.rank_of(b), 1);
  EXPECT_THROW(e.add_request({5, 1 << 30}, p), Error) << "a bad prompt is refused before it reaches a rank";
  EXPECT_EQ(e.rank_stats(0).requests + e.rank_stats(1).requests, 2);
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  for (int s = 0; s < 8 && error.empty(); ++s) {
    try {
      e.step();
    } catch (const Error& x) {
      error = x.what();
    }
  }
  EXPECT_NE(error.find("injected failure in forward 3"), std::string::npos) << error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "rank 0 waited for the timeout";
  EXPECT_EQ(e.rank_stats(0).busy_steps, 2) << "rank 0 completed steps 1-2 (the third stopped by rank 1's abort)";
  try {
    e.step();
    ADD_FAILURE() << "a failed engine stepped again";
  } catch (const Error& x) {
    EXPECT_NE(std::string(x.what()).find("stopped: "), std::string::npos) << x.what();
  }
  EXPECT_THROW(e.add_request({5, 6}, p), Error);
  EXPECT_FALSE(e.abort(12345));
}

// Every rank sets itself up on its own thread (its transport end through the factory, then its
// engine): one that cannot is the constructor's error, and the ranks that could are torn down.
TEST(DataParallelEngine, ARankThatCannotBeSetUpFailsTheConstructorWithItsError) {
  std::vector<std::unique_ptr<model::CausalLM>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model::load_model(kModel, invariant()));
  dist::LocalHub hub(2, std::chrono::seconds(10));
  std::vector<std::thread::id> threads(2);
  try {
    DataParallelEngine e(std::move(models), nullptr, {}, [&](int rank, int world) {
      threads[static_cast<size_t>(rank)] = std::this_thread::get_id();
      EXPECT_EQ(world, 2);
      DEEPINFER_CHECK(rank != 1, "rank {} has no transport", rank);
      return hub.transport(rank);
    });
    ADD_FAILURE() << "constructed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 has no transport"), std::string::npos) << e.what();
  }
  EXPECT_NE(threads[0], threads[1]) << "each rank sets up on its own thread";
  EXPECT_NE(threads[0], std::this_thread::get_id());
}

}  // namespace
}  // namespace deepinfer::dp
