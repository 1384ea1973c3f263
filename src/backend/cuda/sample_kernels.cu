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
using CountReduce = cub::BlockReduce<long long, kThreads>;
using CountScan = cub::BlockScan<long long, kThreads>;

struct SampleShared {
  double tree[2 * kThreads];  // the chunked sum tree, heap-ordered as the CPU's
  union {
    CountReduce::TempStorage reduce;
    CountScan::TempStorage scan;
  } cub;
  long long broadcast;
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
  int64_t begin, end;  // this thread's chunk
  __device__ float value(int64_t i) const {
    const float v = x[i];
    if (mask && !((mask[i >> 5] >> (i & 31)) & 1u)) return -INFINITY;
    return v;
  }
};

// The id of the `nth` (from 1) token in id order with in(i, v) among all chunks.
template <typename In>
__device__ int64_t nth_id(const RowView& row, long long nth, In in, SampleShared& s) {
  long long mine = 0;
  for (int64_t i = row.begin; i < row.end; ++i) mine += in(i, row.value(i)) ? 1 : 0;
  __syncthreads();
  long long before;
  CountScan(s.cub.scan).ExclusiveSum(mine, before);
  __syncthreads();
  if (before < nth && nth <= before + mine) {
    long long seen = before;
    for (int64_t i = row.begin; i < row.end; ++i)
      if (in(i, row.value(i)) && ++seen == nth) s.broadcast = i;
  }
  __syncthreads();
  return s.broadcast;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int64_t vocab, const DevSampleRow* rows,
                                                          const uint32_t* masks, DevSampleResult* out) {
  __shared__ SampleShared s;
  const int t = threadIdx.x;
  const DevSampleRow p = rows[blockIdx.x];
  const int64_t len = sm::chunk_length(vocab);
  RowView row{logits + static_cast<int64_t>(blockIdx.x) * vocab, p.mask_offset >= 0 ? masks + p.mask_offset : nullptr,
              min(static_cast<int64_t>(t) * len, vocab), 0};
  row.end = min(row.begin + len, vocab);
  constexpr long long kNone = std::numeric_limits<long long>::max();

  // Pass 1: the first bad logit, the maximum (first id on ties), the candidate count.
  long long bad = kNone, best_id = kNone, candidates = 0;
  float best = -INFINITY;
  for (int64_t i = row.begin; i < row.end; ++i) {
    const float v = row.value(i);
    if (isnan(v) || v == INFINITY) {
      if (bad == kNone) bad = i;
    } else if (v > -INFINITY) {
      ++candidates;
      if (v > best) best = v, best_id = i;
    }
  }
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
  if (p.inv_temperature == 0.0) {
    if (t == 0) out[blockIdx.x] = {static_cast<int32_t>(top), kSampleOk, 0, 0.0f};
    return;
  }

  // top-k: the largest key k_key with at least top_k candidates at or above it, then the lowest ids
  // among the ties at k_key.
  const bool top_k_on = p.top_k > 0 && p.top_k < candidates;
  uint32_t k_key = 0;
  int64_t k_id = vocab;
  if (top_k_on) {
    uint64_t lo = 0, hi = 0xFFFFFFFFull;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      long long n = 0;
      for (int64_t i = row.begin; i < row.end; ++i) {
        const float v = row.value(i);
        n += v > -INFINITY && sm::float_key(v) >= mid ? 1 : 0;
      }
      if (block_sum(n, s) >= p.top_k) lo = mid;
      else hi = mid - 1;
    }
    k_key = static_cast<uint32_t>(lo);
    long long above = 0;
    for (int64_t i = row.begin; i < row.end; ++i) {
      const float v = row.value(i);
      above += v > -INFINITY && sm::float_key(v) > k_key ? 1 : 0;
    }
    above = block_sum(above, s);
    k_id = nth_id(row, p.top_k - above, [&](int64_t, float v) { return v > -INFINITY && sm::float_key(v) == k_key; }, s);
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
    w = sm::sample_weight(v, max_logit, p.inv_temperature);
    return !(p.min_p > 0.0 && w < p.min_p);
  };
  // The chunked mass of the candidates with key > above_key, or == above_key and id <= tie_id.
  auto mass = [&](uint64_t above_key, int64_t tie_id, bool ties_only_to_id) {
    double sum = 0.0;
    for (int64_t i = row.begin; i < row.end; ++i) {
      const float v = row.value(i);
      const uint32_t key = sm::float_key(v);
      if (key < above_key || (ties_only_to_id && key == above_key && i > tie_id)) continue;
      double w;
      if (candidate(i, v, w)) sum = sm::dadd(sum, w);
    }
    return tree_sum(sum, s);
  };

  bool top_p_on = p.top_p < 1.0;
  uint32_t p_key = 0;
  int64_t p_id = vocab;
  if (top_p_on) {
    const double target = sm::dmul(p.top_p, mass(0, 0, false));
    uint64_t lo = 0, hi = 0xFFFFFFFFull;  // the largest key whose tokens at or above reach the target
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (mass(mid, 0, false) >= target) lo = mid;
      else hi = mid - 1;
    }
    p_key = static_cast<uint32_t>(lo);
    auto tied = [&](int64_t i, float v) {
      double w;
      return sm::float_key(v) == p_key && candidate(i, v, w);
    };
    long long ties = 0;
    for (int64_t i = row.begin; i < row.end; ++i) ties += tied(i, row.value(i)) ? 1 : 0;
    ties = block_sum(ties, s);
    long long lo_j = 1, hi_j = ties;  // the fewest ties (lowest ids first) that reach the target
    while (lo_j < hi_j) {
      const long long mid = lo_j + (hi_j - lo_j) / 2;
      if (mass(p_key, nth_id(row, mid, tied, s), true) >= target) hi_j = mid;
      else lo_j = mid + 1;
    }
    p_id = nth_id(row, lo_j, tied, s);
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
    const int64_t begin = min(static_cast<int64_t>(n - kThreads) * len, vocab), end = min(begin + len, vocab);
    double acc = 0.0;
    int64_t token = -1;
    for (int64_t i = begin; i < end; ++i) {
      const float v = row.value(i);
      const uint32_t key = sm::float_key(v);
      if (top_p_on && (key < p_key || (key == p_key && i > p_id))) continue;
      double w;
      if (!candidate(i, v, w) || w == 0.0) continue;
      acc = sm::dadd(acc, w);
      token = i;
      if (target < acc) break;
    }
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
