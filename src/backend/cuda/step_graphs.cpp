// Decode steps as CUDA graphs. A step of a listed batch size is run eagerly the first time its
// shape is seen (weights get uploaded and scratch grows to its size), captured the second time, and
// replayed after that. A replay runs the ops' host code with launches suppressed: each op still
// stages its per-step data (token ids, positions, block tables) into the pinned ring at the offsets
// the recording's copy nodes read, and every launch folds its kernel, grid and argument bytes into
// a signature. A graph is launched only if that signature equals the recording's, so a step whose
// launches differ in anything (a pointer, a split count, a kernel choice) runs eagerly or is
// captured again: a replay can never run stale arguments.
//
// The step is recorded as a chain of segments of kOpsPerSegment ops: a replay launches a segment
// as soon as the host has checked its ops, so the GPU works while the host checks the next ones.
// When a segment does not match (or a capture fails), the segments before it have run and the step
// goes on eagerly from its first op: the ops before are run again on the host with launches
// suppressed (ops are deterministic, so the op count finds the place).
#include <algorithm>
#include <bit>
#include <chrono>

#include "backend/cuda/cuda_backend.h"

namespace deepinfer::cuda {

namespace {

// Shapes whose replays keep mismatching go back to eager launches (the step's host-side choices
// follow data the recording cannot see); a few mismatches in a row are recaptured.
constexpr int64_t kMaxMismatchesInARow = 3;
// Graphs kept; the least recently used one goes first.
constexpr size_t kMaxGraphs = 64;
// Ops per segment: long enough that a graph launch (a few us) is small next to the segment's
// kernels, short enough that the GPU starts early.
constexpr int64_t kOpsPerSegment = 16;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool CudaBackend::graphable(const backend::StepShape& shape) const {
  if (options_.enforce_eager || !shape.decode || !shape.replayable || shape.tokens <= 0) return false;
  const auto& sizes = options_.cuda_graph_sizes;
  return std::find(sizes.begin(), sizes.end(), shape.tokens) != sizes.end();
}

int64_t CudaBackend::recorded_step_size(const backend::StepShape& shape) const {
  if (options_.enforce_eager || !shape.decode || !shape.replayable || shape.tokens <= 0) return shape.tokens;
  int64_t best = 0;
  for (int64_t size : options_.cuda_graph_sizes)
    if (size >= shape.tokens && (best == 0 || size < best)) best = size;
  return best == 0 ? shape.tokens : best;
}

void CudaBackend::begin_recorded_step() {
  // The previous step has finished (its logits were read), so this is a formality; the ring can
  // then start over at the offsets a recording uses.
  DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  pinned_used_ = 0;
  retired_scratch_.clear();
  op_index_ = 0;
  failed_from_op_ = -1;
  step_unusable_ = false;
  launch_control().signature = 0;
}

void CudaBackend::run_step(const backend::StepShape& shape, const std::function<void()>& device_ops) {
  launch_control().stream = stream_;
  if (!graphable(shape)) {
    plan_ = plan_step(shape, false, idle_plan_.sms, options_);
    struct Restore {
      CudaBackend& be;
      ~Restore() { be.plan_ = be.idle_plan_; }
    } restore{*this};
    run_eager(device_ops);
    return;
  }
  if (shape.padding > 0) {
    ++graph_stats_.padded_steps;
    graph_stats_.padding_rows += shape.padding;
  }
  const StepPlan plan = plan_step(shape, true, idle_plan_.sms, options_);
  const StepKey key{shape.tokens, shape.sequences, shape.logit_rows, plan.block_capacity};
  if (!graphs_.count(key) && graphs_.size() >= kMaxGraphs) {
    auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
      return a.second->last_used < b.second->last_used;
    });
    DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // it may be running
    graphs_.erase(oldest);
  }
  auto& slot = graphs_[key];
  if (!slot) slot = std::make_unique<StepGraph>();
  StepGraph& g = *slot;
  g.last_used = ++graph_clock_;
  plan_ = plan;
  // Leaves the step state as it was found, whatever happens in the ops.
  struct Reset {
    CudaBackend& be;
    ~Reset() {
      LaunchControl& lc = launch_control();
      lc.record = lc.suppress = false;
      be.plan_ = be.idle_plan_;
      be.step_mode_ = StepMode::None;
      be.step_graph_ = nullptr;
      be.discard_open_capture();  // an exception left one open
    }
  } reset{*this};

  if (!g.segments.empty() && replay(g, device_ops)) return;
  if (g.seen++ == 0 || g.failures > 0 || g.mismatches_in_a_row > kMaxMismatchesInARow) {
    run_eager(device_ops);
    return;
  }
  capture(g, device_ops);
}

void CudaBackend::run_eager(const std::function<void()>& device_ops, int64_t skip_ops) {
  if (skip_ops == 0) ++graph_stats_.eager;
  const auto t0 = std::chrono::steady_clock::now();
  op_index_ = 0;
  skip_ops_ = skip_ops;
  step_mode_ = skip_ops > 0 ? StepMode::Eager : StepMode::None;
  LaunchControl& lc = launch_control();
  lc.record = false;
  lc.suppress = skip_ops > 0;
  device_ops();
  step_mode_ = StepMode::None;
  lc.suppress = false;
  graph_stats_.eager_host_s += seconds_since(t0);
}

