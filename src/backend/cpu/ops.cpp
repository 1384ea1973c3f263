#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace deepinfer::cpu {

void rms_norm_to(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    // Sum of squares in double (steadier than float for wide rows), in 8 fixed lanes and a fixed
    // tree so it vectorises and rounds the same everywhere.
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i0 = 0;
    for (; i0 + 8 <= n; i0 += 8)
      for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(xr[i0 + l]) * xr[i0 + l];
    for (int l = 0; i0 + l < n; ++l) lanes[l] += static_cast<double>(xr[i0 + l]) * xr[i0 + l];
    const double ss = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
    if (weight) {
      for (int64_t i = 0; i < n; ++i) o[i] = weight[i] * (xr[i] * inv);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * inv;
    }
  }
}

void rms_norm(float* x, int64_t rows, int64_t n, const float* weight, float eps) {
  rms_norm_to(x, x, rows, n, weight, eps);
}

void rope_interleaved(float* head, int64_t head_dim, const float* cos, const float* sin, int64_t half,
                      float sign) {
  float* r = head + head_dim - 2 * half;
  for (int64_t i = 0; i < half; ++i) {
    const float a = r[2 * i], b = r[2 * i + 1];
    const float c = cos[i], s = sign * sin[i];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x * sigmoid(x); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void softmax(float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  if (m == -std::numeric_limits<float>::infinity()) {  // nothing visible: all weights zero
    std::fill(x, x + n, 0.0f);
    return;
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

std::vector<int32_t> top_k_indices(std::span<const float> values, int64_t k) {
  std::vector<int32_t> idx(values.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(values.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  idx.resize(k);
  return idx;
}

std::vector<int32_t> torch_top_k_indices(std::span<const float> values, int64_t k) {
  using Entry = std::pair<float, int64_t>;
  const auto n = static_cast<int64_t>(values.size());
  k = std::min(k, n);
  if (k <= 0) return {};
  std::vector<Entry> queue(values.size());
  for (int64_t j = 0; j < n; ++j) queue[j] = {values[j], j};
  auto greater = [](const Entry& x, const Entry& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), greater);
  } else {
    std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), greater);
  }
  std::vector<int32_t> out(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) out[j] = static_cast<int32_t>(queue[j].second);
  return out;
}

}  // namespace deepinfer::cpu
