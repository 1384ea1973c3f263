#include "dist/expert_load.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::dist {

ExpertLoadWindow::ExpertLoadWindow(int64_t layers, int64_t experts, int64_t window_steps)
    : layers_(layers), experts_(experts), window_(window_steps) {
  DEEPINFER_CHECK(layers > 0 && experts > 0 && window_steps > 0,
                  "expert load window: layers, experts and steps must be positive (got {}, {}, {})", layers, experts,
                  window_steps);
  current_.assign(static_cast<size_t>(layers * experts), 0);
  sum_.assign(current_.size(), 0);
  ring_.assign(static_cast<size_t>(window_steps) * current_.size(), 0);
}

void ExpertLoadWindow::record(int64_t layer, std::span<const int32_t> expert_ids) {
  DEEPINFER_CHECK(layer >= 0 && layer < layers_, "expert load window: layer {} of {}", layer, layers_);
  for (const int32_t e : expert_ids) {
    DEEPINFER_CHECK(e >= 0 && e < experts_, "expert load window: expert {} of {} in layer {}", e, experts_, layer);
    ++current_[static_cast<size_t>(layer * experts_ + e)];
  }
}

void ExpertLoadWindow::end_step() {
  int64_t* slot = ring_.data() + static_cast<size_t>(next_) * current_.size();
  for (size_t i = 0; i < current_.size(); ++i) {
    sum_[i] += current_[i] - slot[i];  // the oldest step (zeros until the window fills) leaves
    slot[i] = current_[i];
  }
  std::fill(current_.begin(), current_.end(), 0);
  next_ = (next_ + 1) % window_;
  filled_ = std::min(filled_ + 1, window_);
}

std::vector<float> ExpertLoadWindow::load() const { return {sum_.begin(), sum_.end()}; }

}  // namespace deepinfer::dist
