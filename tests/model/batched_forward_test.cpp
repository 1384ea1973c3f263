// One forward for many sequences: sequences that share steps (prefill chunks of different sizes
// mixed with decodes, block tables interleaved in one pool) must compute what each computes alone.
// Under batch invariance the logits are bit-identical; in the default mode too where the backend
// keeps bits under batching (Backend::batching_keeps_bits: the CPU), else to GEMM rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "model/model.h"
#include "testing/random_seed.h"

namespace deepinfer {
namespace {

const std::string kData = DEEPINFER_TEST_DATA_DIR;
const std::string kModels = DEEPINFER_MODELS_DIR;

using testing_util::argmax;
using testing_util::test_seed;

struct Trace {
  std::vector<int32_t> ids;          // greedy ids: first from the prompt, then one per decode step
  std::vector<std::vector<float>> rows;  // the logits row each id came from
};

std::vector<std::vector<int32_t>> random_prompts(int count, int64_t min_len, int64_t max_len, int64_t vocab,
                                                 std::mt19937& rng) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    // Lengths spread over the range, so windows, compressor boundaries and blocks all differ.
    const int64_t len = min_len + (max_len - min_len) * i / std::max(1, count - 1) + static_cast<int64_t>(rng() % 5);
    std::vector<int32_t> p(static_cast<size_t>(std::min(len, max_len)));
    for (auto& t : p) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

Trace run_alone(const model::CausalLM& m, const std::vector<int32_t>& prompt, int decode_steps) {
  Trace trace;
  auto state = m.new_sequence();
  std::vector<float> logits;
  m.forward(*state, prompt, logits);
  for (int step = 0;; ++step) {
    trace.rows.push_back(logits);
    trace.ids.push_back(argmax(logits));
    if (step == decode_steps) break;
    m.forward(*state, std::span(&trace.ids.back(), 1), logits);
  }
  return trace;
}

// A sequence of a batch against its alone run, in the default mode: bit for bit where the backend
// keeps bits under batching. Otherwise (CUDA picks its GEMM by the number of rows) each row within
// GEMM rounding of the alone row while the greedy ids agree; an id may differ only where the alone
// row's top two are closer than the rows differ (a near-tie), and the rows after it are not compared.
void expect_as_alone(const model::CausalLM& m, const Trace& together, const Trace& alone, const std::string& what) {
  ASSERT_EQ(together.rows.size(), alone.rows.size()) << what;
  if (m.backend().batching_keeps_bits()) {
    ASSERT_EQ(together.ids, alone.ids) << what;
    for (size_t r = 0; r < alone.rows.size(); ++r)
      ASSERT_EQ(0, std::memcmp(together.rows[r].data(), alone.rows[r].data(), alone.rows[r].size() * sizeof(float)))
          << what << ", row " << r;
    return;
  }
  for (size_t r = 0; r < alone.rows.size(); ++r) {
    const auto& a = alone.rows[r];
    double diff = 0;
    ASSERT_TRUE(testing_util::within_gemm_rounding(a, together.rows[r], &diff)) << what << ", row " << r << ": " << diff;
    if (together.ids[r] != alone.ids[r]) {
      std::vector<float> top(a);
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      ASSERT_LE(top[0] - top[1], 2 * diff) << what << ", row " << r << ": the greedy id differs without a near-tie";
      return;
    }
  }
}

// All sequences in one pool; each step every sequence contributes a prefill chunk of its own size
// (different per sequence, so prefills and decodes mix) or one decode token.
std::vector<Trace> run_together(const model::CausalLM& m, const std::vector<std::vector<int32_t>>& prompts,
                                int decode_steps, bool whole_prompts = false) {
  const auto& layout = m.state_layout();
  const auto n = static_cast<int64_t>(prompts.size());
  int64_t blocks = 0;
  for (const auto& p : prompts) blocks += layout.blocks_for(static_cast<int64_t>(p.size()) + decode_steps + 1);
  kv::StatePool pool(layout, n, blocks + 3, m.backend().allocator());
  std::vector<int32_t> slots;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
  std::vector<int64_t> done(static_cast<size_t>(n), 0);
  std::vector<Trace> traces(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) slots.push_back(*pool.allocate_slot());
  for (int round = 0;; ++round) {
    model::ForwardBatch batch;
    std::vector<int64_t> owners;  // sequence of each logits row
    std::vector<int32_t> feeds(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const auto& p = prompts[static_cast<size_t>(i)];
      auto& tr = traces[static_cast<size_t>(i)];
      const auto plen = static_cast<int64_t>(p.size());
      if (static_cast<int64_t>(tr.ids.size()) > decode_steps) continue;  // finished
      std::span<const int32_t> tokens;
      if (done[i] < plen) {
        const int64_t chunk = whole_prompts ? plen : std::min<int64_t>(plen - done[i], 17 + 29 * i % 97);
        tokens = std::span(p).subspan(static_cast<size_t>(done[i]), static_cast<size_t>(chunk));
      } else {
        feeds[static_cast<size_t>(i)] = tr.ids.back();
        tokens = std::span(&feeds[static_cast<size_t>(i)], 1);
      }
      // Interleave block allocation across sequences, so tables are not contiguous runs.
      const int64_t need = layout.blocks_for(done[i] + static_cast<int64_t>(tokens.size())) -
                           static_cast<int64_t>(tables[i].size());
      EXPECT_TRUE(pool.allocate_blocks(need, tables[i]));
      const bool wants = done[i] + static_cast<int64_t>(tokens.size()) >= plen;
      batch.add(slots[i], tables[i], done[i], tokens, wants);
      if (wants) owners.push_back(i);
      done[i] += static_cast<int64_t>(tokens.size());
    }
    if (batch.seqs.empty()) break;
    std::vector<float> logits;
    m.forward(batch, pool, logits);
    const auto V = m.vocab_size();
    for (size_t r = 0; r < owners.size(); ++r) {
      std::vector<float> row(logits.begin() + static_cast<int64_t>(r) * V, logits.begin() + static_cast<int64_t>(r + 1) * V);
      auto& tr = traces[static_cast<size_t>(owners[r])];
      tr.ids.push_back(argmax(row));
      tr.rows.push_back(std::move(row));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    pool.free_blocks(tables[i]);
    pool.free_slot(slots[i]);
  }
  EXPECT_EQ(pool.free_block_count(), pool.num_blocks());
  return traces;
}

struct Case {
  std::string dir;
  int64_t max_len;
};

class BatchedForward : public ::testing::TestWithParam<Case> {};

TEST_P(BatchedForward, BitIdenticalToAloneUnderBatchInvariance) {
  const uint32_t seed = test_seed();
  model::LoadOptions options;
  options.batch_invariant = true;
  auto m = model::load_model(GetParam().dir, options);
  std::mt19937 rng(seed);
  const auto prompts = random_prompts(12, 10, GetParam().max_len, m->vocab_size(), rng);
  constexpr int kDecode = 4;
  const auto together = run_together(*m, prompts, kDecode);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Trace alone = run_alone(*m, prompts[i], kDecode);
    ASSERT_EQ(together[i].ids, alone.ids) << "seed " << seed << " prompt " << i << " (" << prompts[i].size() << " tokens)";
    for (size_t r = 0; r < alone.rows.size(); ++r)
      ASSERT_EQ(0, std::memcmp(together[i].rows[r].data(), alone.rows[r].data(), alone.rows[r].size() * sizeof(float)))
          << "seed " << seed << " prompt " << i << " (" << prompts[i].size() << " tokens), row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchedForward,
                         ::testing::Values(Case{kModels + "/kjv-tiny-v4", 600}, Case{kData + "/fixtures/v4_tiny_a", 240},
                                           Case{kData + "/fixtures/v4_tiny_b", 240},
                                           Case{kData + "/fixtures/v41_tiny_bf16", 200},
                                           Case{kData + "/fixtures/v41_tiny_fp8", 200}),
                         [](const auto& info) { return std::to_string(info.index); });

// Default mode follows the reference's top-k tie order, which depends on how many entries a call
// holds: chunking a prefill may pick another of two exactly tied entries (kjv's indexer has ties at
// relu = 0), so only batch invariance promises chunk independence (above). Batching alone must not
// matter: with each prompt prefilled in one call, every sequence of a mixed batch gets the same
// bits as when it runs alone (to GEMM rounding where the backend picks kernels by rows).
TEST(BatchedForwardDefaultMode, BatchingDoesNotChangeAnyBitOnKjv) {
  const uint32_t seed = test_seed();
  auto m = model::load_model(kModels + "/kjv-tiny-v4");
  std::mt19937 rng(seed);
  const auto prompts = random_prompts(12, 10, 600, m->vocab_size(), rng);
  const auto together = run_together(*m, prompts, 4, /*whole_prompts=*/true);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Trace alone = run_alone(*m, prompts[i], 4);
    expect_as_alone(*m, together[i], alone, "seed " + std::to_string(seed) + " prompt " + std::to_string(i));
  }
}

// DeepSeek-V4.1 in its default mode: 16 requests of mixed lengths, prefilled in chunks of their own
// sizes while others decode, give every sequence the bits (and so the greedy ids) it gets alone.
// Where the default mode picks GEMMs by rows (Backend::batching_keeps_bits), V4.1's FP8 activation
// rounding can turn a low-bit difference into a visible step, so the test runs under batch
// invariance there (BatchedForward above covers that mode too; this keeps 16 mixed requests).
TEST(BatchedForwardV41, SixteenMixedRequestsEqualAlone) {
  const uint32_t seed = test_seed();
  for (const char* fixture : {"v41_tiny_bf16", "v41_tiny_fp8"}) {
    auto m = model::load_model(kData + "/fixtures/" + fixture);
    if (!m->backend().batching_keeps_bits()) {
      model::LoadOptions invariant;
      invariant.batch_invariant = true;
      m = model::load_model(kData + "/fixtures/" + fixture, invariant);
    }
    std::mt19937 rng(seed);
    const auto prompts = random_prompts(16, 3, 200, m->vocab_size(), rng);
    const auto together = run_together(*m, prompts, 6);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Trace alone = run_alone(*m, prompts[i], 6);
      ASSERT_EQ(together[i].ids, alone.ids) << fixture << " seed " << seed << " prompt " << i;
      for (size_t r = 0; r < alone.rows.size(); ++r)
        ASSERT_EQ(0, std::memcmp(together[i].rows[r].data(), alone.rows[r].data(), alone.rows[r].size() * sizeof(float)))
            << fixture << " seed " << seed << " prompt " << i << ", row " << r;
    }
  }
}

}  // namespace
}  // namespace deepinfer
