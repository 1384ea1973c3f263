// The token sampler on the device: the CPU reference's steps (backend/cpu/sample_rows.h) with
// sample_math.h's arithmetic, one block per row and one thread per chunk of the vocabulary. The
// cut-offs the CPU finds by sorting (top-k, top-p) are found here by bisection over the logits'
// order-preserving keys: the largest key whose tokens still reach the count (top-k) or the mass
// (top-p), then the lowest ids among the tokens tied at that key.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>
#include <cmath>
#include <limits>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/sample_kernels.h"
#include "backend/sample_math.h"

namespace deepinfer::cuda {

namespace {

namespace sm = backend::sample_math;
constexpr int kThreads = sm::kSampleChunks;
constexpr int kMaxTiles = kMaxSampleVocab / kThreads;
using CountReduce = cub::BlockReduce<long long, kThreads>;
using CountScan = cub::BlockScan<long long, kThreads>;

struct SampleShared {
  double tree[2 * kThreads];  // the chunked sum tree, heap-ordered as the CPU's
  union {
    CountReduce::TempStorage reduce;
    CountScan::TempStorage scan;
  } cub;
  long long broadcast;
  int tile_count[kMaxTiles];  // nth_id
  int64_t tile;
  long long residual;
};

__device__ long long block_sum(long long v, SampleShared& s) {
  __syncthreads();  // the temp storage may still be read by the previous call
  const long long total = CountReduce(s.cub.reduce).Sum(v);
  if (threadIdx.x == 0) s.broadcast = total;
  __syncthreads();
  return s.broadcast;
}

__device__ long long block_min(long long v, SampleShared& s) {
  __syncthreads();
  const long long least = CountReduce(s.cub.reduce).Reduce(v, ::cuda::minimum<>{});
  if (threadIdx.x == 0) s.broadcast = least;
  __syncthreads();
  return s.broadcast;
}

// Leaves = each thread's chunk sum; returns the root. The whole tree stays in s.tree.
__device__ double tree_sum(double leaf, SampleShared& s) {
  __syncthreads();  // earlier readers of the tree are done
  const int t = threadIdx.x;
  s.tree[kThreads + t] = leaf;
  for (int n = kThreads / 2; n >= 1; n >>= 1) {
    __syncthreads();
    if (t < n) s.tree[n + t] = sm::dadd(s.tree[2 * (n + t)], s.tree[2 * (n + t) + 1]);
  }
  __syncthreads();
  return s.tree[1];
}

struct RowView {
  const float* x;
  const uint32_t* mask;
  __device__ float value(int64_t i) const {
    const float v = __ldg(x + i);
    if (mask && !((__ldg(mask + (i >> 5)) >> (i & 31)) & 1u)) return -INFINITY;
    return v;
  }
};

// fn(i, value) over the ids of chunk `first` (this thread's: t, t + kThreads, ...) in increasing order. The loads are
// issued kBatch at a time: one dependent load per iteration would leave the SM waiting on memory
// latency, not bandwidth.
template <typename Fn>
__device__ __forceinline__ void for_each_value(const RowView& row, int64_t vocab, Fn fn,
                                               int64_t first = threadIdx.x) {
  constexpr int kBatch = 8;
  int64_t i = first;
  for (; i + (kBatch - 1) * kThreads < vocab; i += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) v[k] = row.value(i + k * kThreads);
#pragma unroll
    for (int k = 0; k < kBatch; ++k) fn(i + k * kThreads, v[k]);
  }
  for (; i < vocab; i += kThreads) fn(i, row.value(i));
}

__device__ int warp_sum(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// The id of the `nth` (from 1; at most the number there are) token in id order with in(i, v):
// per tile of kThreads consecutive ids a count (a warp per tile), the tile that holds it, then a
// scan over that tile.
template <typename In>
__device__ int64_t nth_id(const RowView& row, int64_t vocab, long long nth, In in, SampleShared& s) {
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t tiles = (vocab + kThreads - 1) / kThreads;
  __syncthreads();
  for (int64_t tile = warp; tile < tiles; tile += kThreads / 32) {
    int c = 0;
#pragma unroll 8
    for (int k = 0; k < kThreads / 32; ++k) {
      const int64_t i = tile * kThreads + k * 32 + lane;
      if (i < vocab && in(i, row.value(i))) ++c;
    }
    c = warp_sum(c);
    if (lane == 0) s.tile_count[tile] = c;
  }
  __syncthreads();
  if (t == 0) {
    long long seen = 0;
    int64_t tile = 0;
    while (tile < tiles - 1 && seen + s.tile_count[tile] < nth) seen += s.tile_count[tile++];
    s.tile = tile;
    s.residual = nth - seen;
  }
  __syncthreads();
  const int64_t i = s.tile * kThreads + t;
  const long long flag = i < vocab && in(i, row.value(i)) ? 1 : 0;
  long long before;
  CountScan(s.cub.scan).ExclusiveSum(flag, before);
  if (flag && before + 1 == s.residual) s.broadcast = i;
  __syncthreads();
  return s.broadcast;
}

// Keys probed per pass of a search: a pass over the row narrows the key range 8-fold.
constexpr int kProbes = 7;

// The largest key in [lo, hi] that `reaches`, where lo does and reaching is monotone (every key
// up to the answer reaches, none after). eval(probe, n, ok) tells, in one pass over the row, which
// of n <= kProbes increasing keys reach (the same answer in every thread).
template <typename Eval>
__device__ uint64_t largest_reaching(uint64_t lo, uint64_t hi, Eval eval) {
  uint64_t probe[kProbes];
  bool ok[kProbes];
  while (lo < hi) {
    const uint64_t step = (hi - lo) / (kProbes + 1);
    int n = 0;
#pragma unroll
    for (int j = 0; j < kProbes; ++j) {
      const uint64_t k = step == 0 ? lo + 1 + j : lo + step * (j + 1);
      if (k <= hi) probe[n++] = k;
    }
    eval(probe, n, ok);
    uint64_t new_lo = lo, new_hi = hi;
    for (int j = 0; j < n; ++j) {
      if (!ok[j]) {
        new_hi = probe[j] - 1;
        break;
      }
      new_lo = probe[j];
    }
    lo = new_lo;
    hi = new_hi;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int64_t vocab, const DevSampleRow* rows,
                                                          const uint32_t* masks, DevSampleResult* out) {
  __shared__ SampleShared s;
  const int t = threadIdx.x;
  const DevSampleRow p = rows[blockIdx.x];
  // Thread t owns chunk t: ids t, t + kThreads, ... (sample_math.h), so every pass reads coalesced.
  const RowView row{logits + static_cast<int64_t>(blockIdx.x) * vocab,
                    p.mask_offset >= 0 ? masks + p.mask_offset : nullptr};
  constexpr long long kNone = std::numeric_limits<long long>::max();

  // Pass 1: the first bad logit, the maximum (first id on ties), the candidate count.
  long long bad = kNone, best_id = kNone, candidates = 0, least_key = kNone;
  float best = -INFINITY;
  for_each_value(row, vocab, [&](int64_t i, float v) {
    if (isnan(v) || v == INFINITY) {
      if (bad == kNone) bad = i;
    } else if (v > -INFINITY) {
      ++candidates;
      least_key = min(least_key, static_cast<long long>(sm::float_key(v)));
      if (v > best) best = v, best_id = i;
    }
  });
  bad = block_min(bad, s);
  if (bad != kNone) {
    if (t == 0) out[blockIdx.x] = {-1, kSampleBadLogit, static_cast<int32_t>(bad), row.x[bad]};
    return;
  }
  candidates = block_sum(candidates, s);
  if (candidates == 0) {
    if (t == 0) out[blockIdx.x] = {-1, kSampleAllMasked, 0, 0.0f};
    return;
  }
  // The maximum: the largest key, then the lowest id with it (-0 and +0 share a key, as they tie).
  const long long best_key = block_min(best_id == kNone ? kNone : -static_cast<long long>(sm::float_key(best)), s);
  const long long top =
      block_min(best_id != kNone && -static_cast<long long>(sm::float_key(best)) == best_key ? best_id : kNone, s);
  const float max_logit = row.value(top);
  // The searches below run over the candidates' key range only.
  const auto min_key = static_cast<uint64_t>(block_min(least_key, s)), max_key = static_cast<uint64_t>(-best_key);
  if (p.inv_temperature == 0.0) {
    if (t == 0) out[blockIdx.x] = {static_cast<int32_t>(top), kSampleOk, 0, 0.0f};
    return;
  }

  // top-k: the largest key k_key with at least top_k candidates at or above it (a search of 8-way
  // passes), then the lowest ids among the ties at k_key.
  const bool top_k_on = p.top_k > 0 && p.top_k < candidates;
  uint32_t k_key = 0;
  int64_t k_id = vocab;
  if (top_k_on) {
    const uint64_t lo = largest_reaching(min_key, max_key, [&](const uint64_t* probe, int n, bool* ok) {
      long long count[kProbes] = {};
      for_each_value(row, vocab, [&](int64_t i, float v) {
        if (!(v > -INFINITY)) return;
        const uint32_t key = sm::float_key(v);
#pragma unroll
        for (int j = 0; j < kProbes; ++j) count[j] += j < n && key >= probe[j] ? 1 : 0;
      });
      for (int j = 0; j < n; ++j) ok[j] = block_sum(count[j], s) >= p.top_k;
    });
    k_key = static_cast<uint32_t>(lo);
    long long above = 0;
    for_each_value(row, vocab, [&](int64_t i, float v) {
      above += v > -INFINITY && sm::float_key(v) > k_key ? 1 : 0;
    });
    above = block_sum(above, s);
    k_id = nth_id(row, vocab, p.top_k - above, [&](int64_t, float v) { return v > -INFINITY && sm::float_key(v) == k_key; }, s);
  }
  auto in_top_k = [&](int64_t i, float v) {
    if (!(v > -INFINITY)) return false;
    if (!top_k_on) return true;
    const uint32_t key = sm::float_key(v);
    return key > k_key || (key == k_key && i <= k_id);
  };
  // A candidate after top-k and min-p; w receives its weight.
  auto candidate = [&](int64_t i, float v, double& w) {
    if (!in_top_k(i, v)) return false;
    // sample_weight's argument; below log(min_p) (with a margin far wider than the exp's error)
    // the weight is certainly under min_p, so the exp is skipped.
    const double z = sm::dmul(sm::dadd(static_cast<double>(v), -static_cast<double>(max_logit)), p.inv_temperature);
    if (z < p.min_p_log_bound) return false;
    w = sm::sample_exp(z);
    return !(p.min_p > 0.0 && w < p.min_p);
  };
  // The chunked mass of the candidates with key > above_key, or == above_key and id <= tie_id.
  auto mass = [&](uint64_t above_key, int64_t tie_id, bool ties_only_to_id) {
    double sum = 0.0;
    for_each_value(row, vocab, [&](int64_t i, float v) {
      const uint32_t key = sm::float_key(v);
      if (key < above_key || (ties_only_to_id && key == above_key && i > tie_id)) return;
      double w;
      if (candidate(i, v, w)) sum = sm::dadd(sum, w);
    });
    return tree_sum(sum, s);
  };

  bool top_p_on = p.top_p < 1.0;
  uint32_t p_key = 0;
  int64_t p_id = vocab;
  if (top_p_on) {
    const double target = sm::dmul(p.top_p, mass(0, 0, false));
    // The largest key whose tokens at or above it reach the target.
    const uint64_t lo = largest_reaching(min_key, max_key, [&](const uint64_t* probe, int n, bool* ok) {
      double acc[kProbes] = {};
      for_each_value(row, vocab, [&](int64_t i, float v) {
        const uint32_t key = sm::float_key(v);
        double w;
        if (key < probe[0] || !candidate(i, v, w)) return;
#pragma unroll
        for (int j = 0; j < kProbes; ++j)
          if (j < n && key >= probe[j]) acc[j] = sm::dadd(acc[j], w);
      });
      for (int j = 0; j < n; ++j) ok[j] = tree_sum(acc[j], s) >= target;
    });
    p_key = static_cast<uint32_t>(lo);
    auto tied = [&](int64_t i, float v) {
      double w;
      return sm::float_key(v) == p_key && candidate(i, v, w);
    };
    long long ties = 0;
    for_each_value(row, vocab, [&](int64_t i, float v) { ties += tied(i, v) ? 1 : 0; });
    ties = block_sum(ties, s);
    long long lo_j = 1, hi_j = ties;  // the fewest ties (lowest ids first) that reach the target
    while (lo_j < hi_j) {
      const long long mid = lo_j + (hi_j - lo_j) / 2;
      if (mass(p_key, nth_id(row, vocab, mid, tied, s), true) >= target) hi_j = mid;
      else lo_j = mid + 1;
    }
    p_id = nth_id(row, vocab, lo_j, tied, s);
  }
  // The draw's tree over the final candidates.
  const double total = mass(top_p_on ? p_key : 0, p_id, top_p_on);
  if (t == 0) {
    double target = sm::dmul(p.uniform, total);
    int n = 1;
    while (n < kThreads) {
      const double left = s.tree[2 * n];
      if (target < left || s.tree[2 * n + 1] == 0.0) {
        n = 2 * n;
      } else {
        target = sm::dadd(target, -left);
        n = 2 * n + 1;
      }
    }
    double acc = 0.0;
    int64_t token = -1;
    bool found = false;
    for_each_value(
        row, vocab,
        [&](int64_t i, float v) {
          const uint32_t key = sm::float_key(v);
          if (found || (top_p_on && (key < p_key || (key == p_key && i > p_id)))) return;
          double w;
          if (!candidate(i, v, w) || w == 0.0) return;
          acc = sm::dadd(acc, w);
          token = i;
          found = target < acc;
        },
        n - kThreads);
    out[blockIdx.x] = {static_cast<int32_t>(token), token >= 0 ? kSampleOk : kSampleAllMasked, 0, 0.0f};
  }
}

}  // namespace

void launch_sample(const float* logits, int64_t vocab, const DevSampleRow* rows, const uint32_t* masks, int64_t count,
                   DevSampleResult* out) {
  if (count == 0) return;
  launch(sample_kernel, static_cast<unsigned>(count), kThreads, 0, logits, vocab, rows, masks, out);
}

}  // namespace deepinfer::cuda
