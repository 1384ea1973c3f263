// Sampler: greedy, top-k / top-p filtering, the empirical distribution against softmax, seeding.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

// Designated initialisers name only the fields a test cares about; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "core/error.h"
#include "sampling/random.h"

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max_value = -1e300;
  for (float v : logits) max_value = std::max(max_value, v / temperature);
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] / temperature - max_value);
  for (double& v : p) v /= sum;
  return p;
}

// Pseudo-random logits in [-4, 4) from the test's own generator (not the one under test's stream).
std::vector<float> random_logits(size_t n, uint64_t salt) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(mix64(salt * 1000003 + i) % 8000) / 1000.0f - 4.0f;
  return out;
}

// Pearson chi-square of `counts` against expected probabilities `p` over `draws` draws.
double chi_square(const std::map<int32_t, int>& counts, const std::vector<double>& p, int draws) {
  double stat = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double expected = p[i] * draws;
    const auto it = counts.find(static_cast<int32_t>(i));
    const double seen = it == counts.end() ? 0 : it->second;
    stat += (seen - expected) * (seen - expected) / expected;
  }
  return stat;
}

TEST(Argmax, PicksLargestAndLowestIdOnTies) {
  EXPECT_EQ(argmax(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{kNegInf, kNegInf, -100.0f}), 2);
}

TEST(Argmax, RejectsEmptyNaNAndFullyMasked) {
  EXPECT_THROW(argmax(std::vector<float>{}), Error);
  EXPECT_THROW(argmax(std::vector<float>{1.0f, std::nanf(""), 0.0f}), Error);
  EXPECT_THROW(argmax(std::vector<float>{kNegInf, kNegInf}), Error);
}

TEST(Sampler, TemperatureZeroIsGreedyWhateverTheSeed) {
  Sampler sampler;
  const auto logits = random_logits(300, 1);
  const int32_t best = argmax(logits);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingParams params{.temperature = 0.0, .seed = seed};
    EXPECT_EQ(sampler.sample(logits, params, seed * 7), best);
  }
  SamplingParams tie{.temperature = 0.0};
  EXPECT_EQ(sampler.sample(std::vector<float>{2.0f, 7.0f, 7.0f}, tie, 0), 1);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  Sampler sampler;
  for (uint64_t salt = 0; salt < 20; ++salt) {
    const auto logits = random_logits(257, salt);
    SamplingParams params{.temperature = 1.5, .top_k = 1, .seed = salt};
    for (uint64_t step = 0; step < 10; ++step) EXPECT_EQ(sampler.sample(logits, params, step), argmax(logits));
  }
}

TEST(Sampler, TinyTopPEqualsGreedy) {
  Sampler sampler;
  for (uint64_t salt = 0; salt < 20; ++salt) {
    const auto logits = random_logits(257, salt + 100);
    SamplingParams params{.temperature = 1.0, .top_p = 1e-6, .seed = salt};
    for (uint64_t step = 0; step < 10; ++step) EXPECT_EQ(sampler.sample(logits, params, step), argmax(logits));
  }
}

TEST(Sampler, DistributionIsSoftmaxOfScaledLogits) {
  Sampler sampler;
  const auto logits = random_logits(50, 7);
  for (double temperature : {0.3, 1.0, 2.5}) {
    const auto expected = softmax(logits, temperature);
    const auto dist = sampler.distribution(logits, SamplingParams{.temperature = temperature});
    ASSERT_EQ(dist.size(), logits.size());
    double total = 0;
    for (auto [id, p] : dist) {
      EXPECT_NEAR(p, expected[id], 1e-12) << "id " << id << " T " << temperature;
      total += p;
    }
    EXPECT_NEAR(total, 1.0, 1e-12);
    for (size_t i = 1; i < dist.size(); ++i) EXPECT_GE(dist[i - 1].second, dist[i].second);
  }
}

TEST(Sampler, TopKKeepsTheKMostLikelyRenormalised) {
  Sampler sampler;
  const std::vector<float> logits{0.0f, 3.0f, 1.0f, 2.0f, -1.0f};
  const auto dist = sampler.distribution(logits, SamplingParams{.temperature = 1.0, .top_k = 3});
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[0].first, 1);
  EXPECT_EQ(dist[1].first, 3);
  EXPECT_EQ(dist[2].first, 2);
  const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(dist[0].second, std::exp(3.0) / z, 1e-12);
  EXPECT_NEAR(dist[2].second, std::exp(1.0) / z, 1e-12);
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingTheMass) {
  Sampler sampler;
  // Probabilities 0.5, 0.3, 0.1, 0.1 (in that order of likelihood, ids shuffled).
  const std::vector<float> logits{std::log(0.1f), std::log(0.5f), std::log(0.1f), std::log(0.3f)};
  auto dist = sampler.distribution(logits, SamplingParams{.temperature = 1.0, .top_p = 0.75});
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].first, 1);
  EXPECT_EQ(dist[1].first, 3);
  EXPECT_NEAR(dist[0].second, 0.5 / 0.8, 1e-6);
  // Exactly reaching the mass stops there; a hair more needs the next token (ties -> lower id first).
  EXPECT_EQ(sampler.distribution(logits, SamplingParams{.top_p = 0.5}).size(), 1u);
  dist = sampler.distribution(logits, SamplingParams{.top_p = 0.85});
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[2].first, 0);
}

