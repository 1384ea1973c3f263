#pragma once
// Per-step scratch memory: a bump arena that a forward step draws every temporary from, so the ops
// of a step allocate nothing. reset() at the start of each step hands the whole arena out again.
//
// Growth: pointers handed out earlier in a step must stay valid, so a request that does not fit is
// served from a new chunk appended to the arena (at least as large as the arena so far, so chunks
// stay few) and every chunk is kept across reset(). The same sequence of requests therefore lands in
// the same places next step: only a step that needs more than every earlier step allocates.
// Not thread-safe: one workspace per thread of control (each op call takes what it needs up front).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/buffer.h"

namespace deepinfer {

class Workspace {
 public:
  explicit Workspace(Allocator& allocator = HostAllocator::instance(), size_t initial_bytes = 0);

  // Starts a step: everything handed out before is free again (its memory is reused, not released).
  void reset();
  // Right after reset(): replaces several chunks by one of peak() bytes, so the arena stops
  // wasting chunk tails (one allocation now, none in later steps that fit peak()).
  void compact();

  // `count` uninitialised elements of T, aligned to kBufferAlignment.
  template <typename T>
  T* alloc(size_t count) {
    return static_cast<T*>(alloc_bytes(count * sizeof(T)));
  }
  // A contiguous uninitialised tensor on the allocator's device.
  TensorView tensor(DType dtype, std::span<const int64_t> dims);
  TensorView tensor(DType dtype, std::initializer_list<int64_t> dims) {
    return tensor(dtype, std::span<const int64_t>(dims.begin(), dims.size()));
  }
  TensorView f32(std::initializer_list<int64_t> dims) { return tensor(DType::F32, dims); }
  TensorView i32(std::initializer_list<int64_t> dims) { return tensor(DType::I32, dims); }
  void* alloc_bytes(size_t bytes);

  Device device() const { return allocator_->device(); }
  size_t capacity() const;                        // bytes held over all chunks
  size_t used() const { return step_bytes_; }     // bytes handed out this step (with alignment padding)
  size_t peak() const { return peak_bytes_; }     // most bytes any step used
  size_t chunk_count() const { return chunks_.size(); }
  uint64_t allocations() const { return allocations_; }  // backing allocations ever made

 private:
  Allocator* allocator_;
  std::vector<Buffer> chunks_;
  size_t chunk_ = 0;   // chunk being filled
  size_t offset_ = 0;  // bytes used in it
  size_t step_bytes_ = 0, peak_bytes_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace deepinfer
