#include "backend/cpu/sample_rows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/sample_math.h"
#include "core/error.h"

// Built with -ffp-contract=off (src/CMakeLists.txt): the sums and products must round exactly as
// the CUDA kernel's _rn intrinsics do.

namespace deepinfer::cpu {

namespace sm = backend::sample_math;

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// NaN or +inf logits mean the model went wrong; sampling around them would hide the bug.
void check_logit(float value, size_t id) {
  if (std::isnan(value) || value == std::numeric_limits<float>::infinity())
    fail("logits contain {} at token id {}", value, id);
}

// The heap-ordered sum tree: leaves [kSampleChunks, 2 kSampleChunks), node n = node 2n + node 2n+1.
using SumTree = std::array<double, 2 * sm::kSampleChunks>;

void build_tree(const SampleCandidates& c, SumTree& tree) {
  tree.fill(0.0);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    double& leaf = tree[static_cast<size_t>(sm::kSampleChunks + sm::chunk_of(c.ids[i]))];
    leaf = sm::dadd(leaf, c.weights[i]);
  }
  for (int n = sm::kSampleChunks - 1; n >= 1; --n) tree[n] = sm::dadd(tree[2 * n], tree[2 * n + 1]);
}

// "a is more likely than b": larger logit, then lower id.
struct MoreLikely {
  std::span<const float> x;
  bool operator()(int32_t a, int32_t b) const { return x[a] != x[b] ? x[a] > x[b] : a < b; }
};

// The chunked mass of the `n` most likely candidates: rank[k] is candidate k's place in the order
// MoreLikely (kUnranked past the sorted head), so a prefix's mass is one pass in id order.
constexpr uint32_t kUnranked = 0xFFFFFFFFu;
double prefix_mass(const SampleCandidates& c, std::span<const uint32_t> rank, size_t n, SumTree& tree) {
  tree.fill(0.0);
  for (size_t k = 0; k < c.ids.size(); ++k) {
    if (rank[k] >= n) continue;
    double& leaf = tree[static_cast<size_t>(sm::kSampleChunks + sm::chunk_of(c.ids[k]))];
    leaf = sm::dadd(leaf, c.weights[k]);
  }
  for (int k = sm::kSampleChunks - 1; k >= 1; --k) tree[k] = sm::dadd(tree[2 * k], tree[2 * k + 1]);
  return tree[1];
}

}  // namespace

int32_t argmax_row(std::span<const float> logits) {
  DEEPINFER_CHECK(!logits.empty(), "cannot pick a token from an empty logits row");
  int64_t best = -1;
  float best_value = kMasked;
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    if (logits[i] > best_value) {  // strict: the first (lowest) id wins ties
      best_value = logits[i];
      best = static_cast<int64_t>(i);
    }
  }
  DEEPINFER_CHECK(best >= 0, "every token has logit -inf (all tokens masked)");
  return static_cast<int32_t>(best);
}

double chunked_mass(const SampleCandidates& c) {
  SumTree tree;
  build_tree(c, tree);
  return tree[1];
}

SampleCandidates sample_candidates(std::span<const float> x, const backend::SampleRow& row) {
  const int32_t top = argmax_row(x);  // checks every logit
  const float max_logit = x[static_cast<size_t>(top)];
  SampleCandidates c;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != kMasked) c.ids.push_back(static_cast<int32_t>(i));
  const MoreLikely more_likely{x};
  if (row.top_k > 0 && static_cast<size_t>(row.top_k) < c.ids.size()) {
    std::nth_element(c.ids.begin(), c.ids.begin() + row.top_k - 1, c.ids.end(), more_likely);
    c.ids.resize(static_cast<size_t>(row.top_k));
    std::sort(c.ids.begin(), c.ids.end());
  }
  const double inv_temperature = 1.0 / row.temperature;
  c.weights.resize(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i)
    c.weights[i] = sm::sample_weight(x[static_cast<size_t>(c.ids[i])], max_logit, inv_temperature);
  if (row.min_p > 0.0) {  // the maximum weighs exactly 1, so it always stays
    size_t kept = 0;
    for (size_t i = 0; i < c.ids.size(); ++i) {
      if (c.weights[i] < row.min_p) continue;
      c.ids[kept] = c.ids[i];
      c.weights[kept++] = c.weights[i];
    }
    c.ids.resize(kept);
    c.weights.resize(kept);
  }
  if (row.top_p < 1.0) {
    const double target = sm::dmul(row.top_p, chunked_mass(c));
    // The nucleus is usually tiny next to a 100K+ vocabulary: sort a growing head until its mass
    // reaches the target, then find the shortest prefix of that head by bisection (the mass of a
    // prefix grows with its length: the weights are >= 0 and rounding is monotonic).
    // order: candidates as (logit key, ~index) so that a larger value is more likely (ties: the
    // lower index, which is the lower id); the low 32 bits give back the candidate index.
    std::vector<uint64_t> order(c.ids.size());
    std::vector<uint32_t> rank(c.ids.size(), kUnranked);
    for (size_t k = 0; k < order.size(); ++k)
      order[k] = static_cast<uint64_t>(sm::float_key(x[static_cast<size_t>(c.ids[k])])) << 32 | (0xFFFFFFFFu - k);
    const auto index_of = [](uint64_t v) { return 0xFFFFFFFFu - static_cast<uint32_t>(v); };
    const auto more_likely_at = std::greater<uint64_t>();
    SumTree tree;
    size_t head = 0;
    for (size_t next = std::min<size_t>(order.size(), 64);; next = std::min(order.size(), next * 4)) {
      // order[0, head) holds the `head` most likely, sorted and ranked; extend that to `next`.
      const auto from = order.begin() + static_cast<std::ptrdiff_t>(head), to = order.begin() + static_cast<std::ptrdiff_t>(next);
      std::nth_element(from, to - 1, order.end(), more_likely_at);
      std::sort(from, to, more_likely_at);
      for (size_t r = head; r < next; ++r) rank[index_of(order[r])] = static_cast<uint32_t>(r);
      head = next;
      if (head == order.size() || prefix_mass(c, rank, head, tree) >= target) break;
    }
    size_t lo = 1, hi = head;  // the answer lies in [lo, hi]
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (prefix_mass(c, rank, mid, tree) >= target) hi = mid;
      else lo = mid + 1;
    }
    std::vector<uint32_t> kept;
    for (size_t r = 0; r < lo; ++r) kept.push_back(index_of(order[r]));
    std::sort(kept.begin(), kept.end());  // candidate index order is id order
    SampleCandidates nucleus;
    for (uint32_t k : kept) {
      nucleus.ids.push_back(c.ids[k]);
      nucleus.weights.push_back(c.weights[k]);
    }
    c = std::move(nucleus);
  }
  return c;
}

