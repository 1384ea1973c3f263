// StatePool: slot and block allocation, exhaustion, double frees, sizing from a budget, growth, and
// that every slot and block is its own memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "core/error.h"
#include "kv/state_pool.h"

namespace deepinfer::kv {
namespace {

StateLayout small_layout() {
  std::vector<LayerStateSpec> specs(2);
  specs[0] = {4, 8, std::nullopt, std::nullopt};
  specs[1] = {4, 8, CompressorSpec{4, 8, true}, CompressorSpec{4, 4, true}};
  return plan_layout(specs, 8);  // slot 32+32+2*4*16+2*4*8+2*4*8+2*4*4 = 352 floats, block 16+8 = 24
}

uint64_t test_seed() {
  if (const char* env = std::getenv("DEEPINFER_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  return std::random_device{}();
}

TEST(StatePool, SlotsRunOutAndComeBack) {
  StatePool pool(small_layout(), 3, 4);
  EXPECT_EQ(pool.num_slots(), 3);
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    auto s = pool.allocate_slot();
    ASSERT_TRUE(s.has_value());
    got.insert(*s);
  }
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2}));
  EXPECT_FALSE(pool.allocate_slot().has_value());  // exhausted
  EXPECT_EQ(pool.free_slot_count(), 0);
  pool.free_slot(1);
  EXPECT_EQ(pool.free_slot_count(), 1);
  EXPECT_EQ(pool.allocate_slot(), std::optional<int32_t>(1));
}

TEST(StatePool, SlotDoubleFreeAndForeignSlotsThrow) {
  StatePool pool(small_layout(), 2, 1);
  const int32_t s = *pool.allocate_slot();
  pool.free_slot(s);
  EXPECT_THROW(pool.free_slot(s), Error);   // double free
  EXPECT_THROW(pool.free_slot(1), Error);   // never allocated
  EXPECT_THROW(pool.free_slot(-1), Error);
  EXPECT_THROW(pool.free_slot(2), Error);   // out of range
  EXPECT_EQ(pool.free_slot_count(), 2);     // the failed frees changed nothing
}

TEST(StatePool, BlocksAllOrNothing) {
  StatePool pool(small_layout(), 1, 5);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.allocate_blocks(3, a));
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(pool.allocate_blocks(3, b));  // only 2 left: nothing taken
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.free_block_count(), 2);
  ASSERT_TRUE(pool.allocate_blocks(2, a));  // appends
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()).size(), 5u);
  EXPECT_EQ(pool.free_block_count(), 0);
  EXPECT_TRUE(pool.allocate_blocks(0, b));
  pool.free_blocks(std::span<const int32_t>(a).subspan(1, 2));
  EXPECT_EQ(pool.free_block_count(), 2);
  EXPECT_THROW(pool.free_blocks(std::span<const int32_t>(a).subspan(1, 1)), Error);  // double free
  const std::vector<int32_t> foreign = {7};
  EXPECT_THROW(pool.free_blocks(foreign), Error);
}

TEST(StatePool, FromBudget) {
  const StateLayout l = small_layout();
  ASSERT_EQ(l.slot_bytes(), 352u * 4u);
  ASSERT_EQ(l.block_bytes(), 24u * 4u);
  // 4 slots and the scratch slot and block = 7,136 bytes; the rest in whole blocks of 96 bytes.
  const size_t scratch = l.slot_bytes() + l.block_bytes();
  const size_t budget = 4 * l.slot_bytes() + scratch + 1000 * l.block_bytes() + 95;
  const StatePool pool = StatePool::from_budget(l, budget, 4);
  EXPECT_EQ(pool.num_slots(), 4);
  EXPECT_EQ(pool.num_blocks(), 1000);
  EXPECT_EQ(pool.allocated_bytes(), 4 * l.slot_bytes() + 1000 * l.block_bytes() + scratch);
  EXPECT_LE(pool.allocated_bytes(), budget);
  // Too small for the slots plus one block per slot: a clear error.
  EXPECT_THROW(StatePool::from_budget(l, 4 * l.slot_bytes() + scratch + 3 * l.block_bytes(), 4), Error);
  EXPECT_NO_THROW(StatePool::from_budget(l, 4 * l.slot_bytes() + scratch + 4 * l.block_bytes(), 4));
  EXPECT_THROW(StatePool::from_budget(l, budget, 0), Error);
}

