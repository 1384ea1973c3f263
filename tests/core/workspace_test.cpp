// Workspace: aligned disjoint scratch, reuse across steps (a repeated step allocates nothing).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/workspace.h"

namespace deepinfer {
namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kBufferAlignment == 0; }

TEST(Workspace, HandsOutAlignedDisjointMemory) {
  HostAllocator allocator;
  Workspace ws(allocator);
  std::vector<std::pair<std::byte*, size_t>> spans;
  for (size_t n : {1u, 7u, 64u, 65u, 1000u, 3u, 0u, 5000u}) {
    auto* p = ws.alloc<std::byte>(n);
    EXPECT_TRUE(aligned(p)) << n;
    std::memset(p, static_cast<int>(n & 0xff), n);
    spans.emplace_back(p, n);
  }
  for (size_t i = 0; i < spans.size(); ++i)
    for (size_t j = i + 1; j < spans.size(); ++j) {
      const auto [a, na] = spans[i];
      const auto [b, nb] = spans[j];
      EXPECT_TRUE(a + std::max<size_t>(na, 1) <= b || b + std::max<size_t>(nb, 1) <= a) << i << " overlaps " << j;
    }
  for (const auto& [p, n] : spans)  // nothing overwrote an earlier allocation
    for (size_t k = 0; k < n; ++k) ASSERT_EQ(static_cast<int>(p[k]), static_cast<int>(n & 0xff));
}

// One "step": a fixed mix of requests sized by `scale`.
void run_step(Workspace& ws, size_t scale) {
  ws.reset();
  float* a = ws.alloc<float>(100 * scale);
  TensorView t = ws.tensor(DType::F32, {static_cast<int64_t>(scale), 64});
  int32_t* ids = ws.alloc<int32_t>(17 * scale);
  TensorView h = ws.tensor(DType::BF16, {static_cast<int64_t>(scale), 3, 40});
  a[0] = 1.0f;
  t.f32()[0] = 2.0f;
  ids[0] = 3;
  EXPECT_EQ(h.dtype, DType::BF16);
  EXPECT_EQ(h.numel(), static_cast<int64_t>(scale) * 120);
}

TEST(Workspace, RepeatedStepAllocatesNothing) {
  HostAllocator allocator;
  Workspace ws(allocator);
  run_step(ws, 8);
  const uint64_t after_first = ws.allocations();
  EXPECT_GT(after_first, 0u);
  const size_t used = ws.used();
  for (int i = 0; i < 5; ++i) {
    run_step(ws, 8);
    EXPECT_EQ(ws.allocations(), after_first) << "step " << i + 2 << " of the same shape allocated";
    EXPECT_EQ(ws.used(), used);
  }
  run_step(ws, 2);  // smaller: fits
  EXPECT_EQ(ws.allocations(), after_first);
  run_step(ws, 64);  // larger than every earlier step: grows
  const uint64_t after_growth = ws.allocations();
  EXPECT_GT(after_growth, after_first);
  run_step(ws, 64);
  run_step(ws, 8);
  run_step(ws, 64);
  EXPECT_EQ(ws.allocations(), after_growth);
  EXPECT_EQ(allocator.stats().allocations, after_growth);  // the counter is the allocator's truth
}

TEST(Workspace, CompactLeavesOneChunkThatFitsThePeak) {
  HostAllocator allocator;
  Workspace ws(allocator);
  run_step(ws, 4);
  run_step(ws, 32);
  run_step(ws, 500);
  ASSERT_GT(ws.chunk_count(), 1u);
  ws.reset();
  ws.compact();
  EXPECT_EQ(ws.chunk_count(), 1u);
  EXPECT_GE(ws.capacity(), ws.peak());
  const uint64_t before = ws.allocations();
  run_step(ws, 500);
  run_step(ws, 4);
  EXPECT_EQ(ws.allocations(), before);
  EXPECT_EQ(allocator.stats().bytes_live, ws.capacity());
  ws.alloc<float>(4);
  EXPECT_THROW(ws.compact(), Error);  // not right after reset
}

TEST(Workspace, TensorIsContiguousOnTheAllocatorsDevice) {
  Workspace ws;
  TensorView t = ws.tensor(DType::F32, {2, 3, 5});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.device, Device::CPU);
  EXPECT_EQ(t.stride[0], 15);
  EXPECT_EQ(t.stride[1], 5);
  EXPECT_TRUE(aligned(t.data));
}

}  // namespace
}  // namespace deepinfer
