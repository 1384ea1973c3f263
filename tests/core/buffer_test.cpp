// Buffer and Allocator: alignment, ownership, counters.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/buffer.h"

namespace deepinfer {
namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kBufferAlignment == 0; }

TEST(Buffer, AllocatesAlignedAndCounts) {
  HostAllocator allocator;  // own instance: counters unaffected by other code
  {
    Buffer a(100, allocator);
    Buffer b(1, allocator);
    EXPECT_TRUE(aligned(a.data()));
    EXPECT_TRUE(aligned(b.data()));
    EXPECT_EQ(a.size(), 100u);
    EXPECT_EQ(a.device(), Device::CPU);
    std::memset(a.data(), 0x5a, a.size());  // writable over its whole size
    const auto s = allocator.stats();
    EXPECT_EQ(s.allocations, 2u);
    EXPECT_EQ(s.bytes_live, 101u);
    EXPECT_EQ(s.frees, 0u);
  }
  const auto s = allocator.stats();
  EXPECT_EQ(s.frees, 2u);
  EXPECT_EQ(s.bytes_live, 0u);
  EXPECT_EQ(s.bytes_peak, 101u);
}

TEST(Buffer, MoveTransfersOwnership) {
  HostAllocator allocator;
  Buffer a(256, allocator);
  std::byte* p = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  Buffer c(64, allocator);
  c = std::move(b);  // frees c's old memory
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(allocator.stats().frees, 1u);
  EXPECT_EQ(allocator.stats().bytes_live, 256u);
  c.release();
  EXPECT_EQ(allocator.stats().bytes_live, 0u);
  EXPECT_EQ(allocator.stats().frees, 2u);
}

TEST(Buffer, EmptyBufferAllocatesNothing) {
  HostAllocator allocator;
  Buffer a(0, allocator);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(allocator.stats().allocations, 0u);
}

TEST(Buffer, ViewChecksFit) {
  Buffer a(4 * 12);
  TensorView v = a.view(DType::F32, {3, 4});
  EXPECT_EQ(v.data, a.data());
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.stride[0], 4);
  EXPECT_EQ(v.nbytes(), 48u);
  EXPECT_THROW(a.view(DType::F32, {4, 4}), Error);
  EXPECT_EQ(a.view(DType::F4_E2M1, {8, 12}).nbytes(), 48u);  // packed two per byte
}

}  // namespace
}  // namespace deepinfer
