#include "backend/cuda/step_plan.h"

#include <algorithm>
#include <bit>

namespace deepinfer::cuda {

StepPlan plan_step(const backend::StepShape& shape, bool recorded, int64_t sms, const backend::BackendOptions& options) {
  StepPlan plan;
  // A recording serves every later step of its shape while the tables grow: the capacity is the
  // next power of two (at least kMinBlockCapacity), and a step past it is a new recording.
  if (recorded)
    plan.block_capacity = static_cast<int64_t>(
        std::bit_ceil(static_cast<uint64_t>(std::max(shape.max_blocks, StepPlan::kMinBlockCapacity))));
  plan.sms = sms;
  plan.attention = options.attention_schedule;
  plan.decode = shape.decode;
  return plan;
}

}  // namespace deepinfer::cuda
