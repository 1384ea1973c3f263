#pragma once
// Turns a StepPlan into the model's ForwardBatch, runs the forward, and hands back one logits row
// per entry that samples (every row of the chunk for a sequence that asks for all prompt rows).
// The only engine piece that talks to the model.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "kv/state_pool.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace deepinfer::engine {

// Logits rows an entry returns: all of its tokens while its sequence wants every prompt row and
// the chunk holds some, else one when it samples, else none. The sampling row is always the last.
int64_t logit_rows(const StepPlan::Entry& entry);
bool returns_all_rows(const StepPlan::Entry& entry);

class ModelRunner {
 public:
  ModelRunner(const model::CausalLM& model, kv::StatePool& pool);

  // Runs every entry of the plan in one forward. Returns logit_rows(entry) rows of vocab_size()
  // floats per entry, in entry order; valid until the next call.
  std::span<const float> execute(const StepPlan& plan);
  // The same step, sampled on the model's backend: one token per entry that samples (rows[i] says
  // how for the i-th; every entry must return at most its sampling row), in entry order; valid
  // until the next call. The logits stay on the device.
  std::span<const int32_t> execute_sampled(const StepPlan& plan, std::span<const backend::SampleRow> rows);
  int64_t vocab_size() const { return vocab_; }
  // The batch of the last execute() (for tests and diagnostics).
  const model::ForwardBatch& last_batch() const { return batch_; }

 private:
  void build_batch(const StepPlan& plan);
  const model::CausalLM& model_;
  kv::StatePool& pool_;
  int64_t vocab_;
  model::ForwardBatch batch_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
};

}  // namespace deepinfer::engine
