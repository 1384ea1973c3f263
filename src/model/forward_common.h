#pragma once
// Pieces every DeepSeek architecture's forward shares: the checks on a step before any op runs,
// the router's scoring-function name, and the mHC weight view.
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "kv/state_pool.h"
#include "model/forward_batch.h"

namespace deepinfer::model {

// Throws a one-line error when the step cannot run: no tokens, positions that do not match, token
// ids outside [0, vocab), slots outside the pool, or a pool laid out for another model or device.
void check_forward_inputs(const ForwardBatch& batch, const kv::StatePool& pool, const kv::StateLayout& layout,
                          const backend::Backend& backend, int64_t vocab);

// The step as a backend sees it when deciding whether to replay a recording (Backend::run_step).
// `replayable`: the step never leaves the device between its first and last op.
backend::StepShape step_shape(const ForwardBatch& batch, bool replayable);

// config.json's `scoring_func`: sqrtsoftplus, sigmoid or softmax.
backend::ScoringFunc scoring_func(const std::string& name);

// The mixer weights of one hyper-connection site (fn [mixes, n*D], base [mixes], scale [3]).
template <typename HyperConnection>
backend::MhcWeights mhc_weights(const HyperConnection& hc) {
  return {hc.fn.data(), hc.base.data(), hc.scale.data()};
}

}  // namespace deepinfer::model
