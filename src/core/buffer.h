#pragma once
// Owning device memory. Every buffer comes from an Allocator, which knows its device and counts what
// it hands out; HostAllocator serves CPU memory today, a CUDA allocator (cudaMalloc / a caching
// pool) implements the same interface later, so code that allocates does not change.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "core/tensor.h"

namespace deepinfer {

// Every buffer starts on a cache line (and an AVX-512 vector) boundary.
inline constexpr size_t kBufferAlignment = 64;

struct AllocatorStats {
  uint64_t allocations = 0;  // successful allocate() calls, ever
  uint64_t frees = 0;
  uint64_t bytes_live = 0;   // allocated and not yet freed
  uint64_t bytes_peak = 0;   // highest bytes_live so far
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual std::string_view name() const = 0;

  // At least `bytes` bytes (0 gives null), aligned to `alignment` (a power of two); throws on failure.
  void* allocate(size_t bytes, size_t alignment = kBufferAlignment);
  // Returns what allocate(bytes, alignment) gave.
  void deallocate(void* p, size_t bytes, size_t alignment = kBufferAlignment) noexcept;
  AllocatorStats stats() const;
  // Copies between two buffers of this allocator, and from host memory into one; ordered after the
  // device work issued so far (state-pool slot snapshots for the prefix cache; test poisoning).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void write(void* dst, const void* host_src, size_t bytes) = 0;

 protected:
  virtual void* do_allocate(size_t bytes, size_t alignment) = 0;
  virtual void do_deallocate(void* p, size_t bytes, size_t alignment) noexcept = 0;

 private:
  std::atomic<uint64_t> allocations_{0}, frees_{0}, bytes_live_{0}, bytes_peak_{0};
};

// Aligned host memory from operator new; pages stay untouched until first written.
class HostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::CPU; }
  std::string_view name() const override { return "host"; }
  // The process-wide host allocator (its counters cover every default-allocated buffer).
  static HostAllocator& instance();
  void copy(void* dst, const void* src, size_t bytes) override;
  void write(void* dst, const void* host_src, size_t bytes) override { copy(dst, host_src, bytes); }

 protected:
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) noexcept override;
};

// A move-only owner of `size()` bytes from one allocator.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, Allocator& allocator = HostAllocator::instance());
  ~Buffer() { release(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Device device() const { return allocator_ ? allocator_->device() : Device::CPU; }
  Allocator* allocator() const { return allocator_; }

  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }
  // A contiguous view of the start of the buffer; throws if it does not fit.
  TensorView view(DType dtype, std::span<const int64_t> dims) const;
  TensorView view(DType dtype, std::initializer_list<int64_t> dims) const {
    return view(dtype, std::span<const int64_t>(dims.begin(), dims.size()));
  }

  void release() noexcept;

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  Allocator* allocator_ = nullptr;
};

}  // namespace deepinfer
