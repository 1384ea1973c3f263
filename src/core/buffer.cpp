#include "core/buffer.h"

#include <cstring>
#include <new>
#include <utility>

#include "core/error.h"

namespace deepinfer {

void* Allocator::allocate(size_t bytes, size_t alignment) {
  DEEPINFER_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0, "alignment {} is not a power of two",
                  alignment);
  if (bytes == 0) return nullptr;
  void* p = do_allocate(bytes, alignment);
  DEEPINFER_CHECK(p != nullptr, "{} allocator could not allocate {} bytes", name(), bytes);
  allocations_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t live = bytes_live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = bytes_peak_.load(std::memory_order_relaxed);
  while (live > peak && !bytes_peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return p;
}

void Allocator::deallocate(void* p, size_t bytes, size_t alignment) noexcept {
  if (p == nullptr) return;
  do_deallocate(p, bytes, alignment);
  frees_.fetch_add(1, std::memory_order_relaxed);
  bytes_live_.fetch_sub(bytes, std::memory_order_relaxed);
}

AllocatorStats Allocator::stats() const {
  AllocatorStats s;
  s.allocations = allocations_.load(std::memory_order_relaxed);
  s.frees = frees_.load(std::memory_order_relaxed);
  s.bytes_live = bytes_live_.load(std::memory_order_relaxed);
  s.bytes_peak = bytes_peak_.load(std::memory_order_relaxed);
  return s;
}

void HostAllocator::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

HostAllocator& HostAllocator::instance() {
  static HostAllocator allocator;
  return allocator;
}

void* HostAllocator::do_allocate(size_t bytes, size_t alignment) {
  try {
    return ::operator new(bytes, std::align_val_t{alignment});
  } catch (const std::bad_alloc&) {
    fail("out of host memory allocating {} bytes", bytes);
  }
}

void HostAllocator::do_deallocate(void* p, size_t bytes, size_t alignment) noexcept {
  ::operator delete(p, std::align_val_t{alignment});  // unsized: clang 14 has no sized deallocation by default
}

Buffer::Buffer(size_t bytes, Allocator& allocator)
    : data_(static_cast<std::byte*>(allocator.allocate(bytes))), size_(bytes), allocator_(&allocator) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    allocator_ = std::exchange(other.allocator_, nullptr);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (allocator_) allocator_->deallocate(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

TensorView Buffer::view(DType dtype, std::span<const int64_t> dims) const {
  TensorView v = TensorView::contiguous(data_, dtype, dims, device());
  DEEPINFER_CHECK(v.nbytes() <= size_, "a {} view of {} bytes does not fit a buffer of {} bytes", dtype_name(dtype),
                  v.nbytes(), size_);
  return v;
}

}  // namespace deepinfer
