#pragma once
// Element-wise and row-wise CPU reference ops. Everything is float32; rows are contiguous.
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::cpu {

// x[i] *= rsqrt(mean(x^2) + eps) * (weight ? weight[i] : 1) for each of `rows` rows of width n.
void rms_norm(float* x, int64_t rows, int64_t n, const float* weight, float eps);
// out = rms_norm(x) without touching x.
void rms_norm_to(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps);

// Interleaved rotary embedding on the trailing 2*half channels of a head of width head_dim:
// pair i = channels (rope_begin + 2i, rope_begin + 2i + 1) rotated by angle with cos[i], sin[i].
// `sign` = -1 applies the inverse rotation.
void rope_interleaved(float* head, int64_t head_dim, const float* cos, const float* sin, int64_t half,
                      float sign = 1.0f);

// Dot product with 8 fixed lanes summed in a fixed tree: the same result for the same inputs
// wherever it is called (the compiler vectorises the lanes; the library builds without FMA
// contraction, so inlining cannot change the rounding).
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

float sigmoid(float x);
float silu(float x);
float softplus(float x);  // torch semantics: x for x > 20

// In place, numerically stable softmax over n values.
void softmax(float* x, int64_t n);

// Indices of the k largest values; ties go to the lower index. Result is ordered by rank.
std::vector<int32_t> top_k_indices(std::span<const float> values, int64_t k);

// The k indices torch.topk selects on the CPU, ties included: torch runs libstdc++'s
// std::nth_element (or std::partial_sort when k * 64 <= n) on (value, index) pairs comparing values
// only, so which of several equal values survives depends on that algorithm, not on the index.
// The V4 reference (transformers) picks experts and indexer entries this way. Order is unspecified.
std::vector<int32_t> torch_top_k_indices(std::span<const float> values, int64_t k);

}  // namespace deepinfer::cpu
