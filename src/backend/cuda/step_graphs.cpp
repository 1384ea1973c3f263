// Decode steps as CUDA graphs. A step of a listed batch size is run eagerly the first time its
// shape is seen (weights get uploaded and scratch grows to its size), captured the second time, and
// replayed after that. A replay runs the ops' host code with launches suppressed: each op still
// stages its per-step data (token ids, positions, block tables) into the pinned ring at the offsets
// the recording's copy nodes read, and every launch folds its kernel, grid and argument bytes into
// a signature. The graph is launched only if that signature equals the recording's, so a step
// whose launches differ in anything (a pointer, a split count, a kernel choice) runs eagerly or is
// captured again: a replay can never run stale arguments.
#include <algorithm>
#include <bit>

#include "backend/cuda/cuda_backend.h"

namespace deepinfer::cuda {

namespace {

// Shapes whose replays keep mismatching go back to eager launches (the step's host-side choices
// follow data the recording cannot see); a few mismatches in a row are recaptured.
constexpr int64_t kMaxMismatchesInARow = 3;
// Graphs kept; the least recently used one goes first.
constexpr size_t kMaxGraphs = 64;
// Smallest block capacity of a recording (tables shorter than this are padded to it).
constexpr int64_t kMinBlockCapacity = 4;

// Leaves the thread's launch control as it was found, whatever happens in the ops.
struct ControlReset {
  LaunchControl& lc = launch_control();
  int64_t& capacity;
  ~ControlReset() {
    lc.record = false;
    lc.suppress = false;
    capacity = 0;
  }
};

}  // namespace

bool CudaBackend::graphable(const backend::StepShape& shape) const {
  if (options_.enforce_eager || !shape.decode || !shape.replayable || shape.tokens <= 0) return false;
  const auto& sizes = options_.cuda_graph_sizes;
  return std::find(sizes.begin(), sizes.end(), shape.tokens) != sizes.end();
}

void CudaBackend::run_eager(const std::function<void()>& device_ops) {
  ++graph_stats_.eager;
  device_ops();
}

void CudaBackend::begin_recorded_step() {
  // The previous step has finished (its logits were read), so this is a formality; the ring can
  // then start over at the offsets a recording uses.
  DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  pinned_used_ = 0;
  retired_scratch_.clear();
}

void CudaBackend::run_step(const backend::StepShape& shape, const std::function<void()>& device_ops) {
  launch_control().stream = stream_;
  if (!graphable(shape)) {
    run_eager(device_ops);
    return;
  }
  const int64_t capacity = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max(shape.max_blocks, kMinBlockCapacity))));
  const StepKey key{shape.tokens, shape.sequences, shape.logit_rows, capacity};
  auto& slot = graphs_[key];
  if (!slot) {
    slot = std::make_unique<StepGraph>();
    if (graphs_.size() > kMaxGraphs) {
      auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [&](const auto& a, const auto& b) {
        return (a.second.get() == slot.get() ? INT64_MAX : a.second->last_used) <
               (b.second.get() == slot.get() ? INT64_MAX : b.second->last_used);
      });
      DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // it may be running
      graphs_.erase(oldest);
    }
  }
  StepGraph& g = *graphs_[key];
  g.last_used = ++graph_clock_;
  step_block_capacity_ = capacity;
  ControlReset reset{.capacity = step_block_capacity_};

  if (g.exec && replay(g, device_ops)) return;
  if (g.seen++ == 0 || g.failures > 0 || g.mismatches_in_a_row > kMaxMismatchesInARow) {
    run_eager(device_ops);
    return;
  }
  capture(g, device_ops);
}

bool CudaBackend::replay(StepGraph& g, const std::function<void()>& device_ops) {
  begin_recorded_step();
  LaunchControl& lc = launch_control();
  lc.signature = 0;
  lc.record = true;
  lc.suppress = true;
  step_unusable_ = false;
  device_ops();
  lc.record = false;
  lc.suppress = false;
  if (!step_unusable_ && lc.signature == g.signature) {
    DEEPINFER_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++graph_stats_.replays;
    g.mismatches_in_a_row = 0;
    return true;
  }
  ++graph_stats_.mismatches;
  ++g.mismatches_in_a_row;
  return false;
}

void CudaBackend::capture(StepGraph& g, const std::function<void()>& device_ops) {
  begin_recorded_step();
  LaunchControl& lc = launch_control();
  DEEPINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  step_unusable_ = false;
  lc.signature = 0;
  lc.record = true;
  bool threw = false;
  try {
    device_ops();
  } catch (...) {
    // Most likely a call the capture does not allow (a synchronising copy of a weight seen for the
    // first time); run eagerly below, where a real error throws again.
    threw = true;
  }
  lc.record = false;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  if (status == cudaSuccess && !threw && !step_unusable_) {
    if (g.exec) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(g.exec, graph, &info) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaGraphExecDestroy(g.exec);
        g.exec = nullptr;
      }
    }
    if (!g.exec) status = cudaGraphInstantiate(&g.exec, graph, 0);
  }
  if (graph) cudaGraphDestroy(graph);
  if (status != cudaSuccess || threw || step_unusable_) {
    (void)cudaGetLastError();  // capture errors are not sticky
    if (g.exec) cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    ++g.failures;
    ++graph_stats_.capture_failures;
    run_eager(device_ops);
    return;
  }
  g.signature = lc.signature;
  DEEPINFER_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
  ++graph_stats_.captures;
}

}  // namespace deepinfer::cuda
