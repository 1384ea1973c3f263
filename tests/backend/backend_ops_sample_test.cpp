// test_backend_ops, the token sampler (Backend::sample): every backend draws, from rows in its own
// memory, the token the CPU reference (cpu::sample_row, whose arithmetic backend/sample_math.h
// fixes) draws: bit for bit, for greedy, temperature, top-k, top-p and min-p rows, with ties at
// every cut-off, masks, and a 129K vocabulary. Independently of that reference, each token must
// be one the documented filters allow.
// Designated initialisers name only the fields a test cares about; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "backend/cpu/sample_rows.h"
#include "backend/sample_math.h"
#include "backend_ops_util.h"
#include "core/error.h"

namespace deepinfer::backend_ops_test {
namespace {

using backend::SampleRow;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The row with the mask applied (what the reference sees).
std::vector<float> masked_row(std::span<const float> x, const SampleRow& row) {
  std::vector<float> out(x.begin(), x.end());
  if (!row.allowed.empty())
    for (size_t i = 0; i < out.size(); ++i)
      if (!((row.allowed[i >> 5] >> (i & 31)) & 1u)) out[i] = kNegInf;
  return out;
}

// The tokens the documented filters can return (independent of the reference's arithmetic, with a
// margin at the min-p / top-p cut-offs, where only the exact arithmetic decides).
std::set<int32_t> allowed_tokens(const std::vector<float>& x, const SampleRow& row) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != kNegInf) ids.push_back(static_cast<int32_t>(i));
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  if (row.temperature == 0) return {ids.front()};
  if (row.top_k > 0 && static_cast<size_t>(row.top_k) < ids.size()) ids.resize(static_cast<size_t>(row.top_k));
  const double m = x[ids.front()];
  std::vector<double> w;
  for (int32_t id : ids) w.push_back(std::exp((x[id] - m) / row.temperature));
  std::vector<int32_t> kept;
  std::vector<double> kept_w;
  for (size_t i = 0; i < ids.size(); ++i)
    if (w[i] >= row.min_p * (1 - 1e-9)) kept.push_back(ids[i]), kept_w.push_back(w[i]);
  if (row.top_p < 1) {
    const double total = std::accumulate(kept_w.begin(), kept_w.end(), 0.0);
    double acc = 0;
    size_t n = 0;
    while (n < kept.size() && acc < row.top_p * total * (1 - 1e-9)) acc += kept_w[n++];
    // Tokens tied with the last one kept may be the ones drawn instead (ties: lower id first).
    while (n < kept.size() && x[kept[n]] == x[kept[n - 1]]) ++n;
    kept.resize(n);
  }
  return {kept.begin(), kept.end()};
}

class BackendOpsSample : public BackendOps {
 protected:
  // Samples `rows` from `logits` [R, V] on the backend and checks every token against the reference.
  void check(const std::vector<float>& logits, int64_t V, const std::vector<SampleRow>& rows, const std::string& what) {
    const auto d_logits = on_device(logits);
    std::vector<int32_t> got(rows.size(), -7);
    be->sample(d_logits.view({static_cast<int64_t>(rows.size()), V}), rows, got);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto row = std::span<const float>(logits).subspan(r * static_cast<size_t>(V), static_cast<size_t>(V));
      const auto x = masked_row(row, rows[r]);
      const int32_t want = cpu::sample_row(x, rows[r]);
      EXPECT_EQ(got[r], want) << what << ", row " << r << " (T " << rows[r].temperature << ", top_k " << rows[r].top_k
                              << ", top_p " << rows[r].top_p << ", min_p " << rows[r].min_p << ", u "
                              << rows[r].uniform << ")";
      EXPECT_TRUE(allowed_tokens(x, rows[r]).count(got[r]))
          << what << ", row " << r << ": token " << got[r] << " is not one the filters allow";
    }
  }
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }
  // A row of every kind, its parameters drawn at random.
  SampleRow random_row(int kind) {
    SampleRow r;
    r.uniform = unit();
    r.temperature = std::vector<double>{0.0, 0.3, 1.0, 1.7}[static_cast<size_t>(kind % 4)];
    if (r.temperature == 0) return r;
    if (kind & 4) r.top_k = uniform_int(1, 60);
    if (kind & 8) r.top_p = std::vector<double>{0.05, 0.5, 0.9, 0.999}[static_cast<size_t>(uniform_int(0, 3))];
    if (kind & 16) r.min_p = std::vector<double>{0.01, 0.1, 0.5}[static_cast<size_t>(uniform_int(0, 2))];
    return r;
  }
};

