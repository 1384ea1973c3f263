// The CPU forward against the reference's golden logits: transformers' float32 full forward for the
// V4 fixtures and the bundled kjv model. Decode goes through the engine's own incremental state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "io/safetensors.h"
#include "model/golden_file.h"
#include "model/model.h"

namespace deepinfer {
namespace {

const std::string kData = DEEPINFER_TEST_DATA_DIR;
const std::string kModels = DEEPINFER_MODELS_DIR;

using testing_util::Golden;

// max |a - b| relative to the range of the golden values, over `rows` rows of the vocabulary.
// Largest |got - want| over the range of want; +Inf (which fails every tolerance) when sizes differ or
// any value is NaN/Inf, since std::max(diff, NaN) would silently keep the old maximum.
double relative_max_diff(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size() || want.empty()) return std::numeric_limits<double>::infinity();
  double diff = 0, lo = want[0], hi = want[0];
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
      ADD_FAILURE() << "non-finite value at " << i << ": got " << got[i] << ", want " << want[i];
      return std::numeric_limits<double>::infinity();
    }
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    lo = std::min<double>(lo, want[i]);
    hi = std::max<double>(hi, want[i]);
  }
  return diff / (hi > lo ? hi - lo : 1.0);
}

constexpr double kTolerance = 1e-4;

std::vector<float> prefill(const model::CausalLM& m, const std::vector<int32_t>& ids, size_t chunk) {
  auto state = m.new_sequence();
  std::vector<float> all, part;
  for (size_t i = 0; i < ids.size(); i += chunk) {
    const size_t n = std::min(chunk, ids.size() - i);
    m.forward(*state, std::span(ids).subspan(i, n), part, true);
    all.insert(all.end(), part.begin(), part.end());
  }
  EXPECT_EQ(state->length(), static_cast<int64_t>(ids.size()));
  return all;
}

class FixtureParity : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureParity, PrefillMatchesReference) {
  const std::string dir = kData + "/fixtures/" + GetParam();
  auto m = model::load_model(dir);
  Golden g{io::Checkpoint::open_file(dir + "/golden.safetensors")};
  for (const std::string p : {"p0", "p1"}) {
    const auto ids = g.ids(p + ".input_ids");
    const double d = relative_max_diff(prefill(*m, ids, ids.size()), g.floats(p + ".prefill_logits"));
    EXPECT_LE(d, kTolerance) << GetParam() << " " << p;
  }
}

TEST_P(FixtureParity, IncrementalDecodeMatchesTeacherForcing) {
  const std::string dir = kData + "/fixtures/" + GetParam();
  auto m = model::load_model(dir);
  Golden g{io::Checkpoint::open_file(dir + "/golden.safetensors")};
  const int64_t V = m->vocab_size();
  for (const std::string p : {"p0", "p1"}) {
    const auto ids = g.ids(p + ".input_ids");
    const auto generated = g.ids(p + ".generated_ids");
    auto state = m->new_sequence();
    std::vector<float> logits, rows;
    m->forward(*state, ids, logits, false);
    rows = logits;
    EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), generated[0]);
    for (size_t i = 0; i + 1 < generated.size(); ++i) {
      m->forward(*state, std::span(generated).subspan(i, 1), logits, false);
      ASSERT_EQ(static_cast<int64_t>(logits.size()), V);
      EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), generated[i + 1])
          << p << " step " << i;
      rows.insert(rows.end(), logits.begin(), logits.end());
    }
    const double d = relative_max_diff(rows, g.floats(p + ".teacher_forced_logits"));
    EXPECT_LE(d, kTolerance) << GetParam() << " " << p;
  }
}

void expect_chunking_invariant(const std::string& dir, const std::string& golden_file, const std::string& key,
                               model::TopKTies ties) {
  model::LoadOptions options;
  options.top_k_ties = ties;
  auto m = model::load_model(dir, options);
  Golden g{io::Checkpoint::open_file(dir + "/" + golden_file)};
  const auto ids = g.ids(key);
  const auto one_shot = prefill(*m, ids, ids.size());
  for (size_t chunk : {1, 7, 64}) {
    EXPECT_LE(relative_max_diff(prefill(*m, ids, chunk), one_shot), kTolerance) << key << " chunk " << chunk;
  }
}

// With lower-index tie breaking the result cannot depend on chunking, whatever the scores.
TEST_P(FixtureParity, ChunkedPrefillEqualsOneShotWithLowerIndexTies) {
  for (const std::string p : {"p0.input_ids", "p1.input_ids"})
    expect_chunking_invariant(kData + "/fixtures/" + GetParam(), "golden.safetensors", p, model::TopKTies::LowerIndex);
}

// With the reference's tie breaking, chunking is invariant where no exact tie sits at an indexer's
// k-th place. v4_tiny_b's p1 has two such ties (relu makes scores exactly 0), on which the
// reference itself picks differently depending on how many entries one call ranks.
TEST(ChunkedPrefill, EqualsOneShotWithReferenceTies) {
  for (const std::string p : {"p0.input_ids", "p1.input_ids"})
    expect_chunking_invariant(kData + "/fixtures/v4_tiny_a", "golden.safetensors", p, model::TopKTies::Reference);
  expect_chunking_invariant(kData + "/fixtures/v4_tiny_b", "golden.safetensors", "p0.input_ids",
                            model::TopKTies::Reference);
  for (const std::string p : {"prompt0.input_ids", "prompt1.input_ids"})
    expect_chunking_invariant(kModels + "/kjv-tiny-v4", "golden.safetensors", p, model::TopKTies::Reference);
}

INSTANTIATE_TEST_SUITE_P(V4Fixtures, FixtureParity, ::testing::Values("v4_tiny_a", "v4_tiny_b"));

TEST(KjvParity, PromptLogitsMatchReference) {
  const std::string dir = kModels + "/kjv-tiny-v4";
  auto m = model::load_model(dir);
  Golden g{io::Checkpoint::open_file(dir + "/golden.safetensors")};
  for (const std::string p : {"prompt0", "prompt1"}) {
    const auto ids = g.ids(p + ".input_ids");
    EXPECT_LE(relative_max_diff(prefill(*m, ids, ids.size()), g.floats(p + ".logits")), kTolerance) << p;
  }
}

TEST(KjvParity, GreedyDecodeMatchesReference) {
  const std::string dir = kModels + "/kjv-tiny-v4";
  auto m = model::load_model(dir);
  Golden g{io::Checkpoint::open_file(dir + "/golden.safetensors")};
  for (const std::string p : {"prompt0", "prompt1"}) {
    const auto ids = g.ids(p + ".input_ids");
    const auto want = g.ids(p + ".greedy_ids");
    auto state = m->new_sequence();
    std::vector<float> logits;
    m->forward(*state, ids, logits, false);
    std::vector<int32_t> got;
    while (got.size() < want.size()) {
      const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(next);
      m->forward(*state, std::span(&got.back(), 1), logits, false);
    }
    EXPECT_EQ(got, want) << p;
  }
}

}  // namespace
}  // namespace deepinfer
