// The token sampler on the device: the CPU reference's steps (backend/cpu/sample_rows.h) with
// sample_math.h's arithmetic, one block per row and one thread per chunk of the vocabulary. The
// cut-offs the CPU finds by sorting (top-k, top-p) are found here by searching the logits'
// order-preserving keys, 7 probes per pass: the largest key whose tokens still reach the count
// (top-k) or the mass (top-p), then the lowest ids among the tokens tied at that key. Once a search
// has narrowed the tokens that can still matter to kSurvivorCapacity, they are copied into shared
// memory (each thread its own chunk's, in id order, so every chunked sum stays the same) and the
// remaining passes read only them: one block per row is bound by its SM's instruction issue, so
// the passes over all 129K ids are what costs.
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
constexpr int kProbes = 7;  // keys probed per pass of a search: a pass narrows a key range 8-fold
constexpr int kSurvivorCapacity = 16384;
constexpr size_t kDynamicShared =
    kSurvivorCapacity * (sizeof(int32_t) + sizeof(float)) + (kThreads + 1) * sizeof(int);
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

__device__ int warp_sum(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Where a pass reads the row: global memory (every id), or, once compacted, the survivors in
// shared memory: chunk c's at [begin[c], begin[c + 1]), in id order.
struct Source {
  const float* x;
  const uint32_t* mask;
  int64_t vocab;
  int32_t* ids;
  float* values;
  int* begin;
  bool compacted;
  __device__ float value(int64_t i) const {
    const float v = __ldg(x + i);
    if (mask && !((__ldg(mask + (i >> 5)) >> (i & 31)) & 1u)) return -INFINITY;
    return v;
  }
};

// fn(i, value) over the ids of chunk `first` (t, t + kThreads, ...) in global memory, in increasing
// order. The loads are issued kBatch at a time (one dependent load per iteration would wait on
// memory latency).
template <typename Fn>
__device__ __forceinline__ void for_each_global(const Source& src, Fn fn, int64_t first) {
  constexpr int kBatch = 8;
  int64_t i = first;
  for (; i + (kBatch - 1) * kThreads < src.vocab; i += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) v[k] = src.value(i + k * kThreads);
#pragma unroll
    for (int k = 0; k < kBatch; ++k) fn(i + k * kThreads, v[k]);
  }
  for (; i < src.vocab; i += kThreads) fn(i, src.value(i));
}

// fn(i, value) over chunk `chunk` (this thread's by default) in id order, wherever it is read from.
template <typename Fn>
__device__ __forceinline__ void for_each(const Source& src, Fn fn, int chunk = threadIdx.x) {
  if (src.compacted) {
    for (int k = src.begin[chunk]; k < src.begin[chunk + 1]; ++k) fn(static_cast<int64_t>(src.ids[k]), src.values[k]);
  } else {
    for_each_global(src, fn, chunk);
  }
}

// From here on the passes read only the ids with keep(i, v) (at most kSurvivorCapacity of them,
// which the caller has counted). Every thread calls it.
template <typename Keep>
__device__ void compact(Source& src, Keep keep, SampleShared& s) {
  long long mine = 0;
  for_each(src, [&](int64_t i, float v) { mine += keep(i, v) ? 1 : 0; });
  __syncthreads();
  long long before;
  CountScan(s.cub.scan).ExclusiveSum(mine, before);
  const int t = threadIdx.x;
  src.begin[t] = static_cast<int>(before);
  if (t == kThreads - 1) src.begin[kThreads] = static_cast<int>(before + mine);
  int k = static_cast<int>(before);
  for_each(src, [&](int64_t i, float v) {
    if (!keep(i, v)) return;
    src.ids[k] = static_cast<int32_t>(i);
    src.values[k++] = v;
  });
  __syncthreads();
  src.compacted = true;
}

