#pragma once
// The memory that holds every running sequence's model state: `num_slots` slots (window rings and
// compressor partial state, one per running sequence) and `num_blocks` blocks of compressed KV and
// indexer keys handed out by a free list. Slots, not token-indexed blocks, hold the bounded state
// (SGLang's choice): it never grows, is never shared between sequences in this engine, and a slot
// needs no table lookup per window row. Blocks are what grows with context and what a prefix cache
// will share. Storage is allocated once; pages the OS has not been asked for stay untouched.
//
// Beyond the slots and blocks it hands out, a pool holds one scratch slot and one scratch block:
// the padding rows of a decode step padded up to a recorded batch size (model/forward_common.h)
// write their state there, where no sequence reads it.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/state.h"
#include "core/buffer.h"
#include "kv/state_layout.h"

namespace deepinfer::kv {

class StatePool {
 public:
  // Storage comes from `allocator`: host memory for the CPU backend, the backend's device memory
  // otherwise (Backend::allocator()).
  StatePool(StateLayout layout, int64_t num_slots, int64_t num_blocks,
            Allocator& allocator = HostAllocator::instance());
  // Slots for max_slots sequences, the rest of `budget_bytes` as blocks. Throws if the budget
  // cannot hold the slots and one block per slot.
  static StatePool from_budget(const StateLayout& layout, size_t budget_bytes, int64_t max_slots,
                               Allocator& allocator = HostAllocator::instance());
  // The smallest budget from_budget turns into `slots` slots and `blocks` blocks (the scratch slot
  // and block included).
  static size_t budget_for(const StateLayout& layout, int64_t slots, int64_t blocks) {
    return static_cast<size_t>(slots + 1) * layout.slot_bytes() + static_cast<size_t>(blocks + 1) * layout.block_bytes();
  }

  const StateLayout& layout() const { return layout_; }
  Device device() const { return allocator_->device(); }
  backend::StateStorage storage() const;

  int64_t num_slots() const { return static_cast<int64_t>(slot_used_.size()); }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_slot_count() const { return static_cast<int64_t>(free_slots_.size()); }
  int64_t free_block_count() const { return static_cast<int64_t>(free_blocks_.size()); }
  // Every byte of storage, the scratch slot and block included.
  size_t allocated_bytes() const;
  // The scratch slot and block: never handed out, written by padding rows only (their contents
  // are garbage). Indices past the real ones: num_slots() and num_blocks().
  int32_t scratch_slot() const { return static_cast<int32_t>(num_slots()); }
  int32_t scratch_block() const { return static_cast<int32_t>(num_blocks_); }
  size_t scratch_bytes() const { return layout_.slot_bytes() + layout_.block_bytes(); }

  std::optional<int32_t> allocate_slot();
  void free_slot(int32_t slot);
  // Appends n fresh blocks to `table`; false (and nothing taken) if fewer than n are free.
  bool allocate_blocks(int64_t n, std::vector<int32_t>& table);
  void free_blocks(std::span<const int32_t> blocks);
  // Adds blocks (for growable single-sequence pools); storage pointers change. Host memory only.
  void grow_blocks(int64_t extra);
  // Copies slot `src` into slot `dst` (in backend memory: ordered after the work issued so far).
  void copy_slot(int32_t src, int32_t dst);
  // Tests: every slot allocate_slot() hands out is first filled with NaN, so reading state the
  // sequence never wrote (another sequence's window, say) shows up in its outputs.
  void set_poison_slots(bool on) { poison_slots_ = on; }

 private:
  StateLayout layout_;
  int64_t num_blocks_ = 0;
  Allocator* allocator_;
  Buffer slots_, blocks_;
  std::vector<int32_t> free_slots_, free_blocks_;
  std::vector<bool> slot_used_, block_used_;
  bool poison_slots_ = false;
};

}  // namespace deepinfer::kv
