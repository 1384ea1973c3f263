#include "model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace deepinfer::model::deepseek_v4 {

namespace {

// YaRN (transformers `_compute_yarn_parameters`): interpolate low frequencies by `factor`, keep high
// frequencies, with a linear ramp between the correction dims of beta_fast and beta_slow rotations.
std::vector<float> yarn_inv_freq(const io::RopeParams& p, int64_t dim) {
  const double base = p.theta;
  const auto original = static_cast<double>(p.original_max_position_embeddings);
  DEEPINFER_CHECK(original > 0, "YaRN rope needs original_max_position_embeddings > 0");
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // the reference's guard against a zero-width ramp
  const int64_t half = dim / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const auto lowf = static_cast<float>(low), highf = static_cast<float>(high);
  for (int64_t i = 0; i < half; ++i) {
    const float pos_freq = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (static_cast<float>(p.factor) * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - lowf) / (highf - lowf), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    out[static_cast<size_t>(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return out;
}

}  // namespace

Rope::Rope(const io::RopeParams& p, int64_t dim) {
  DEEPINFER_CHECK(dim > 0 && dim % 2 == 0, "rope dimension must be positive and even, got {}", dim);
  if (p.type == "yarn") {
    inv_freq_ = yarn_inv_freq(p, dim);
    attention_factor_ = static_cast<float>(p.attention_factor.value_or(1.0));
  } else if (p.type == "default") {
    for (int64_t i = 0; i < dim / 2; ++i) {
      inv_freq_.push_back(1.0f / std::pow(static_cast<float>(p.theta), static_cast<float>(2 * i) / static_cast<float>(dim)));
    }
  } else {
    fail("unsupported rope_type '{}' (supported: default, yarn)", p.type);
  }
}

void Rope::angles(int64_t position, float* cos, float* sin) const {
  const auto pos = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float f = inv_freq_[i] * pos;
    cos[i] = std::cos(f) * attention_factor_;
    sin[i] = std::sin(f) * attention_factor_;
  }
}

}  // namespace deepinfer::model::deepseek_v4
