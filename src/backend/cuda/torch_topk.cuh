#pragma once
// cpu::torch_top_k_indices replayed on the device by one thread: which of equal scores torch.topk
// (on the CPU) chooses depends on the exact sequence of swaps its selection makes, so the device
// walks the same algorithm over the same array. That is std::partial_sort when k * 64 <= n and
// std::nth_element otherwise, as libstdc++ implements them (a heap select; an introselect with a
// median-of-three pivot, an unguarded partition, a heap select past a depth of 2 log2 n and an
// insertion sort below 4 elements). Only the set of the first k entries is used afterwards, so the
// final heap sort of partial_sort is not replayed.
//
// It is slow (one thread, global memory) and meant for the rare rows whose choice is not decided
// by the scores alone: a tie at the k-th largest score, or a non-finite score. The op tests compare
// it with the host's std:: algorithms on rows full of ties.
#include <cstdint>

namespace deepinfer::cuda {

class TorchTopK {
 public:
  // v[0, n) scores, id[0, n) their entry numbers; both permuted in place.
  __device__ TorchTopK(float* v, int32_t* id) : v_(v), id_(id) {}

  // Afterwards id[0, k) are the entries torch.topk(v, k) returns (in some order). 0 < k <= n.
  __device__ void select(int64_t n, int64_t k) {
    if (k * 64 <= n) heap_select(0, k, n);                   // partial_sort
    else introselect(0, k - 1, n, 2 * floor_log2(n));  // nth_element(first, first + k - 1, last)
  }

 private:
  // torch_top_k_indices' comparator: NaN above everything, then larger first.
  __device__ static bool before(float a, float b) { return (isnan(a) && !isnan(b)) || a > b; }
  __device__ bool before_at(int64_t i, int64_t j) const { return before(v_[i], v_[j]); }
  __device__ void swap_at(int64_t i, int64_t j) {
    const float tv = v_[i];
    v_[i] = v_[j];
    v_[j] = tv;
    const int32_t ti = id_[i];
    id_[i] = id_[j];
    id_[j] = ti;
  }
  __device__ void move_to(int64_t dst, int64_t src) {
    v_[dst] = v_[src];
    id_[dst] = id_[src];
  }
  __device__ static int64_t floor_log2(int64_t n) { return 63 - __clzll(static_cast<long long>(n)); }

  // --- the heap over [base, base + len) (comparator order: the root is the one ranked last)
  __device__ void adjust_heap(int64_t base, int64_t hole, int64_t len, float value, int32_t value_id) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (len - 1) / 2) {
      child = 2 * (child + 1);
      if (before_at(base + child, base + child - 1)) --child;
      move_to(base + hole, base + child);
      hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
      child = 2 * (child + 1);
      move_to(base + hole, base + child - 1);
      hole = child - 1;
    }
    int64_t parent = (hole - 1) / 2;  // then sift the value up from the hole
    while (hole > top && before(v_[base + parent], value)) {
      move_to(base + hole, base + parent);
      hole = parent;
      parent = (hole - 1) / 2;
    }
    v_[base + hole] = value;
    id_[base + hole] = value_id;
  }
  __device__ void make_heap(int64_t base, int64_t len) {
    if (len < 2) return;
    for (int64_t parent = (len - 2) / 2;; --parent) {
      adjust_heap(base, parent, len, v_[base + parent], id_[base + parent]);
      if (parent == 0) return;
    }
  }
  // The root moves to `result`, whose element enters the heap.
  __device__ void pop_heap_into(int64_t base, int64_t len, int64_t result) {
    const float value = v_[result];
    const int32_t value_id = id_[result];
    move_to(result, base);
    adjust_heap(base, 0, len, value, value_id);
  }
  // [first, middle) ends holding the middle - first entries ranked first of [first, last).
  __device__ void heap_select(int64_t first, int64_t middle, int64_t last) {
    const int64_t len = middle - first;
    make_heap(first, len);
    for (int64_t i = middle; i < last; ++i)
      if (before_at(i, first)) pop_heap_into(first, len, i);
  }

  // --- introselect
  __device__ void move_median_to_first(int64_t result, int64_t a, int64_t b, int64_t c) {
    if (before_at(a, b)) {
      if (before_at(b, c)) swap_at(result, b);
      else if (before_at(a, c)) swap_at(result, c);
      else swap_at(result, a);
    } else if (before_at(a, c)) {
      swap_at(result, a);
    } else if (before_at(b, c)) {
      swap_at(result, c);
    } else {
      swap_at(result, b);
    }
  }
  __device__ int64_t unguarded_partition(int64_t first, int64_t last, int64_t pivot) {
    while (true) {
      while (before_at(first, pivot)) ++first;
      --last;
      while (before_at(pivot, last)) --last;
      if (!(first < last)) return first;
      swap_at(first, last);
      ++first;
    }
  }
  __device__ void insertion_sort(int64_t first, int64_t last) {
    if (first == last) return;
    for (int64_t i = first + 1; i != last; ++i) {
      const float value = v_[i];
      const int32_t value_id = id_[i];
      int64_t hole = i;
      if (before(value, v_[first])) {  // to the front: everything before moves up one
        for (; hole > first; --hole) move_to(hole, hole - 1);
      } else {  // unguarded linear insert
        for (; before(value, v_[hole - 1]); --hole) move_to(hole, hole - 1);
      }
      v_[hole] = value;
      id_[hole] = value_id;
    }
  }
  __device__ void introselect(int64_t first, int64_t nth, int64_t last, int64_t depth_limit) {
    while (last - first > 3) {
      if (depth_limit == 0) {
        heap_select(first, nth + 1, last);
        swap_at(first, nth);
        return;
      }
      --depth_limit;
      const int64_t mid = first + (last - first) / 2;
      move_median_to_first(first, first + 1, mid, last - 1);
      const int64_t cut = unguarded_partition(first + 1, last, first);
      if (cut <= nth) first = cut;
      else last = cut;
    }
    insertion_sort(first, last);
  }

  float* v_;
  int32_t* id_;
};

}  // namespace deepinfer::cuda
