#include "kv/state_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace deepinfer::kv {

StatePool::StatePool(StateLayout layout, int64_t num_slots, int64_t num_blocks, Allocator& allocator)
    : layout_(std::move(layout)), num_blocks_(num_blocks), allocator_(&allocator) {
  DEEPINFER_CHECK(num_slots >= 1, "a state pool needs at least one slot, got {}", num_slots);
  DEEPINFER_CHECK(num_blocks >= 0, "negative block count {}", num_blocks);
  // Host buffers leave pages untouched until written, so a large budget costs nothing until used.
  DEEPINFER_CHECK(num_slots < INT32_MAX && num_blocks < INT32_MAX, "a state pool of {} slots and {} blocks: at most {} each",
                  num_slots, num_blocks, INT32_MAX - 1);
  // One more slot and block: the scratch ones (scratch_slot()).
  slots_ = Buffer(static_cast<size_t>(num_slots + 1) * layout_.slot_bytes(), allocator);
  blocks_ = Buffer(static_cast<size_t>(num_blocks + 1) * layout_.block_bytes(), allocator);
  slot_used_.assign(static_cast<size_t>(num_slots), false);
  block_used_.assign(static_cast<size_t>(num_blocks), false);
  // Free lists pop from the back: hand out low indices first.
  for (int64_t s = num_slots - 1; s >= 0; --s) free_slots_.push_back(static_cast<int32_t>(s));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(static_cast<int32_t>(b));
}

StatePool StatePool::from_budget(const StateLayout& layout, size_t budget_bytes, int64_t max_slots,
                                 Allocator& allocator) {
  DEEPINFER_CHECK(max_slots >= 1, "max sequences must be >= 1, got {}", max_slots);
  // The slots, and the scratch slot and block, come off the top; the rest is blocks.
  const size_t slots_bytes = budget_for(layout, max_slots, 0);
  const size_t need = budget_for(layout, max_slots, max_slots);
  DEEPINFER_CHECK(budget_bytes >= need,
                  "state memory budget {} bytes is too small: {} sequences need {} bytes of window/compressor "
                  "slots plus {} bytes for one block each (lower max sequences or raise the budget)",
                  budget_bytes, max_slots, slots_bytes, need - slots_bytes);
  const auto blocks = static_cast<int64_t>((budget_bytes - slots_bytes) / std::max<size_t>(layout.block_bytes(), 1));
  return StatePool(layout, max_slots, std::min<int64_t>(blocks, INT32_MAX - 1), allocator);
}

backend::StateStorage StatePool::storage() const {
  backend::StateStorage s;
  s.dtype = layout_.dtype;
  s.slots = slots_.as<float>();
  s.blocks = blocks_.as<float>();
  s.slot_elems = layout_.slot_elems;
  s.block_elems = layout_.block_elems;
  s.block_tokens = layout_.block_tokens;
  return s;
}

size_t StatePool::allocated_bytes() const {
  return budget_for(layout_, num_slots(), num_blocks_);
}

std::optional<int32_t> StatePool::allocate_slot() {
  if (free_slots_.empty()) return std::nullopt;
  const int32_t s = free_slots_.back();
  free_slots_.pop_back();
  slot_used_[static_cast<size_t>(s)] = true;
  if (poison_slots_) {
    const std::vector<float> nan(static_cast<size_t>(layout_.slot_elems), std::numeric_limits<float>::quiet_NaN());
    DEEPINFER_CHECK(layout_.dtype == DType::F32, "slot poisoning needs F32 pools");
    allocator_->write(slots_.data() + static_cast<size_t>(s) * layout_.slot_bytes(), nan.data(), layout_.slot_bytes());
  }
  return s;
}

void StatePool::copy_slot(int32_t src, int32_t dst) {
  DEEPINFER_CHECK(src >= 0 && src < num_slots() && dst >= 0 && dst < num_slots() && slot_used_[static_cast<size_t>(src)] &&
                      slot_used_[static_cast<size_t>(dst)],
                  "copying slot {} to slot {}: both must be in use", src, dst);
  if (src == dst) return;
  const size_t bytes = layout_.slot_bytes();
  allocator_->copy(slots_.data() + static_cast<size_t>(dst) * bytes, slots_.data() + static_cast<size_t>(src) * bytes,
                   bytes);
}

void StatePool::free_slot(int32_t slot) {
  DEEPINFER_CHECK(slot >= 0 && slot < num_slots() && slot_used_[static_cast<size_t>(slot)],
                  "freeing slot {} that is not in use", slot);
  slot_used_[static_cast<size_t>(slot)] = false;
  free_slots_.push_back(slot);
}

bool StatePool::allocate_blocks(int64_t n, std::vector<int32_t>& table) {
  if (n <= 0) return true;
  if (n > free_block_count()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = free_blocks_.back();
    free_blocks_.pop_back();
    block_used_[static_cast<size_t>(b)] = true;
    table.push_back(b);
  }
  return true;
}

void StatePool::free_blocks(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    DEEPINFER_CHECK(b >= 0 && b < num_blocks_ && block_used_[static_cast<size_t>(b)],
                    "freeing block {} that is not in use", b);
    block_used_[static_cast<size_t>(b)] = false;
    free_blocks_.push_back(b);
  }
}

void StatePool::grow_blocks(int64_t extra) {
  if (extra <= 0) return;
  const int64_t total = num_blocks_ + extra;
  DEEPINFER_CHECK(allocator_->device() == Device::CPU, "growing a state pool is only supported in host memory");
  Buffer grown(static_cast<size_t>(total + 1) * layout_.block_bytes(), *allocator_);  // + the scratch block
  if (!blocks_.empty()) std::memcpy(grown.data(), blocks_.data(), blocks_.size());
  blocks_ = std::move(grown);
  block_used_.resize(static_cast<size_t>(total), false);
  for (int64_t b = total - 1; b >= num_blocks_; --b) free_blocks_.insert(free_blocks_.begin(), static_cast<int32_t>(b));
  num_blocks_ = total;
}

}  // namespace deepinfer::kv
