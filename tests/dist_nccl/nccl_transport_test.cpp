// The NCCL transport on one GPU (built with DEEPINFER_CUDA, run on the GPU machine by
// tools/gpu/test.sh): its collectives deliver what was sent, and expert parallelism through it on
// one rank gives the plain forward's logits bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "dist/ep_moe.h"
#include "dist/nccl/nccl_transport.h"
#include "model/model.h"
#include "testing/random_seed.h"

namespace deepinfer::dist {
namespace {

using testing_util::argmax;
using testing_util::test_seed;

const std::string kData = DEEPINFER_TEST_DATA_DIR;
const std::string kModels = DEEPINFER_MODELS_DIR;

TEST(NcclTransport, OneRankCollectivesReturnWhatWasSent) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto t = make_nccl_transport(0, 1, nccl_unique_id());
  ASSERT_EQ(t->world_size(), 1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4097}, size_t{1} << 20}) {
    Bytes b(n);
    for (auto& v : b) v = static_cast<std::byte>(rng());
    const auto recv = t->all_to_all({b});
    ASSERT_EQ(recv.size(), 1u);
    EXPECT_EQ(recv[0], b) << n << " bytes";
    EXPECT_EQ(t->all_gather(b)[0], b);
  }
  t->barrier();
}

TEST(NcclTransport, FromTheEnvironmentOnOneRank) {
  // WORLD_SIZE unset: one rank, no rendezvous; the bootstrap's TCP part is tests/dist/rendezvous_test.cpp.
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  auto t = make_nccl_transport_from_env();
  EXPECT_EQ(t->world_size(), 1);
  EXPECT_EQ(t->rank(), 0);
  const Bytes b{std::byte{1}, std::byte{2}, std::byte{3}};
  EXPECT_EQ(t->all_gather(b)[0], b);
}

// Three prompts in one batch, then decode steps, with and without the executor.
std::vector<std::vector<float>> run(const model::CausalLM& m, const std::vector<std::vector<int32_t>>& prompts,
                                    int steps) {
  std::vector<std::unique_ptr<model::SequenceState>> states;
  std::vector<std::vector<float>> rows;
  for (const auto& p : prompts) {
    states.push_back(m.new_sequence());
    std::vector<float> logits;
    m.forward(*states.back(), p, logits);
    for (int s = 0; s < steps; ++s) {
      rows.push_back(logits);
      const int32_t next = argmax(logits);
      m.forward(*states.back(), std::span(&next, 1), logits);
    }
    rows.push_back(logits);
  }
  return rows;
}

TEST(NcclTransport, ExpertParallelOnOneRankEqualsThePlainForward) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const std::string& dir : {kData + "/fixtures/v4_tiny_a", kModels + "/kjv-tiny-v4"}) {
    auto m = model::load_model(dir);  // DEEPINFER_DEVICE picks the GPU
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(5 + rng() % 40));
      for (auto& t : p) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(m->vocab_size() - 3));
      prompts.push_back(std::move(p));
    }
    const auto want = run(*m, prompts, 4);
    auto transport = make_nccl_transport(0, 1, nccl_unique_id());
    const auto& cfg = m->config();
    ExpertParallelMoe ep(*transport, uniform_placement(cfg.num_hidden_layers, cfg.n_routed_experts, 1));
    m->set_moe_executor(&ep);
    const auto got = run(*m, prompts, 4);
    m->set_moe_executor(nullptr);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      for (float v : want[i]) ASSERT_TRUE(std::isfinite(v)) << dir << ": the plain logits hold " << v;
      ASSERT_EQ(0, std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)))
          << dir << ": row " << i << " differs through the NCCL transport";
    }
    EXPECT_EQ(ep.stats().rows_sent, 0);
    EXPECT_GT(ep.stats().rows_local, 0);
  }
}

}  // namespace
}  // namespace deepinfer::dist