// The scratch slot and block lie past the real ones and are never handed out.
TEST(StatePool, ScratchSlotAndBlockAreNeverHandedOut) {
  StatePool pool(small_layout(), 3, 5);
  EXPECT_EQ(pool.scratch_slot(), 3);
  EXPECT_EQ(pool.scratch_block(), 5);
  std::vector<int32_t> slots, table;
  while (auto s = pool.allocate_slot()) slots.push_back(*s);
  EXPECT_EQ(slots.size(), 3u);
  for (int32_t s : slots) EXPECT_NE(s, pool.scratch_slot());
  ASSERT_TRUE(pool.allocate_blocks(5, table));
  EXPECT_FALSE(pool.allocate_blocks(1, table));
  for (int32_t b : table) EXPECT_NE(b, pool.scratch_block());
  EXPECT_THROW(pool.free_slot(pool.scratch_slot()), Error);
  const std::vector<int32_t> scratch = {pool.scratch_block()};
  EXPECT_THROW(pool.free_blocks(scratch), Error);
  // Growing a host pool keeps the scratch block past the real ones.
  pool.grow_blocks(2);
  EXPECT_EQ(pool.scratch_block(), 7);
  EXPECT_EQ(pool.allocated_bytes(), 4 * small_layout().slot_bytes() + 8 * small_layout().block_bytes());
}

TEST(StatePool, EverySlotAndBlockIsItsOwnMemory) {
  StatePool pool(small_layout(), 3, 6);
  const backend::StateStorage st = pool.storage();
  EXPECT_EQ(st.slot_elems, pool.layout().slot_elems);
  EXPECT_EQ(st.block_elems, pool.layout().block_elems);
  EXPECT_EQ(st.block_tokens, 8);
  for (int32_t s = 0; s < 3; ++s)
    for (int64_t i = 0; i < st.slot_elems; ++i) st.slot(s)[i] = static_cast<float>(s * 100000 + i);
  for (int32_t b = 0; b < 6; ++b)
    for (int64_t i = 0; i < st.block_elems; ++i) st.block(b)[i] = static_cast<float>(-b * 100000 - i - 1);
  for (int32_t s = 0; s < 3; ++s)
    for (int64_t i = 0; i < st.slot_elems; ++i) ASSERT_EQ(st.slot(s)[i], static_cast<float>(s * 100000 + i));
  for (int32_t b = 0; b < 6; ++b)
    for (int64_t i = 0; i < st.block_elems; ++i) ASSERT_EQ(st.block(b)[i], static_cast<float>(-b * 100000 - i - 1));
}

TEST(StatePool, GrowKeepsContentsAndAddsFreeBlocks) {
  StatePool pool(small_layout(), 1, 2);
  std::vector<int32_t> table;
  ASSERT_TRUE(pool.allocate_blocks(2, table));
  for (int32_t b : table)
    for (int64_t i = 0; i < pool.layout().block_elems; ++i) pool.storage().block(b)[i] = static_cast<float>(b * 1000 + i);
  pool.grow_blocks(3);
  EXPECT_EQ(pool.num_blocks(), 5);
  EXPECT_EQ(pool.free_block_count(), 3);
  for (int32_t b : table)
    for (int64_t i = 0; i < pool.layout().block_elems; ++i)
      ASSERT_EQ(pool.storage().block(b)[i], static_cast<float>(b * 1000 + i));
  ASSERT_TRUE(pool.allocate_blocks(3, table));
  EXPECT_EQ(std::set<int32_t>(table.begin(), table.end()), (std::set<int32_t>{0, 1, 2, 3, 4}));
}

// Random allocations and frees: nothing is handed out twice, and after freeing everything the pool
// is entirely free again.
TEST(StatePool, ChurnNeverDoubleAllocatesAndLeaksNothing) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DEEPINFER_TEST_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  StatePool pool(small_layout(), 8, 64);
  struct Owner {
    int32_t slot;
    std::vector<int32_t> blocks;
  };
  std::vector<Owner> live;
  std::set<int32_t> used_slots, used_blocks;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 3) {
      auto slot = pool.allocate_slot();
      if (!slot) {
        ASSERT_EQ(used_slots.size(), 8u);
        continue;
      }
      ASSERT_TRUE(used_slots.insert(*slot).second) << "slot " << *slot << " handed out twice";
      Owner o{*slot, {}};
      const int64_t want = static_cast<int64_t>(rng() % 12);
      const int64_t free_before = pool.free_block_count();
      if (pool.allocate_blocks(want, o.blocks)) {
        for (int32_t b : o.blocks) ASSERT_TRUE(used_blocks.insert(b).second) << "block " << b << " handed out twice";
      } else {
        ASSERT_LT(free_before, want);
        ASSERT_EQ(pool.free_block_count(), free_before);
      }
      live.push_back(std::move(o));
    } else {
      const size_t i = rng() % live.size();
      pool.free_blocks(live[i].blocks);
      pool.free_slot(live[i].slot);
      used_slots.erase(live[i].slot);
      for (int32_t b : live[i].blocks) used_blocks.erase(b);
      live.erase(live.begin() + static_cast<long>(i));
    }
    ASSERT_EQ(pool.free_block_count() + static_cast<int64_t>(used_blocks.size()), 64);
    ASSERT_EQ(pool.free_slot_count() + static_cast<int64_t>(used_slots.size()), 8);
  }
  for (auto& o : live) {
    pool.free_blocks(o.blocks);
    pool.free_slot(o.slot);
  }
  EXPECT_EQ(pool.free_block_count(), 64);
  EXPECT_EQ(pool.free_slot_count(), 8);
}

}  // namespace
}  // namespace deepinfer::kv
