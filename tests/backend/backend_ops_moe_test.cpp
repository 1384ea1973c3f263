// test_backend_ops, MoE ops: routing (scoring, bias, hash routing, normalisation, exact ties) and the
// experts (SwiGLU with clamps, the shared expert, moe_experts against its three parts) of every
// registered backend against double-precision loops on fresh random inputs (the suite's
// instantiation is in backend_ops_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "backend/cpu/ops.h"  // torch_top_k_indices: the documented TopKTies::Reference selection
#include "backend_ops_util.h"

namespace deepinfer::backend_ops_test {
namespace {

// ---------------------------------------------------------------- MoE routing

double ref_score(backend::ScoringFunc f, double x) {
  switch (f) {
    case backend::ScoringFunc::SqrtSoftplus: return std::sqrt(x > 20 ? x : std::log1p(std::exp(x)));  // torch softplus
    case backend::ScoringFunc::Sigmoid: return ref_sigmoid(x);
    case backend::ScoringFunc::Softmax: return x;  // row-wise, below
  }
  return NAN;
}

// Checks that `got` (indices) is a correct top-k of `scores` (double): the right count, distinct,
// every chosen score >= every unchosen one up to `slack`, and exact ties decided by the policy:
// LowerIndex = the lower index wins; Reference = the indices torch_top_k_indices picks on the float
// scores (`reference_pick`), unless a near-tie (within slack, not exact) explains a difference.
void expect_top_k(const std::vector<int32_t>& got, const std::vector<double>& scores, int64_t k, backend::TopKTies ties,
                  const std::vector<int32_t>& reference_pick, double slack, const std::string& what) {
  const auto n = static_cast<int64_t>(scores.size());
  ASSERT_EQ(static_cast<int64_t>(got.size()), std::min(k, n)) << what;
  const std::set<int32_t> chosen(got.begin(), got.end());
  ASSERT_EQ(chosen.size(), got.size()) << what << ": repeated index";
  for (int32_t g : got) ASSERT_TRUE(g >= 0 && g < n) << what << ": index " << g;
  bool near_tie = false;
  for (int32_t a : chosen)
    for (int32_t b = 0; b < n; ++b) {
      if (chosen.count(b)) continue;
      EXPECT_GE(scores[a], scores[b] - slack) << what << ": chose " << a << " (" << scores[a] << ") over " << b << " ("
                                              << scores[b] << ")";
      if (scores[a] == scores[b] && ties == backend::TopKTies::LowerIndex) {
        EXPECT_LT(a, b) << what << ": exact tie between " << a << " and " << b << " must go to the lower index";
      }
      if (scores[a] != scores[b] && std::fabs(scores[a] - scores[b]) <= slack) near_tie = true;
    }
  if (ties == backend::TopKTies::Reference && !near_tie) {
    EXPECT_EQ(chosen, std::set<int32_t>(reference_pick.begin(), reference_pick.end()))
        << what << ": not the reference (torch.topk) selection";
  }
}

struct RouteCase {
  backend::ScoringFunc scoring;
  bool bias, hash, norm_topk_prob;
};

TEST_P(BackendOps, MoeRouteScoringBiasHashNorm) {
  const int64_t T = 9, E = 16, K = 4, vocab = 50;
  const float scaling = 2.5f;
  std::vector<RouteCase> cases;
  for (auto f : {backend::ScoringFunc::SqrtSoftplus, backend::ScoringFunc::Sigmoid, backend::ScoringFunc::Softmax})
    for (bool bias : {false, true})
      for (bool hash : {false, true})
        for (bool norm : {true, false}) cases.push_back({f, bias, hash, norm});
  for (const auto& rc : cases)
    for (auto ties : {backend::TopKTies::Reference, backend::TopKTies::LowerIndex}) {
      const std::string what = "scoring " + std::to_string(static_cast<int>(rc.scoring)) + (rc.bias ? " bias" : "") +
                               (rc.hash ? " hash" : "") + (rc.norm_topk_prob ? " norm_topk_prob" : " unnormalised") +
                               (ties == backend::TopKTies::Reference ? " reference ties" : " lower-index ties");
      auto logits = randoms(static_cast<size_t>(T * E), 3.0f);
      logits[3] = 25.0f;  // softplus above its threshold of 20
      auto bias = randoms(static_cast<size_t>(E), 0.5f);
      std::vector<int32_t> tid2eid(static_cast<size_t>(vocab * K));
      for (int64_t v = 0; v < vocab; ++v) {  // K distinct experts per token id
        std::vector<int32_t> perm(static_cast<size_t>(E));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::copy_n(perm.begin(), K, tid2eid.begin() + v * K);
      }
      std::vector<int32_t> ids(static_cast<size_t>(T));
      for (auto& id : ids) id = static_cast<int32_t>(uniform_int(0, vocab - 1));
      backend::RoutingParams p;
      p.scoring = rc.scoring;
      p.top_k = K;
      p.routed_scaling_factor = scaling;
      p.norm_topk_prob = rc.norm_topk_prob;
      p.bias = rc.bias ? bias.data() : nullptr;
      p.tid2eid = rc.hash ? tid2eid.data() : nullptr;
      p.tid2eid_rows = rc.hash ? vocab : 0;
      p.ties = ties;
      const auto logits_in = logits;  // the op may reuse its logits as scratch: only its device copy
      auto d_logits = on_device(logits);
      auto d_experts = DeviceI32::filled(*be, static_cast<size_t>(T * K), -7);
      auto d_weights = nan_output(static_cast<size_t>(T * K));
      be->moe_route(p, d_logits.view({T, E}), ids, d_experts.view({T, K}), d_weights.view({T, K}));
      const auto experts = d_experts.download();
      const auto weights = d_weights.download();
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> score(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) score[e] = ref_score(rc.scoring, logits_in[t * E + e]);
        if (rc.scoring == backend::ScoringFunc::Softmax) ref_softmax(score);
        for (int64_t e = 0; e < E; ++e) biased[e] = score[e] + (rc.bias ? bias[e] : 0.0);
        const std::vector<int32_t> got(experts.begin() + t * K, experts.begin() + (t + 1) * K);
        std::vector<int32_t> want_experts;
        if (rc.hash) {
          want_experts.assign(tid2eid.begin() + ids[t] * K, tid2eid.begin() + (ids[t] + 1) * K);
          EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), std::set<int32_t>(want_experts.begin(), want_experts.end()))
              << what << " token " << t << ": hash routing must take tid2eid[" << ids[t] << "]";
        } else {
          std::vector<float> biased_f(biased.begin(), biased.end());
          expect_top_k(got, biased, K, effective_ties(*be, ties, backend::TopKSite::MoeExperts), cpu::torch_top_k_indices(biased_f, K), 1e-6,
                       what + " token " + std::to_string(t));
          want_experts = got;
        }
        // Weights: unbiased scores of the chosen experts, renormalised when asked, times the scaling.
        double sum = 0;
        for (int32_t e : want_experts) sum += score[e];
        std::map<int32_t, double> want_weight;
        for (int32_t e : want_experts)
          want_weight[e] = score[e] * (rc.norm_topk_prob ? scaling / (sum + 1e-20) : scaling);
        std::vector<float> got_w;
        std::vector<double> want_w;
        for (int64_t k = 0; k < K; ++k) {
          const int32_t e = experts[t * K + k];
          got_w.push_back(weights[t * K + k]);
          want_w.push_back(want_weight.count(e) ? want_weight[e] : NAN);
        }
        EXPECT_CLOSE(got_w, want_w, what + " weights of token " + std::to_string(t));
      }
    }
}