int32_t draw_candidate(const SampleCandidates& c, double uniform) {
  DEEPINFER_CHECK(!c.ids.empty(), "no token left to sample");
  SumTree tree;
  build_tree(c, tree);
  double target = sm::dmul(uniform, tree[1]);
  int n = 1;
  while (n < sm::kSampleChunks) {
    const double left = tree[2 * n];
    if (target < left || tree[2 * n + 1] == 0.0) {
      n = 2 * n;
    } else {
      target = sm::dadd(target, -left);
      n = 2 * n + 1;
    }
  }
  // Walk chunk n - kSampleChunks in id order; rounding may leave the target past its end, and
  // then its last token of non-zero weight is drawn.
  const int chunk = n - sm::kSampleChunks;
  double acc = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (sm::chunk_of(c.ids[i]) != chunk || c.weights[i] == 0.0) continue;
    acc = sm::dadd(acc, c.weights[i]);
    last = c.ids[i];
    if (target < acc) return c.ids[i];
  }
  DEEPINFER_CHECK(last >= 0, "internal error: the sampler's draw reached an empty chunk");
  return last;
}

int32_t sample_row(std::span<const float> logits, const backend::SampleRow& row) {
  // A temperature so small that 1 / T overflows is the greedy limit (the weights would be 0 * inf).
  if (row.temperature == 0.0 || !std::isfinite(1.0 / row.temperature)) return argmax_row(logits);
  return draw_candidate(sample_candidates(logits, row), row.uniform);
}

void sample_rows(std::span<const float> logits, int64_t vocab, std::span<const backend::SampleRow> rows,
                 std::span<int32_t> tokens) {
  DEEPINFER_CHECK(vocab > 0 && logits.size() == rows.size() * static_cast<size_t>(vocab) && tokens.size() == rows.size(),
                  "sample: {} logits of vocab {} for {} rows and {} tokens", logits.size(), vocab, rows.size(),
                  tokens.size());
  const auto V = static_cast<size_t>(vocab);
  std::vector<float> masked;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::span<const float> row = logits.subspan(r * V, V);
    if (!rows[r].allowed.empty()) {
      DEEPINFER_CHECK(rows[r].allowed.size() * 32 >= V, "sample: row {} has a mask of {} words for vocab {}", r,
                      rows[r].allowed.size(), V);
      masked.assign(row.begin(), row.end());
      for (size_t i = 0; i < V; ++i)
        if (!((rows[r].allowed[i >> 5] >> (i & 31)) & 1u)) masked[i] = kMasked;
      row = masked;
    }
    tokens[r] = sample_row(row, rows[r]);
  }
}

void CpuBackend::sample(TensorView logits, std::span<const backend::SampleRow> rows, std::span<int32_t> tokens) {
  DEEPINFER_CHECK(logits.dtype == DType::F32 && logits.rank == 2 && logits.is_contiguous() &&
                      logits.dim(0) == static_cast<int64_t>(rows.size()),
                  "sample: logits of rank {} with {} rows for {} sample rows", logits.rank,
                  logits.rank ? logits.dim(0) : 0, rows.size());
  sample_rows(std::span<const float>(logits.f32(), static_cast<size_t>(logits.numel())), logits.dim(1), rows, tokens);
}

}  // namespace deepinfer::cpu