// Brute force: sort everything, keep the smallest prefix reaching top_p.
std::vector<std::pair<int32_t, double>> reference_nucleus(const std::vector<float>& logits, double temperature,
                                                          double top_p) {
  const auto p = softmax(logits, temperature);
  std::vector<std::pair<int32_t, double>> all;
  for (size_t i = 0; i < p.size(); ++i) all.emplace_back(static_cast<int32_t>(i), p[i]);
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  double kept = 0;
  size_t count = 0;
  while (count < all.size() && kept < top_p * (1 - 1e-12)) kept += all[count++].second;
  all.resize(count);
  for (auto& [id, q] : all) q /= kept;
  return all;
}

TEST(Sampler, NucleusMatchesBruteForceOnLargeVocabularies) {
  Sampler sampler;
  // Flat logits make nuclei of thousands of tokens (the head grows several times); a peaked row a few.
  std::vector<float> peaked = random_logits(129280, 4);
  for (size_t i = 0; i < 500; ++i) peaked[i * 97] += 9.0f;
  const std::vector<float> flat = random_logits(20000, 8);
  for (const std::vector<float>* logits : {&std::as_const(peaked), &flat}) {
    for (double top_p : {0.05, 0.5, 0.9, 0.999}) {
      const auto expected = reference_nucleus(*logits, 0.9, top_p);
      const auto dist = sampler.distribution(*logits, SamplingParams{.temperature = 0.9, .top_p = top_p});
      ASSERT_EQ(dist.size(), expected.size()) << "top_p " << top_p;
      for (size_t i = 0; i < dist.size(); ++i) {
        ASSERT_EQ(dist[i].first, expected[i].first) << i;
        ASSERT_NEAR(dist[i].second, expected[i].second, 1e-9) << i;
      }
    }
  }
}

TEST(Sampler, TopKThenTopP) {
  Sampler sampler;
  const std::vector<float> logits{std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  // top-k 2 leaves {0.4, 0.3} -> renormalised {4/7, 3/7}; top-p 0.5 then keeps only id 0.
  const auto dist = sampler.distribution(logits, SamplingParams{.top_p = 0.5, .top_k = 2});
  ASSERT_EQ(dist.size(), 1u);
  EXPECT_EQ(dist[0].first, 0);
  EXPECT_EQ(dist[0].second, 1.0);
}

TEST(Sampler, EmpiricalFrequenciesMatchSoftmax) {
  Sampler sampler;
  const std::vector<float> logits{1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.25f};
  const double temperature = 0.8;
  const auto expected = softmax(logits, temperature);
  constexpr int kDraws = 40000;
  std::map<int32_t, int> counts;
  // Draws over many seeds at one step and over many steps of one seed: both must be unbiased.
  for (int i = 0; i < kDraws / 2; ++i) {
    counts[sampler.sample(logits, SamplingParams{.temperature = temperature, .seed = uint64_t(i)}, 3)]++;
    counts[sampler.sample(logits, SamplingParams{.temperature = temperature, .seed = 42}, uint64_t(i))]++;
  }
  // 7 degrees of freedom: P(chi2 > 24.3) = 0.001.
  EXPECT_LT(chi_square(counts, expected, kDraws), 24.3);
}

TEST(Sampler, EmpiricalFrequenciesMatchFilteredDistribution) {
  Sampler sampler;
  const auto logits = random_logits(64, 99);
  const SamplingParams base{.temperature = 0.7, .top_p = 0.9, .top_k = 10};
  const auto dist = sampler.distribution(logits, base);
  ASSERT_LE(dist.size(), 10u);
  ASSERT_GE(dist.size(), 2u);
  std::vector<double> expected(logits.size(), 0.0);
  for (auto [id, p] : dist) expected[id] = p;
  constexpr int kDraws = 30000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < kDraws; ++i) {
    SamplingParams params = base;
    params.seed = uint64_t(i);
    const int32_t id = sampler.sample(logits, params, 0);
    ASSERT_GT(expected[id], 0.0) << "sampled filtered-out token " << id;
    counts[id]++;
  }
  // df <= 9: P(chi2 > 27.9) = 0.001.
  EXPECT_LT(chi_square(counts, expected, kDraws), 27.9);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  const std::vector<float> logits(100, 0.0f);  // uniform: every draw is pure RNG
  auto run = [&](uint64_t seed) {
    Sampler sampler;
    std::vector<int32_t> ids;
    for (uint64_t step = 0; step < 64; ++step)
      ids.push_back(sampler.sample(logits, SamplingParams{.temperature = 1.0, .seed = seed}, step));
    return ids;
  };
  EXPECT_EQ(run(1234), run(1234));
  EXPECT_NE(run(1234), run(1235));
  EXPECT_NE(run(0), run(1));
}