// Exact ties (equal logits, no bias): LowerIndex must keep the lower expert ids; Reference must keep
// what torch.topk keeps.
TEST_P(BackendOps, MoeRouteExactTies) {
  const int64_t T = 6, E = 64, K = 6;
  for (auto ties : {backend::TopKTies::Reference, backend::TopKTies::LowerIndex}) {
    std::vector<float> logits(static_cast<size_t>(T * E));
    for (auto& v : logits) v = static_cast<float>(uniform_int(1, 4)) * 0.5f;  // four distinct values, many ties
    const auto logits_in = logits;
    backend::RoutingParams p;
    p.scoring = backend::ScoringFunc::Sigmoid;
    p.top_k = K;
    p.ties = ties;
    std::vector<int32_t> ids(static_cast<size_t>(T), 0);
    auto d_logits = on_device(logits);  // scratch to the op
    auto d_experts = DeviceI32::filled(*be, static_cast<size_t>(T * K), -7);
    auto d_weights = nan_output(static_cast<size_t>(T * K));
    be->moe_route(p, d_logits.view({T, E}), ids, d_experts.view({T, K}), d_weights.view({T, K}));
    const auto experts = d_experts.download();
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> score(static_cast<size_t>(E));
      std::vector<float> score_f(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        score[e] = ref_sigmoid(logits_in[t * E + e]);
        score_f[e] = static_cast<float>(score[e]);
      }
      const std::vector<int32_t> got(experts.begin() + t * K, experts.begin() + (t + 1) * K);
      expect_top_k(got, score, K, effective_ties(*be, ties, backend::TopKSite::MoeExperts), cpu::torch_top_k_indices(score_f, K), 0.0,
                   std::string(ties == backend::TopKTies::Reference ? "reference" : "lower-index") + " ties, token " +
                       std::to_string(t));
    }
  }
}

