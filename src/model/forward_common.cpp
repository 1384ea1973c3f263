#include "model/forward_common.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::model {

backend::StepShape step_shape(const ForwardBatch& batch, bool replayable) {
  backend::StepShape shape;
  shape.tokens = batch.num_tokens();
  shape.sequences = static_cast<int64_t>(batch.seqs.size());
  shape.logit_rows = static_cast<int64_t>(batch.logit_rows.size());
  shape.decode = !batch.seqs.empty();
  for (const auto& s : batch.seqs) {
    shape.decode = shape.decode && s.count == 1;
    shape.max_blocks = std::max(shape.max_blocks, static_cast<int64_t>(s.blocks.size()));
  }
  shape.replayable = replayable;
  return shape;
}

void check_forward_inputs(const ForwardBatch& batch, const kv::StatePool& pool, const kv::StateLayout& layout,
                          const backend::Backend& backend, int64_t vocab) {
  const int64_t T = batch.num_tokens();
  DEEPINFER_CHECK(T > 0, "forward: no tokens");
  DEEPINFER_CHECK(static_cast<int64_t>(batch.positions.size()) == T, "forward: {} positions for {} tokens",
                  batch.positions.size(), T);
  DEEPINFER_CHECK(pool.layout().slot_elems == layout.slot_elems && pool.layout().block_elems == layout.block_elems,
                  "forward: the state pool was laid out for another model");
  DEEPINFER_CHECK(pool.device() == backend.device(),
                  "forward: the state pool is in {} memory but the model runs on {} (allocate pools from "
                  "model.backend().allocator())",
                  pool.device() == Device::CPU ? "host" : "device", backend.name());
  for (int32_t id : batch.tokens)
    DEEPINFER_CHECK(id >= 0 && id < vocab, "token id {} outside the vocabulary [0, {})", id, vocab);
  for (const auto& s : batch.seqs)
    DEEPINFER_CHECK(s.slot >= 0 && s.slot < pool.num_slots(), "forward: slot {} outside the pool's {}", s.slot,
                    pool.num_slots());
}

backend::ScoringFunc scoring_func(const std::string& name) {
  if (name == "sqrtsoftplus") return backend::ScoringFunc::SqrtSoftplus;
  if (name == "sigmoid") return backend::ScoringFunc::Sigmoid;
  if (name == "softmax") return backend::ScoringFunc::Softmax;
  fail("unsupported scoring_func '{}' (supported: sqrtsoftplus, sigmoid, softmax)", name);
}

}  // namespace deepinfer::model
