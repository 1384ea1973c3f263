// Data-parallel ranks on GPUs (the CUDA build; tools/gpu/test.sh runs it with DEEPINFER_DEVICE=cuda):
// the engine's rank threads set up their transport ends through a factory on their own threads with
// their device current, as EngineConfig::data_parallel_size does on N GPUs. One GPU allows one NCCL
// rank (NCCL refuses two ranks on one device), so here: one rank over NCCL gives the plain engine's
// tokens, and two ranks sharing the GPU through host memory (dist::LocalHub) do too.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "dist/nccl/nccl_transport.h"
#include "dp/data_parallel_engine.h"
#include "model/model.h"

namespace deepinfer::dp {
namespace {

const std::string kModel = std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4";

model::LoadOptions on_gpu() {
  model::LoadOptions o;
  o.device = "cuda";
  o.batch_invariant = true;
  return o;
}

std::vector<std::pair<std::vector<int32_t>, engine::RequestParams>> requests() {
  std::vector<std::pair<std::vector<int32_t>, engine::RequestParams>> out;
  for (int i = 0; i < 5; ++i) {
    engine::RequestParams p;
    p.sampling.max_tokens = 6 + 5 * i;
    p.sampling.ignore_eos = true;
    p.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    p.seed = 40 + static_cast<uint64_t>(i);
    out.push_back({{0, static_cast<int32_t>(100 + 7 * i), 17, 5, static_cast<int32_t>(300 + i)}, p});
  }
  return out;
}

template <typename Engine>
std::vector<std::vector<int32_t>> run(Engine& e) {
  const auto reqs = requests();
  std::map<uint64_t, size_t> order;
  for (size_t i = 0; i < reqs.size(); ++i) order[e.add_request(reqs[i].first, reqs[i].second)] = i;
  std::vector<std::vector<int32_t>> out(reqs.size());
  while (e.has_unfinished())
    for (const auto& d : e.step()) {
      auto& o = out[order.at(d.id)];
      o.insert(o.end(), d.new_token_ids.begin(), d.new_token_ids.end());
    }
  return out;
}

std::vector<std::vector<int32_t>> one_engine() {
  auto m = model::load_model(kModel, on_gpu());
  engine::LLMEngine e(*m, nullptr);
  return run(e);
}

TEST(DataParallelOnGpu, OneRankOverNcclGivesThePlainEnginesTokens) {
  ASSERT_GE(backend::device_count("cuda"), 1) << "needs a GPU";
  const auto want = one_engine();
  std::vector<std::unique_ptr<model::CausalLM>> models;
  models.push_back(model::load_model(kModel, on_gpu()));
  const std::string id = dist::nccl_unique_id();
  int made = 0;
  DataParallelEngine e(std::move(models), nullptr, {}, [&](int rank, int world) {
    ++made;
    return dist::make_nccl_transport(rank, world, id);
  });
  EXPECT_EQ(made, 1);
  EXPECT_EQ(run(e), want);
}

TEST(DataParallelOnGpu, TwoRanksSharingTheGpuGiveThePlainEnginesTokens) {
  const auto want = one_engine();
  std::vector<std::unique_ptr<model::CausalLM>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model::load_model(kModel, on_gpu()));
  DataParallelEngine e(std::move(models), nullptr);
  EXPECT_EQ(run(e), want);
  EXPECT_GT(e.rank_stats(0).requests, 0);
  EXPECT_GT(e.rank_stats(1).requests, 0);
}

}  // namespace
}  // namespace deepinfer::dp
