#pragma once
// Expert parallelism for the MoE layers, one ExpertParallelMoe per rank (set on that rank's model
// with CausalLM::set_moe_executor). Each rank runs its own tokens (attention data parallelism) and
// at every MoE layer:
//   1. runs the shared expert on its tokens (moe_shared_expert);
//   2. sends each routed (token, k) row to the rank holding a replica of its expert
//      (ExpertPlacement::owner), all_to_all;
//   3. runs the experts it holds on the rows it received (moe_expert_rows);
//   4. sends the results back, all_to_all, and adds them to its tokens in ascending expert id
//      (moe_combine).
// Every step is what moe_experts does on one rank, and a row's expert result does not depend on the
// rows beside it, so the logits are EP = 1's bit for bit. A rank without tokens still serves the
// others' rows: CausalLM::moe_idle_step.
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "dist/ep_transport.h"
#include "dist/eplb.h"
#include "dist/expert_load.h"
#include "dist/expert_placement.h"
#include "model/moe_executor.h"

namespace deepinfer::dist {

struct ExpertParallelStats {
  int64_t rows_sent = 0, rows_received = 0;  // routed rows dispatched to other ranks / served for them
  int64_t rows_local = 0;                    // routed rows this rank kept for its own experts
};

class ExpertParallelMoe final : public model::MoeExecutor {
 public:
  // load_window_steps: the steps of expert loads rebalance() plans from.
  ExpertParallelMoe(EpTransport& transport, ExpertPlacement placement, int64_t load_window_steps = 64);

  void moe_experts(backend::Backend& be, int64_t layer, const backend::MoeWeights& w, TensorView x,
                   TensorView experts, TensorView weights, TensorView out) override;

  // Closes a step of the load window (call once per step, every rank).
  void end_step() { load_.end_step(); }
  // Collective, at a step boundary: gathers every rank's load window, plans `slots` slots per layer
  // with EPLB (global policy) and switches to it. Every rank gets the same plan.
  void rebalance(int64_t slots);

  const ExpertPlacement& placement() const { return placement_; }
  const ExpertParallelStats& stats() const { return stats_; }
  const ExpertLoadWindow& load() const { return load_; }

 private:
  EpTransport& transport_;
  ExpertPlacement placement_;
  ExpertLoadWindow load_;
  ExpertParallelStats stats_;
  // The backend-side copies of the served rows and of the results to combine.
  Buffer rows_x_, rows_e_, rows_y_, combine_y_, combine_rows_;
};

}  // namespace deepinfer::dist