// ---------------------------------------------------------------- MoE experts

// w2 (silu(min(w1 x, limit)) * clamp(w3 x, -limit, limit)) in double.
std::vector<double> ref_swiglu(const ExpertWeights& e, const float* x, int64_t D, double limit) {
  const int64_t I = e.w1.w.rows;
  std::vector<double> h(static_cast<size_t>(I)), out(static_cast<size_t>(D), 0.0);
  for (int64_t i = 0; i < I; ++i) {
    double g = 0, u = 0;
    for (int64_t d = 0; d < D; ++d) {
      g += e.w1.at(i, d) * x[d];
      u += e.w3.at(i, d) * x[d];
    }
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
    h[static_cast<size_t>(i)] = g * ref_sigmoid(g) * u;
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = 0; i < I; ++i) out[static_cast<size_t>(d)] += e.w2.at(d, i) * h[static_cast<size_t>(i)];
  return out;
}

// moe_experts' reference for tokens [t0, t0 + T) of x [*, D]: the shared expert plus the chosen
// experts' outputs weighted, per token ([T, D]).
std::vector<double> ref_moe(const ExpertWeights& shared, const std::vector<ExpertWeights>& experts,
                            const std::vector<float>& x, const std::vector<int32_t>& chosen,
                            const std::vector<float>& weights, int64_t t0, int64_t T, int64_t D, int64_t K,
                            double limit) {
  std::vector<double> want(static_cast<size_t>(T * D));
  for (int64_t t = t0; t < t0 + T; ++t) {
    auto row = ref_swiglu(shared, x.data() + t * D, D, limit);
    for (int64_t k = 0; k < K; ++k) {
      const auto y = ref_swiglu(experts[static_cast<size_t>(chosen[t * K + k])], x.data() + t * D, D, limit);
      for (int64_t d = 0; d < D; ++d) row[static_cast<size_t>(d)] += weights[t * K + k] * y[static_cast<size_t>(d)];
    }
    std::copy(row.begin(), row.end(), want.begin() + (t - t0) * D);
  }
  return want;
}