TEST(Sampler, DrawDependsOnlyOnSeedAndStep) {
  // Interleaving other requests through the same sampler must not change a sequence's tokens.
  const auto logits = random_logits(500, 5);
  Sampler alone, shared;
  const SamplingParams mine{.temperature = 1.0, .seed = 77};
  const SamplingParams other{.temperature = 1.3, .top_k = 40, .seed = 3};
  for (uint64_t step = 0; step < 30; ++step) {
    shared.sample(random_logits(500, step + 1000), other, step * 3);
    EXPECT_EQ(alone.sample(logits, mine, step), shared.sample(logits, mine, step));
  }
}

TEST(Sampler, MaskedTokensAreNeverSampled) {
  Sampler sampler;
  std::vector<float> logits(20, 5.0f);
  for (size_t i = 0; i < logits.size(); ++i)
    if (i % 3 != 0) logits[i] = kNegInf;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const int32_t id = sampler.sample(logits, SamplingParams{.temperature = 2.0, .seed = seed}, 0);
    EXPECT_EQ(id % 3, 0);
  }
  EXPECT_THROW(sampler.sample(std::vector<float>(4, kNegInf), SamplingParams{}, 0), Error);
  EXPECT_THROW(sampler.sample(std::vector<float>{0.0f, std::nanf("")}, SamplingParams{}, 0), Error);
}

void expect_rejected(const SamplingParams& params, const std::string& field) {
  try {
    params.validate();
    ADD_FAILURE() << "accepted invalid " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
  Sampler sampler;
  EXPECT_THROW(sampler.sample(std::vector<float>{0.0f, 1.0f}, params, 0), Error) << field;
}

TEST(SamplingParams, RejectsInvalidValues) {
  expect_rejected(SamplingParams{.temperature = -0.1}, "temperature");
  expect_rejected(SamplingParams{.temperature = std::nan("")}, "temperature");
  expect_rejected(SamplingParams{.temperature = std::numeric_limits<double>::infinity()}, "temperature");
  expect_rejected(SamplingParams{.top_p = 0.0}, "top_p");
  expect_rejected(SamplingParams{.top_p = -0.5}, "top_p");
  expect_rejected(SamplingParams{.top_p = 1.01}, "top_p");
  expect_rejected(SamplingParams{.top_p = std::nan("")}, "top_p");
  expect_rejected(SamplingParams{.top_k = -1}, "top_k");
  expect_rejected(SamplingParams{.temperature = 0.0, .top_k = -3}, "top_k");
  expect_rejected(SamplingParams{.max_tokens = 0}, "max_tokens");
  expect_rejected(SamplingParams{.stop_token_ids = {1, -2}}, "stop token");
  EXPECT_NO_THROW((SamplingParams{.temperature = 0.0, .top_p = 1.0, .top_k = 0}.validate()));
  EXPECT_NO_THROW((SamplingParams{.temperature = 3.0, .top_p = 1e-9, .top_k = 100000}.validate()));
}

TEST(CounterRandom, UnitValuesLookUniform) {
  constexpr int kN = 100000;
  double sum = 0;
  int buckets[10] = {};
  for (int i = 0; i < kN; ++i) {
    const double u = counter_random_unit(9, 0, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    buckets[int(u * 10)]++;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  for (int b : buckets) EXPECT_NEAR(b, kN / 10, 500);
  EXPECT_NE(counter_random_u64(1, 0, 0), counter_random_u64(2, 0, 0));
  EXPECT_NE(counter_random_u64(1, 0, 0), counter_random_u64(1, 1, 0));
  EXPECT_NE(counter_random_u64(1, 0, 0), counter_random_u64(1, 0, 1));
}

}  // namespace
}  // namespace deepinfer::sampling
