// The single-sequence path: a pool of one slot that grows a block at a time, run through the same
// batched forward as everything else.
#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace deepinfer::model {

SequenceState::SequenceState(const kv::StateLayout& layout, Allocator& allocator, int64_t max_positions)
    : pool_(std::make_unique<kv::StatePool>(
          layout, 1, allocator.device() == Device::CPU ? 0 : layout.blocks_for(std::max<int64_t>(max_positions, 1)),
          allocator)) {
  slot_ = *pool_->allocate_slot();
}

SequenceState::~SequenceState() = default;

size_t SequenceState::bytes() const { return pool_->allocated_bytes(); }

void CausalLM::moe_idle_step() const {
  fail("{} does not support expert parallelism yet (DeepSeek-V4 only so far)", config().model_type);
}

std::unique_ptr<SequenceState> CausalLM::new_sequence() const {
  return std::make_unique<SequenceState>(state_layout(), backend().allocator(), config().max_position_embeddings);
}

void CausalLM::forward(SequenceState& state, std::span<const int32_t> tokens, std::vector<float>& logits,
                       bool all_logits) const {
  DEEPINFER_CHECK(!tokens.empty(), "forward: no tokens");
  const auto end = state.length_ + static_cast<int64_t>(tokens.size());
  const int64_t need = state_layout().blocks_for(end) - static_cast<int64_t>(state.blocks_.size());
  if (need > 0) {
    if (state.pool_->free_block_count() < need) state.pool_->grow_blocks(need - state.pool_->free_block_count());
    DEEPINFER_CHECK(state.pool_->allocate_blocks(need, state.blocks_), "forward: could not take {} blocks", need);
  }
  ForwardBatch batch;
  batch.add(state.slot_, state.blocks_, state.length_, tokens, true, all_logits);
  forward(batch, *state.pool_, logits);
  state.length_ = end;
}

}  // namespace deepinfer::model