TEST_P(BackendOpsSample, EveryFilterOnRandomRowsMatchesTheReference) {
  for (int64_t V : {1, 7, 1000, 2049, 129280}) {
    const int64_t R = V > 10000 ? 24 : 64;
    std::vector<float> logits(static_cast<size_t>(R * V));
    for (auto& v : logits) v = nonzero(4.0f);
    std::vector<SampleRow> rows;
    for (int64_t r = 0; r < R; ++r) rows.push_back(random_row(static_cast<int>(r % 32)));
    check(logits, V, rows, "vocab " + std::to_string(V));
  }
}

TEST_P(BackendOpsSample, PeakedRowsOfALargeVocabulary) {
  // A few hundred likely tokens among 129K, as a trained model's rows look: small nuclei (the CUDA
  // kernel then finishes in shared memory) next to flat rows (where it cannot).
  const int64_t V = 129280, R = 16;
  std::vector<float> logits(static_cast<size_t>(R * V));
  for (auto& v : logits) v = nonzero(2.0f);
  for (int64_t r = 0; r < R; r += 2)
    for (int k = 0; k < 300; ++k) logits[static_cast<size_t>(r * V + uniform_int(0, V - 1))] += 12.0f;
  std::vector<SampleRow> rows;
  for (int64_t r = 0; r < R; ++r) {
    SampleRow row;
    row.uniform = unit();
    row.temperature = r % 4 < 2 ? 1.0 : 0.4;
    row.top_p = std::vector<double>{0.5, 0.9, 0.99, 0.999}[static_cast<size_t>(uniform_int(0, 3))];
    if (r % 8 >= 6) row.top_k = uniform_int(100, 20000);
    rows.push_back(row);
  }
  check(logits, V, rows, "peaked rows");
}

TEST_P(BackendOpsSample, TiesAtEveryCutOffGoToTheLowerId) {
  // Logits on a coarse grid (many exact ties), peaked rows, -0 and +0, and -inf entries.
  const int64_t V = 3000, R = 96;
  std::vector<float> logits(static_cast<size_t>(R * V));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < V; ++i) {
      float v = static_cast<float>(uniform_int(-6, 3)) * 0.5f;
      if (r % 3 == 1 && uniform_int(0, 9) == 0) v = kNegInf;
      if (r % 3 == 2 && v == 0.0f && (i & 1)) v = -0.0f;
      logits[static_cast<size_t>(r * V + i)] = v;
    }
  std::vector<SampleRow> rows;
  for (int64_t r = 0; r < R; ++r) {
    SampleRow row = random_row(static_cast<int>(r % 32) | 1);  // never greedy-only: T > 0
    if (r % 4 == 0) row.top_k = uniform_int(1, 400);           // likely cut inside a tie group
    rows.push_back(row);
  }
  check(logits, V, rows, "grid logits");
  // Greedy with the maximum tied everywhere: id 0 (and -0 ties +0).
  std::vector<float> flat(static_cast<size_t>(V), 2.5f);
  check(flat, V, {SampleRow{}}, "flat row");
  std::vector<float> zeros(static_cast<size_t>(V), -1.0f);
  zeros[17] = -0.0f, zeros[5] = 0.0f;
  zeros.insert(zeros.end(), zeros.begin(), zeros.end());  // two rows
  check(zeros, V, {SampleRow{}, SampleRow{.temperature = 1.0, .top_k = 1, .uniform = 0.9}}, "signed zeros");
  // A temperature whose inverse overflows is greedy, not a row of zero weights.
  std::vector<float> tiny = randoms(static_cast<size_t>(V));
  check(tiny, V, {SampleRow{.temperature = 1e-310, .top_p = 0.9, .uniform = 0.7}}, "temperature 1e-310");
}

