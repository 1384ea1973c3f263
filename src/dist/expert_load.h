#pragma once
// The load EPLB plans from: tokens routed to each expert of each MoE layer, summed over a sliding
// window of the last `window_steps` steps (older steps drop out as new ones arrive).
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::dist {

class ExpertLoadWindow {
 public:
  ExpertLoadWindow(int64_t layers, int64_t experts, int64_t window_steps);

  // Counts one step's routing of `layer`: expert ids [tokens * top_k] (the routing op's output).
  void record(int64_t layer, std::span<const int32_t> expert_ids);
  // Closes the step: its counts join the window, and the oldest step leaves a full window.
  void end_step();

  // [layers, experts]: tokens per expert over the window's closed steps.
  std::vector<float> load() const;
  int64_t steps_in_window() const { return filled_; }
  int64_t layers() const { return layers_; }
  int64_t experts() const { return experts_; }

 private:
  int64_t layers_, experts_, window_;
  std::vector<int64_t> current_;  // [layers, experts] of the open step
  std::vector<int64_t> ring_;     // [window, layers, experts]
  std::vector<int64_t> sum_;      // [layers, experts] over the ring
  int64_t next_ = 0, filled_ = 0;
};

}  // namespace deepinfer::dist