TEST_P(BackendOps, MoeExpertsSwigluWithClampsAndSharedExpert) {
  const int64_t D = 64, I = 32, E = 6, K = 2;
  // As released: routed experts FP4, the shared expert FP8; and all BF16. T 1-2: decode (the CUDA
  // kernels for 1-2 rows); T = 2 repeats one expert in a token's top-k (the router does only with NaN
  // scores; then an expert holds more rows than there are tokens); T = 6: few rows per expert on
  // average (tiles of 2 rows on CUDA) but every token on expert 0 (3 tiles); T = 40: experts with
  // more rows than one GEMM tile. The FP8 shared expert with 32- and 128-wide scale blocks (128 as
  // released: CUDA's default mode then runs it on the tensor-core GEMV at 1-2 tokens).
  for (int64_t T : {1, 2, 6, 11, 40})
  for (auto [routed_dtype, shared_dtype, shared_block] :
       {std::tuple{DType::F4_E2M1, DType::F8_E4M3, int64_t{32}}, std::tuple{DType::F4_E2M1, DType::F8_E4M3, int64_t{128}},
        std::tuple{DType::BF16, DType::BF16, int64_t{32}}}) {
    auto& experts = keep(std::vector<ExpertWeights>{});
    for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, routed_dtype, I, D));
    const ExpertWeights& shared = keep(make_expert(rng, shared_dtype, I, D, shared_block));
    std::vector<backend::SwigluExpert> views;
    for (const auto& e : experts) views.push_back(e.view());
    for (float limit : {0.05f, 10.0f}) {  // clamps active / inactive
      backend::MoeWeights mw{views, shared.view(), limit};
      auto x = randoms(static_cast<size_t>(T * D));
      std::vector<int32_t> chosen = two_distinct_experts(T, E - 1);  // expert E - 1 never used
      if (T == 2) chosen[3] = chosen[2];
      if (T == 6)
        for (int64_t t = 0; t < T; ++t) chosen[t * K] = 0, chosen[t * K + 1] = static_cast<int32_t>(1 + t % 4);
      auto weights = randoms(static_cast<size_t>(T * K));
      const auto dx = on_device(x);
      const auto d_chosen = on_device(chosen);
      const auto d_weights = on_device(weights);
      auto out = nan_output(static_cast<size_t>(T * D));
      be->moe_experts(mw, dx.view({T, D}), d_chosen.view({T, K}), d_weights.view({T, K}), out.view({T, D}));
      const auto want = ref_moe(shared, experts, x, chosen, weights, 0, T, D, K, limit);
      EXPECT_CLOSE(out.download(), want, std::string("moe_experts ") + std::string(dtype_name(routed_dtype)) + " T=" +
                                             std::to_string(T) + " limit " + std::to_string(limit) +
                                             " shared block " + std::to_string(shared_block));
    }
  }
}

// Routed FP4 experts of decode-sized calls whose widths are whole 128-column steps (D = 256,
// I = 384: CUDA's tensor-core FP4 GEMV fits them; tools/gpu/test.sh runs this with
// DEEPINFER_MOE_GEMV=1): one token; two tokens with a repeated expert (a 2-row tile); 6 tokens all
// on expert 0 (3 tiles of 2 rows); 11 tokens (3.7 rows an expert) and 20 (6.7): the GEMV's tiles of
// up to 8 rows, expert 0's more than one (with DEEPINFER_MOE_GEMV_TILE_ROWS=4: tiles of up to 4
// rows at 11 tokens, the tensor-core GEMM at 20); clamps active and not.
TEST_P(BackendOps, MoeExpertsFp4DecodeTiles) {
  const int64_t D = 256, I = 384, E = 6, K = 2;
  auto& experts = keep(std::vector<ExpertWeights>{});
  for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, DType::F4_E2M1, I, D));
  const ExpertWeights& shared = keep(make_expert(rng, DType::F8_E4M3, I, D, 128));
  std::vector<backend::SwigluExpert> views;
  for (const auto& e : experts) views.push_back(e.view());
  for (int64_t T : {1, 2, 6, 11, 20})
    for (float limit : {0.05f, 10.0f}) {
      backend::MoeWeights mw{views, shared.view(), limit};
      // x at 1/16: the random FP8 shared expert's gate sums reach |g| ~ 500 from terms of ~1,000 in
      // all, and float32's rounding of g (~1e-4) then moved a small output by more than 1e-4 of the
      // range where g is unclamped (seed 1130: the CPU's result equals float32 arithmetic done in
      // order, 2.6e-4 from the double reference). The clamps stay active at 0.05.
      auto x = randoms(static_cast<size_t>(T * D), 1.0f / 16);
      std::vector<int32_t> chosen = two_distinct_experts(T, E);
      if (T == 2) chosen[3] = chosen[2];
      if (T == 6 || T >= 11)
        for (int64_t t = 0; t < T; ++t) chosen[t * K] = 0, chosen[t * K + 1] = static_cast<int32_t>(1 + t % 5);
      const auto weights = randoms(static_cast<size_t>(T * K));
      const auto dx = on_device(x);
      const auto d_chosen = on_device(chosen);
      const auto d_weights = on_device(weights);
      auto out = nan_output(static_cast<size_t>(T * D));
      be->moe_experts(mw, dx.view({T, D}), d_chosen.view({T, K}), d_weights.view({T, K}), out.view({T, D}));
      EXPECT_CLOSE(out.download(), ref_moe(shared, experts, x, chosen, weights, 0, T, D, K, limit),
                   "moe_experts FP4 T=" + std::to_string(T) + " limit " + std::to_string(limit));
    }
}

