#pragma once
// Where a MoE layer's experts run. Without one the model calls backend moe_experts (every expert
// here); expert parallelism (dist/ep_moe.h) runs the shared expert here and sends each routed row to
// the rank that holds its expert. Either way out is moe_experts' result, bit for bit.
#include <cstdint>

#include "backend/backend.h"

namespace deepinfer::model {

class MoeExecutor {
 public:
  virtual ~MoeExecutor() = default;
  // out [T, D] = moe_experts(w, x, experts, weights) of MoE layer `layer` (the model's layer index)
  // over this rank's T tokens (T may be 0). Every rank of a group calls it for the same layers in
  // the same order.
  virtual void moe_experts(backend::Backend& be, int64_t layer, const backend::MoeWeights& w, TensorView x,
                           TensorView experts, TensorView weights, TensorView out) = 0;
};

}  // namespace deepinfer::model
