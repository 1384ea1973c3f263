#include "core/workspace.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer {

namespace {
size_t align_up(size_t n) { return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }
}  // namespace

Workspace::Workspace(Allocator& allocator, size_t initial_bytes) : allocator_(&allocator) {
  if (initial_bytes > 0) {
    chunks_.emplace_back(align_up(initial_bytes), *allocator_);
    ++allocations_;
  }
}

void Workspace::reset() {
  chunk_ = 0;
  offset_ = 0;
  step_bytes_ = 0;
}

void Workspace::compact() {
  DEEPINFER_CHECK(step_bytes_ == 0, "Workspace::compact with {} bytes in use (call it right after reset)", step_bytes_);
  if (chunks_.size() <= 1) return;
  chunks_.clear();  // release first: the peak is what may be held at once
  chunks_.emplace_back(align_up(peak_bytes_), *allocator_);
  ++allocations_;
}

size_t Workspace::capacity() const {
  size_t total = 0;
  for (const auto& c : chunks_) total += c.size();
  return total;
}

void* Workspace::alloc_bytes(size_t bytes) {
  const size_t need = align_up(std::max<size_t>(bytes, 1));  // distinct pointers even for 0 bytes
  // First fit among the chunks after the current one, in order: a repeated step finds the same ones.
  while (chunk_ < chunks_.size() && offset_ + need > chunks_[chunk_].size()) {
    ++chunk_;
    offset_ = 0;
  }
  if (chunk_ == chunks_.size()) {
    chunks_.emplace_back(std::max(need, capacity()), *allocator_);
    ++allocations_;
    offset_ = 0;
  }
  std::byte* p = chunks_[chunk_].data() + offset_;
  offset_ += need;
  step_bytes_ += need;
  peak_bytes_ = std::max(peak_bytes_, step_bytes_);
  return p;
}

TensorView Workspace::tensor(DType dtype, std::span<const int64_t> dims) {
  TensorView v = TensorView::contiguous(nullptr, dtype, dims, device());
  v.data = alloc_bytes(v.nbytes());
  return v;
}

}  // namespace deepinfer