// The id of the `nth` (from 1; at most the number there are) token in id order with in(i, v).
template <typename In>
__device__ int64_t nth_id(const Source& src, long long nth, In in, SampleShared& s) {
  if (src.compacted) {  // few survivors: the smallest m with nth of them at or below it
    int64_t lo = 0, hi = src.vocab - 1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      long long c = 0;
      for_each(src, [&](int64_t i, float v) { c += i <= mid && in(i, v) ? 1 : 0; });
      if (block_sum(c, s) >= nth) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  // Per tile of kThreads consecutive ids a count (a warp per tile), the tile that holds it, then a
  // scan over that tile.
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t tiles = (src.vocab + kThreads - 1) / kThreads;
  __syncthreads();
  for (int64_t tile = warp; tile < tiles; tile += kThreads / 32) {
    int c = 0;
#pragma unroll 8
    for (int k = 0; k < kThreads / 32; ++k) {
      const int64_t i = tile * kThreads + k * 32 + lane;
      if (i < src.vocab && in(i, src.value(i))) ++c;
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
  const long long flag = i < src.vocab && in(i, src.value(i)) ? 1 : 0;
  long long before;
  CountScan(s.cub.scan).ExclusiveSum(flag, before);
  if (flag && before + 1 == s.residual) s.broadcast = i;
  __syncthreads();
  return s.broadcast;
}

// The largest key in [lo, hi] that reaches, where lo does and reaching is monotone (every key up
// to the answer reaches, none after). eval(probe, n, ok, count) tells, in one pass, which of
// n <= kProbes increasing keys reach and how many tokens lie at or above each (the same in every
// thread); narrowed(lo, count) hears of each new lower bound.
template <typename Eval, typename Narrowed>
__device__ uint64_t largest_reaching(uint64_t lo, uint64_t hi, Eval eval, Narrowed narrowed) {
  uint64_t probe[kProbes];
  bool ok[kProbes];
  long long count[kProbes];
  while (lo < hi) {
    const uint64_t step = (hi - lo) / (kProbes + 1);
    int n = 0;
#pragma unroll
    for (int j = 0; j < kProbes; ++j) {
      const uint64_t k = step == 0 ? lo + 1 + j : lo + step * (j + 1);
      if (k <= hi) probe[n++] = k;
    }
    eval(probe, n, ok, count);
    int last_ok = -1;
    for (int j = 0; j < n && ok[j]; ++j) last_ok = j;
    if (last_ok + 1 < n) hi = probe[last_ok + 1] - 1;
    if (last_ok >= 0) {
      lo = probe[last_ok];
      narrowed(lo, count[last_ok]);
    }
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int64_t vocab, const DevSampleRow* rows,
                                                          const uint32_t* masks, DevSampleResult* out) {
  wait_for_previous_kernel();
  __shared__ SampleShared s;
  extern __shared__ unsigned char survivors[];
  const int t = threadIdx.x;
  const DevSampleRow p = rows[blockIdx.x];
  // Thread t owns chunk t: ids t, t + kThreads, ... (sample_math.h), so every pass reads coalesced.
  Source src{logits + static_cast<int64_t>(blockIdx.x) * vocab,
             p.mask_offset >= 0 ? masks + p.mask_offset : nullptr,
             vocab,
             reinterpret_cast<int32_t*>(survivors),
             reinterpret_cast<float*>(survivors + kSurvivorCapacity * sizeof(int32_t)),
             reinterpret_cast<int*>(survivors + kSurvivorCapacity * (sizeof(int32_t) + sizeof(float))),
             false};
  constexpr long long kNone = std::numeric_limits<long long>::max();

  // Pass 1: the first bad logit, the maximum (first id on ties), the candidates and their least key.
  long long bad = kNone, best_id = kNone, candidates = 0, least_key = kNone;
  float best = -INFINITY;
  for_each(src, [&](int64_t i, float v) {
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
    if (t == 0) out[blockIdx.x] = {-1, kSampleBadLogit, static_cast<int32_t>(bad), src.x[bad]};
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
  const float max_logit = src.value(top);
  if (p.inv_temperature == 0.0) {
    if (t == 0) out[blockIdx.x] = {static_cast<int32_t>(top), kSampleOk, 0, 0.0f};
    return;
  }
  // The searches run over the candidates' key range only.
  const auto min_key = static_cast<uint64_t>(block_min(least_key, s)), max_key = static_cast<uint64_t>(-best_key);

  // top-k: the largest key k_key with at least top_k candidates at or above it, then the lowest ids
  // among the ties at k_key.
  const bool top_k_on = p.top_k > 0 && p.top_k < candidates;
  uint32_t k_key = 0;
  int64_t k_id = vocab;
  if (top_k_on) {
    const uint64_t lo = largest_reaching(
        min_key, max_key,
        [&](const uint64_t* probe, int n, bool* ok, long long* count) {
          long long c[kProbes] = {};
          for_each(src, [&](int64_t, float v) {
            if (!(v > -INFINITY)) return;
            const uint32_t key = sm::float_key(v);
#pragma unroll
            for (int j = 0; j < kProbes; ++j) c[j] += j < n && key >= probe[j] ? 1 : 0;
          });
          for (int j = 0; j < n; ++j) {
            count[j] = block_sum(c[j], s);
            ok[j] = count[j] >= p.top_k;
          }
        },
        [&](uint64_t at, long long count) {
          if (src.compacted || count > kSurvivorCapacity) return;
          compact(src, [&](int64_t, float v) { return v > -INFINITY && sm::float_key(v) >= at; }, s);
        });
    k_key = static_cast<uint32_t>(lo);
    long long above = 0;
    for_each(src, [&](int64_t, float v) { above += v > -INFINITY && sm::float_key(v) > k_key ? 1 : 0; });
    above = block_sum(above, s);
    k_id = nth_id(src, p.top_k - above, [&](int64_t, float v) { return v > -INFINITY && sm::float_key(v) == k_key; }, s);
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
    for_each(src, [&](int64_t i, float v) {
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
    // The largest key whose candidates at or above it reach the target (every candidate is at or
    // above k_key).
    const uint64_t lo = largest_reaching(
        top_k_on ? static_cast<uint64_t>(k_key) : min_key, max_key,
        [&](const uint64_t* probe, int n, bool* ok, long long* count) {
          double acc[kProbes] = {};
          long long c[kProbes] = {};
          for_each(src, [&](int64_t i, float v) {
            const uint32_t key = sm::float_key(v);
            double w;
            if (key < probe[0] || !candidate(i, v, w)) return;
#pragma unroll
            for (int j = 0; j < kProbes; ++j)
              if (j < n && key >= probe[j]) acc[j] = sm::dadd(acc[j], w), ++c[j];
          });
          int last_ok = -1;
          for (int j = 0; j < n; ++j) {
            ok[j] = tree_sum(acc[j], s) >= target;
            if (ok[j]) last_ok = j;
            count[j] = kNone;
          }
          // Only the new lower bound's count is used (is it small enough to compact?).
          if (last_ok >= 0) {
            long long mine = 0;
#pragma unroll
            for (int j = 0; j < kProbes; ++j) mine += j == last_ok ? c[j] : 0;
            count[last_ok] = block_sum(mine, s);
          }
        },
        [&](uint64_t at, long long count) {
          if (src.compacted || count > kSurvivorCapacity) return;
          compact(src, [&](int64_t i, float v) {
            double w;
            return sm::float_key(v) >= at && candidate(i, v, w);
          }, s);
        });
    p_key = static_cast<uint32_t>(lo);
    auto tied = [&](int64_t i, float v) {
      double w;
      return sm::float_key(v) == p_key && candidate(i, v, w);
    };
    long long ties = 0;
    for_each(src, [&](int64_t i, float v) { ties += tied(i, v) ? 1 : 0; });
    ties = block_sum(ties, s);
    long long lo_j = 1, hi_j = ties;  // the fewest ties (lowest ids first) that reach the target
    while (lo_j < hi_j) {
      const long long mid = lo_j + (hi_j - lo_j) / 2;
      if (mass(p_key, nth_id(src, mid, tied, s), true) >= target) hi_j = mid;
      else lo_j = mid + 1;
    }
    p_id = nth_id(src, lo_j, tied, s);
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
    for_each(
        src,
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

cudaError_t prepare_sample_kernel() {
  // The survivors need more than the default 48 KB of shared memory.
  return cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kDynamicShared));
}

void launch_sample(const float* logits, int64_t vocab, const DevSampleRow* rows, const uint32_t* masks, int64_t count,
                   DevSampleResult* out) {
  if (count == 0) return;
  launch(sample_kernel, static_cast<unsigned>(count), kThreads, kDynamicShared, logits, vocab, rows, masks, out);
}

}  // namespace deepinfer::cuda
