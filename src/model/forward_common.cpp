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

ForwardBatch padded_decode_batch(const ForwardBatch& batch, int64_t size, const kv::StatePool& pool,
                                 std::vector<int32_t>& scratch_table) {
  const int64_t real = batch.num_tokens();
  DEEPINFER_CHECK(size >= real, "padding a step of {} tokens down to {}", real, size);
  const bool logits = static_cast<int64_t>(batch.logit_rows.size()) == real;
  ForwardBatch padded = batch;
  scratch_table.assign(1, pool.scratch_block());
  const int32_t token = 0;
  for (int64_t i = real; i < size; ++i)
    padded.add(pool.scratch_slot(), scratch_table, 0, std::span<const int32_t>(&token, 1), logits);
  return padded;
}

backend::StepShape pad_for_recording(const ForwardBatch& batch, const kv::StatePool& pool,
                                     const backend::Backend& backend, bool replayable, ForwardBatch& padded,
                                     std::vector<int32_t>& scratch_table, const ForwardBatch*& run) {
  run = &batch;
  backend::StepShape shape = step_shape(batch, replayable);
  const int64_t size = backend.recorded_step_size(shape);
  if (size <= shape.tokens) return shape;
  padded = padded_decode_batch(batch, size, pool, scratch_table);
  run = &padded;
  const int64_t real = shape.tokens;
  shape = step_shape(padded, replayable);
  shape.padding = size - real;
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
    // The scratch slot (num_slots) is the pool's too: padding rows run there (padded_decode_batch).
    DEEPINFER_CHECK(s.slot >= 0 && s.slot <= pool.scratch_slot(), "forward: slot {} outside the pool's {}", s.slot,
                    pool.num_slots());
}

backend::ScoringFunc scoring_func(const std::string& name) {
  if (name == "sqrtsoftplus") return backend::ScoringFunc::SqrtSoftplus;
  if (name == "sigmoid") return backend::ScoringFunc::Sigmoid;
  if (name == "softmax") return backend::ScoringFunc::Softmax;
  fail("unsupported scoring_func '{}' (supported: sqrtsoftplus, sigmoid, softmax)", name);
}

}  // namespace deepinfer::model