// Decode-sized calls (1-2 tokens) whose gate / up GEMM has more jobs than the CUDA device holds
// at once (3 experts x 128 column tiles of 16 outputs, 2,048 intermediate rows): the streaming
// kernel walks several jobs per CTA. D and I are whole 1024-column FP4 slabs, as in V4-Flash.
// Against the reference, and bit for bit against the same
// tokens in a batch of 9 (more rows than 2 per expert: the many-row tiles).
TEST_P(BackendOps, MoeExpertsDecodeManyJobsPerCta) {
  const int64_t D = 1024, I = 2048, E = 4, K = 3, B = 9;
  for (auto [routed_dtype, shared_dtype] : {std::pair{DType::F4_E2M1, DType::F8_E4M3}}) {  // as released
    auto& experts = keep(std::vector<ExpertWeights>{});
    for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, routed_dtype, I, D));
    const ExpertWeights& shared = keep(make_expert(rng, shared_dtype, I, D, 128));
    std::vector<backend::SwigluExpert> views;
    for (const auto& e : experts) views.push_back(e.view());
    const float limit = 10.0f;
    backend::MoeWeights mw{views, shared.view(), limit};
    const auto x = randoms(static_cast<size_t>(B * D));
    std::vector<int32_t> chosen(static_cast<size_t>(B * K));
    for (int64_t t = 0; t < B; ++t) {
      chosen[t * K] = static_cast<int32_t>(t % E);
      for (int64_t k = 1; k < K; ++k)  // K distinct experts: offsets 1 .. K - 1 from the first
        chosen[t * K + k] = static_cast<int32_t>((t + k) % E);
    }
    const auto weights = randoms(static_cast<size_t>(B * K));
    auto run = [&](int64_t t0, int64_t T) {
      const auto dx = on_device(std::vector<float>(x.begin() + t0 * D, x.begin() + (t0 + T) * D));
      const auto dc = on_device(std::vector<int32_t>(chosen.begin() + t0 * K, chosen.begin() + (t0 + T) * K));
      const auto dw = on_device(std::vector<float>(weights.begin() + t0 * K, weights.begin() + (t0 + T) * K));
      auto out = nan_output(static_cast<size_t>(T * D));
      be->moe_experts(mw, dx.view({T, D}), dc.view({T, K}), dw.view({T, K}), out.view({T, D}));
      return out.download();
    };
    const auto all = run(0, B);
    for (int64_t T : {1, 2}) {
      const int64_t t0 = 3;
      const auto got = run(t0, T);
      const auto want = ref_moe(shared, experts, x, chosen, weights, t0, T, D, K, limit);
      const std::string label = std::string("moe_experts ") + std::string(dtype_name(routed_dtype)) + " T=" + std::to_string(T);
      EXPECT_CLOSE(got, want, label);
      if (be->batching_keeps_bits()) {  // (the backend's kernels do not depend on the rows of a call)
        EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + t0 * D)) << label << ": differs from the batch of " << B;
      }
    }
  }
}