TEST_P(BackendOpsSample, MaskedRowsDrawOnlyAllowedTokens) {
  const int64_t V = 5000, R = 32;
  const auto logits = randoms(static_cast<size_t>(R * V), 3.0f);
  const size_t words = (V + 31) / 32;
  std::vector<std::vector<uint32_t>> masks(R, std::vector<uint32_t>(words + 3, 0));
  std::vector<SampleRow> rows;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t allowed = r % 4 == 0 ? 1 : uniform_int(2, 300);
    for (int64_t k = 0; k < allowed; ++k) {
      const int64_t id = uniform_int(0, V - 1);
      masks[r][static_cast<size_t>(id >> 5)] |= 1u << (id & 31);
    }
    SampleRow row = random_row(static_cast<int>(r % 32));
    row.allowed = masks[r];  // longer than needed: the words past the vocabulary are ignored
    rows.push_back(row);
  }
  check(logits, V, rows, "masked rows");
}

TEST_P(BackendOpsSample, BadRowsThrowTheReferenceMessage) {
  const int64_t V = 2000;
  auto message = [&](const std::vector<float>& x, const SampleRow& row) {
    const auto d = on_device(x);
    std::vector<int32_t> token(1);
    try {
      be->sample(d.view({1, V}), std::vector<SampleRow>{row}, token);
    } catch (const deepinfer::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto x = randoms(static_cast<size_t>(V));
  x[1500] = std::numeric_limits<float>::quiet_NaN();
  x[1700] = std::numeric_limits<float>::infinity();
  for (double t : {0.0, 1.0}) {
    EXPECT_EQ(message(x, SampleRow{.temperature = t}), "logits contain nan at token id 1500");
    x[1000] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(message(x, SampleRow{.temperature = t}), "logits contain inf at token id 1000");
    x[1000] = 0.5f;
  }
  // A masked NaN is not an error; a row with nothing allowed is.
  std::vector<uint32_t> mask((V + 31) / 32, 0);
  mask[0] = 1u << 3;
  EXPECT_EQ(message(x, SampleRow{.temperature = 1.0, .allowed = mask}), "no error");
  std::fill(mask.begin(), mask.end(), 0u);
  EXPECT_EQ(message(x, SampleRow{.temperature = 1.0, .allowed = mask}), "every token has logit -inf (all tokens masked)");
  EXPECT_EQ(message(std::vector<float>(static_cast<size_t>(V), kNegInf), SampleRow{}),
            "every token has logit -inf (all tokens masked)");
}

TEST(BackendOpsSampleMath, ExpIsWithinAnUlpOrTwoOfLibm) {
  namespace sm = backend::sample_math;
  EXPECT_EQ(sm::sample_exp(0.0), 1.0);
  EXPECT_EQ(sm::sample_exp(-0.0), 1.0);
  EXPECT_EQ(sm::sample_exp(-708.5), 0.0);
  EXPECT_EQ(sm::sample_exp(-std::numeric_limits<double>::infinity()), 0.0);
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double z = -707.9 * i / 200000.0;
    const double want = std::exp(z), got = sm::sample_exp(z);
    worst = std::max(worst, std::abs(got - want) / want);
    ASSERT_FALSE(std::isnan(got)) << z;
  }
  EXPECT_LE(worst, 1e-15);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOpsSample, testing::ValuesIn(backend_cases()), case_name);

}  // namespace
}  // namespace deepinfer::backend_ops_test
