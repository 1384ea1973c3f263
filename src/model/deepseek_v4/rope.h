#pragma once
// Rotary frequencies of DeepSeek-V4: plain RoPE ("main", sliding layers) and the compress rope
// (CSA/HCA layers, their compressors and indexers), optionally YaRN-scaled. Computed in float32
// exactly as transformers' rope initialisers do, so angles match the reference bit for bit.
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"

namespace deepinfer::model::deepseek_v4 {

class Rope {
 public:
  Rope() = default;
  Rope(const io::RopeParams& params, int64_t rope_dim);

  int64_t half() const { return static_cast<int64_t>(inv_freq_.size()); }
  // cos/sin of every pair at `position`, scaled by the attention factor (1 for V4).
  void angles(int64_t position, float* cos, float* sin) const;
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  backend::RopeFreqs freqs() const { return {inv_freq_, attention_factor_}; }

 private:
  std::vector<float> inv_freq_;
  float attention_factor_ = 1.0f;
};

}  // namespace deepinfer::model::deepseek_v4