// moe_experts equals its three parts bit for bit (expert parallelism runs them on different ranks):
// the shared expert, every routed row through its expert in a shuffled order (as rows arrive from
// other ranks), and the combine in ascending expert id.
TEST_P(BackendOps, MoeExpertsEqualsItsParts) {
  const int64_t D = 64, I = 32, E = 6, K = 2;
  for (int64_t T : {1, 9, 40})
    for (auto [routed_dtype, shared_dtype] :
         {std::pair{DType::F4_E2M1, DType::F8_E4M3}, std::pair{DType::BF16, DType::BF16}}) {
      auto& experts = keep(std::vector<ExpertWeights>{});
      for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, routed_dtype, I, D));
      const ExpertWeights& shared = keep(make_expert(rng, shared_dtype, I, D));
      std::vector<backend::SwigluExpert> views;
      for (const auto& e : experts) views.push_back(e.view());
      backend::MoeWeights mw{views, shared.view(), 0.5f};
      const auto x = randoms(static_cast<size_t>(T * D));
      std::vector<int32_t> chosen = two_distinct_experts(T, E);
      const auto weights = randoms(static_cast<size_t>(T * K));
      const auto dx = on_device(x);
      const auto d_chosen = on_device(chosen);
      const auto d_weights = on_device(weights);
      auto whole = nan_output(static_cast<size_t>(T * D));
      be->moe_experts(mw, dx.view({T, D}), d_chosen.view({T, K}), d_weights.view({T, K}), whole.view({T, D}));

      // Row i of the parts holds (token, k) = order[i].
      std::vector<int64_t> order(static_cast<size_t>(T * K));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<float> rows_x(static_cast<size_t>(T * K * D));
      std::vector<int32_t> rows_e(static_cast<size_t>(T * K)), row_of(static_cast<size_t>(T * K));
      for (size_t i = 0; i < order.size(); ++i) {
        const int64_t tk = order[i];
        std::copy_n(x.begin() + tk / K * D, D, rows_x.begin() + static_cast<int64_t>(i) * D);
        rows_e[i] = chosen[static_cast<size_t>(tk)];
        row_of[static_cast<size_t>(tk)] = static_cast<int32_t>(i);
      }
      auto parts = nan_output(static_cast<size_t>(T * D));
      be->moe_shared_expert(mw, dx.view({T, D}), parts.view({T, D}));
      const auto d_rows_x = on_device(rows_x);
      const auto d_rows_e = on_device(rows_e);
      const auto d_row_of = on_device(row_of);
      auto rows_y = nan_output(static_cast<size_t>(T * K * D));
      be->moe_expert_rows(mw, d_rows_x.view({T * K, D}), d_rows_e.view({T * K}), rows_y.view({T * K, D}));
      be->moe_combine(rows_y.view({T * K, D}), d_row_of.view({T, K}), d_chosen.view({T, K}), d_weights.view({T, K}),
                      parts.view({T, D}));
      const auto a = whole.download(), b = parts.download();
      for (float v : a) ASSERT_TRUE(std::isfinite(v)) << "moe_experts gave " << v;
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "moe_experts and its parts differ, T=" << T << " " << dtype_name(routed_dtype);
    }
}

