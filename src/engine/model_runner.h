#pragma once
// Turns a StepPlan into the model's ForwardBatch, runs the forward, and hands back one logits row
// per entry that samples. The only engine piece that talks to the model.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "kv/state_pool.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace deepinfer::engine {

class ModelRunner {
 public:
  ModelRunner(const model::CausalLM& model, kv::StatePool& pool);

  // Runs every entry of the plan in one forward. Returns num_samples() rows of vocab_size()
  // floats, in the order of the entries with sample == true; valid until the next call.
  std::span<const float> execute(const StepPlan& plan);
  int64_t vocab_size() const { return vocab_; }
  // The batch of the last execute() (for tests and diagnostics).
  const model::ForwardBatch& last_batch() const { return batch_; }

 private:
  const model::CausalLM& model_;
  kv::StatePool& pool_;
  int64_t vocab_;
  model::ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace deepinfer::engine
