#pragma once
// Pieces every DeepSeek architecture's forward shares: the checks on a step before any op runs,
// the router's scoring-function name, and the mHC weight view.
#include <cstdint>
#include <string>
#include <vector>

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

// `batch` with padding rows after its own up to `size` sequences, for a decode step padded to the
// batch size of a recording (Backend::recorded_step_size), as vLLM pads to its captured sizes. A
// padding row is token 0 at position 0 in the pool's scratch slot and block (`scratch_table`, which
// must outlive the step): it reads no state before position 0 and writes only scratch, so the real
// rows' results are those of the unpadded batch (every op computes a row alone: batch invariance).
// It has a logits row when every real row does, so the step keeps a recorded shape; the caller
// reads the first real rows only.
ForwardBatch padded_decode_batch(const ForwardBatch& batch, int64_t size, const kv::StatePool& pool,
                                 std::vector<int32_t>& scratch_table);

// The step's shape after padding it where the backend asks for it: points `run` at `batch`, or at
// `padded` filled by padded_decode_batch (shape.padding counts its padding rows).
backend::StepShape pad_for_recording(const ForwardBatch& batch, const kv::StatePool& pool,
                                     const backend::Backend& backend, bool replayable, ForwardBatch& padded,
                                     std::vector<int32_t>& scratch_table, const ForwardBatch*& run);

// config.json's `scoring_func`: sqrtsoftplus, sigmoid or softmax.
backend::ScoringFunc scoring_func(const std::string& name);

// The mixer weights of one hyper-connection site (fn [mixes, n*D], base [mixes], scale [3]).
template <typename HyperConnection>
backend::MhcWeights mhc_weights(const HyperConnection& hc) {
  return {hc.fn.data(), hc.base.data(), hc.scale.data()};
}

}  // namespace deepinfer::model