// moe_combine alone: repeated expert ids (ties by k), dropped entries (row -1: another rank's expert),
// a token with none, and widths of a multiple of 4 columns and not.
TEST_P(BackendOps, MoeCombineAddsRowsInExpertOrder) {
  const int64_t T = 7, K = 5, R = T * K;
  for (int64_t D : {64, 10}) {
    std::vector<int32_t> chosen(static_cast<size_t>(T * K)), row_of(static_cast<size_t>(T * K));
    for (size_t i = 0; i < chosen.size(); ++i) {
      chosen[i] = static_cast<int32_t>(uniform_int(0, 3));  // 4 ids among 5 picks: ties
      row_of[i] = uniform_int(0, 3) == 0 ? -1 : static_cast<int32_t>(uniform_int(0, R - 1));
    }
    for (int64_t k = 0; k < K; ++k) row_of[static_cast<size_t>(2 * K + k)] = -1;  // token 2: nothing routed here
    const auto rows = randoms(static_cast<size_t>(R * D)), weights = randoms(static_cast<size_t>(T * K)),
               base = randoms(static_cast<size_t>(T * D));
    std::vector<double> want(base.begin(), base.end());
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> ks(static_cast<size_t>(K));
      std::iota(ks.begin(), ks.end(), int64_t{0});
      std::stable_sort(ks.begin(), ks.end(), [&](int64_t a, int64_t b) { return chosen[t * K + a] < chosen[t * K + b]; });
      for (int64_t k : ks) {
        const int32_t r = row_of[static_cast<size_t>(t * K + k)];
        if (r < 0) continue;
        for (int64_t d = 0; d < D; ++d)
          want[static_cast<size_t>(t * D + d)] += static_cast<double>(weights[t * K + k]) * rows[r * D + d];
      }
    }
    const auto d_rows = on_device(rows), d_weights = on_device(weights);
    const auto d_chosen = on_device(chosen), d_row_of = on_device(row_of);
    auto out = on_device(base);
    be->moe_combine(d_rows.view({R, D}), d_row_of.view({T, K}), d_chosen.view({T, K}), d_weights.view({T, K}),
                    out.view({T, D}));
    EXPECT_CLOSE(out.download(), want, "moe_combine D=" + std::to_string(D));
  }
}

// Experts with many rows each (T = 300 tokens over 8 experts, top 2: ~75 rows per expert, tiles of
// 64 rows on the CUDA tensor cores) and wider matrices; each token alone must give the same bits.
TEST_P(BackendOps, MoeExpertsManyRowsPerExpert) {
  const int64_t D = 256, I = 128, E = 8, K = 2, T = 300;
  for (auto [routed_dtype, shared_dtype] : {std::pair{DType::F4_E2M1, DType::F8_E4M3}, std::pair{DType::BF16, DType::BF16}}) {
    auto& experts = keep(std::vector<ExpertWeights>{});
    for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, routed_dtype, I, D));
    const ExpertWeights& shared = keep(make_expert(rng, shared_dtype, I, D));
    std::vector<backend::SwigluExpert> views;
    for (const auto& e : experts) views.push_back(e.view());
    const float limit = 10.0f;
    backend::MoeWeights mw{views, shared.view(), limit};
    auto x = randoms(static_cast<size_t>(T * D));
    std::vector<int32_t> chosen = two_distinct_experts(T, E);
    auto weights = randoms(static_cast<size_t>(T * K));
    const auto dx = on_device(x);
    const auto d_chosen = on_device(chosen);
    const auto d_weights = on_device(weights);
    auto out = nan_output(static_cast<size_t>(T * D));
    be->moe_experts(mw, dx.view({T, D}), d_chosen.view({T, K}), d_weights.view({T, K}), out.view({T, D}));
    const auto got = out.download();
    const auto want = ref_moe(shared, experts, x, chosen, weights, 0, T, D, K, limit);
    EXPECT_CLOSE(got, want, std::string("moe_experts T=300 ") + std::string(dtype_name(routed_dtype)));
    for (int64_t t : {0, 150, 299}) {
      if (!be->batching_keeps_bits()) break;  // (CUDA's default mode: another GEMM for one row)
      const auto dxr = on_device(std::vector<float>(x.begin() + t * D, x.begin() + (t + 1) * D)),
                 dwr = on_device(std::vector<float>(weights.begin() + t * K, weights.begin() + (t + 1) * K));
      const auto dcr = on_device(std::vector<int32_t>(chosen.begin() + t * K, chosen.begin() + (t + 1) * K));
      auto d_yr = nan_output(static_cast<size_t>(D));
      be->moe_experts(mw, dxr.view({1, D}), dcr.view({1, K}), dwr.view({1, K}), d_yr.view({1, D}));
      const auto yr = d_yr.download();
      EXPECT_TRUE(std::equal(yr.begin(), yr.end(), got.begin() + t * D))
          << "moe_experts " << dtype_name(routed_dtype) << ": token " << t << " alone differs from the batch";
    }
  }
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