void CudaBackend::on_op_begin() {
  ++op_index_;
  LaunchControl& lc = launch_control();
  switch (step_mode_) {
    case StepMode::Eager:
      lc.suppress = op_index_ <= skip_ops_;
      break;
    case StepMode::Capture:
      if (op_index_ - 1 - segment_first_op_ >= kOpsPerSegment) {
        if (close_capture_segment()) {
          segment_first_op_ = op_index_ - 1;
          open_capture_segment();
        } else {
          failed_from_op_ = segment_first_op_;
          step_mode_ = StepMode::Abandoned;
          lc.record = false;
          lc.suppress = true;
        }
      }
      break;
    case StepMode::Replay: {
      if (op_index_ == perturb_op_) {  // a test's stand-in for a launch that differs
        lc.fold_value(perturb_op_);
        perturb_op_ = -1;
      }
      const auto& segs = step_graph_->segments;
      if (segment_ + 1 < segs.size() && op_index_ - 1 == segs[segment_ + 1].first_op && !launch_replayed_segment()) {
        failed_from_op_ = segs[segment_].first_op;
        step_mode_ = StepMode::Abandoned;
        lc.record = false;
      }
      break;
    }
    case StepMode::Abandoned:
    case StepMode::None:
      break;
  }
}

bool CudaBackend::launch_replayed_segment() {
  LaunchControl& lc = launch_control();
  const Segment& seg = step_graph_->segments[segment_];
  if (step_unusable_ || lc.signature != seg.signature) return false;
  DEEPINFER_CUDA_CHECK(cudaGraphLaunch(seg.exec, stream_));
  ++segment_;
  lc.signature = 0;
  return true;
}

void CudaBackend::open_capture_segment() {
  LaunchControl& lc = launch_control();
  DEEPINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  lc.signature = 0;
  lc.record = true;
}

void CudaBackend::discard_open_capture() {
  if (!capturing_) return;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // capture errors are not sticky
  capturing_ = false;
}

bool CudaBackend::close_capture_segment() {
  LaunchControl& lc = launch_control();
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  capturing_ = false;
  cudaGraphExec_t exec = nullptr;
  if (status == cudaSuccess && !step_unusable_) status = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  if (status != cudaSuccess || step_unusable_) {
    (void)cudaGetLastError();  // capture errors are not sticky
    if (exec) cudaGraphExecDestroy(exec);
    return false;
  }
  DEEPINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  step_graph_->segments.push_back({exec, lc.signature, segment_first_op_});
  return true;
}

bool CudaBackend::replay(StepGraph& g, const std::function<void()>& device_ops) {
  const auto t0 = std::chrono::steady_clock::now();
  begin_recorded_step();
  step_mode_ = StepMode::Replay;
  step_graph_ = &g;
  segment_ = 0;
  LaunchControl& lc = launch_control();
  lc.record = true;
  lc.suppress = true;
  device_ops();
  const bool complete = step_mode_ == StepMode::Replay && op_index_ == g.ops && segment_ + 1 == g.segments.size();
  if (complete && launch_replayed_segment()) {
    step_mode_ = StepMode::None;
    lc.record = lc.suppress = false;
    graph_stats_.replay_host_s += seconds_since(t0);
    ++graph_stats_.replays;
    g.mismatches_in_a_row = 0;
    return true;
  }
  // The segments before the first that did not match have run; the rest of the step runs eagerly.
  const int64_t from = failed_from_op_ >= 0 ? failed_from_op_ : g.segments[segment_].first_op;
  ++graph_stats_.mismatches;
  ++g.mismatches_in_a_row;
  if (from > 0) {
    run_eager(device_ops, from);
    DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the launched segments finish first
    g.clear();  // captured again next time (or eager, after kMaxMismatchesInARow)
    return true;
  }
  g.clear();
  lc.record = lc.suppress = false;
  step_mode_ = StepMode::None;
  return false;
}

void CudaBackend::capture(StepGraph& g, const std::function<void()>& device_ops) {
  begin_recorded_step();
  g.clear();
  step_mode_ = StepMode::Capture;
  step_graph_ = &g;
  segment_first_op_ = 0;
  open_capture_segment();
  bool threw = false;
  try {
    device_ops();
  } catch (...) {
    // Most likely a call the capture does not allow (a synchronising copy of a weight seen for the
    // first time); the step goes on eagerly below, where a real error throws again.
    threw = true;
  }
  LaunchControl& lc = launch_control();
  bool ok = false;
  if (step_mode_ == StepMode::Capture && !threw) {
    ok = close_capture_segment();
    if (!ok) failed_from_op_ = segment_first_op_;
  } else if (capturing_) {
    discard_open_capture();
    if (failed_from_op_ < 0) failed_from_op_ = segment_first_op_;
  }
  lc.record = lc.suppress = false;
  step_mode_ = StepMode::None;
  if (ok) {
    g.ops = op_index_;
    ++graph_stats_.captures;
    return;
  }
  DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // segments launched before the failure finish first
  g.clear();
  ++g.failures;
  ++graph_stats_.capture_failures;
  run_eager(device_ops, failed_from_op_);
}

}  // namespace deepinfer::cuda
