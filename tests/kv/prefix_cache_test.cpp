// PrefixCache: hash-chain keys, longest-run hits with references, eviction order (never-cached
// blocks first, then least recently used, a finished sequence's tail first), counters, window-state
// snapshots and shortened hits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <random>
#include <set>

#include "kv/prefix_cache.h"

namespace deepinfer::kv {
namespace {

constexpr int64_t kBlock = 8;

StateLayout small_layout() {
  std::vector<LayerStateSpec> specs(1);
  specs[0] = {4, 2, CompressorSpec{4, 2, false}, std::nullopt};
  return plan_layout(specs, kBlock);
}

uint64_t test_seed() {
  if (const char* env = std::getenv("DEEPINFER_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  return std::random_device{}();
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 1000);
  return t;
}

// A sequence as the scheduler drives it: blocks allocated through the cache, then registered.
struct Seq {
  std::vector<int32_t> tokens, blocks;
  std::vector<uint64_t> keys;
};

void compute(PrefixCache& cache, Seq& s) {
  const auto need = (static_cast<int64_t>(s.tokens.size()) + kBlock - 1) / kBlock - static_cast<int64_t>(s.blocks.size());
  ASSERT_TRUE(cache.allocate(need, s.blocks));
  const int64_t full = static_cast<int64_t>(s.tokens.size()) / kBlock;
  cache.extend_keys(s.tokens, full, s.keys);
  cache.register_blocks(s.tokens, s.keys, s.blocks, 0, full);
}

TEST(PrefixCache, KeysChainOverPrefixesAndIdentity) {
  StatePool pool(small_layout(), 2, 8);
  PrefixCache a(pool, 1), b(pool, 2);
  std::vector<int32_t> x(24), y(24);
  std::iota(x.begin(), x.end(), 0);
  y = x;
  y[20] = 999;  // third block differs
  std::vector<uint64_t> kx, ky, kb;
  a.extend_keys(x, 3, kx);
  a.extend_keys(y, 3, ky);
  b.extend_keys(x, 3, kb);
  ASSERT_EQ(kx.size(), 3u);
  EXPECT_EQ(kx[0], ky[0]);
  EXPECT_EQ(kx[1], ky[1]);
  EXPECT_NE(kx[2], ky[2]);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(kx[i], kb[i]) << "another model identity must never match";
  // A block equal in tokens but after a different prefix has a different key.
  std::vector<int32_t> z(x.begin() + 8, x.end());
  z.insert(z.begin(), x.begin() + 8, x.begin() + 16);
  std::vector<uint64_t> kz;
  a.extend_keys(z, 2, kz);
  EXPECT_NE(kz[1], kx[1]);
  // Partial blocks have no key; extending is incremental.
  std::vector<uint64_t> part;
  a.extend_keys(std::span<const int32_t>(x).first(15), 3, part);
  EXPECT_EQ(part.size(), 1u);
  a.extend_keys(x, 3, part);
  EXPECT_EQ(part, kx);
}

TEST(PrefixCache, HitsTakeTheLongestRunAndHoldReferences) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED)");
  std::mt19937_64 rng(seed);
  StatePool pool(small_layout(), 2, 16);
  PrefixCache cache(pool, 7);
  Seq first{random_tokens(rng, 30), {}, {}};  // 3 full blocks + 6 tokens
  compute(cache, first);
  EXPECT_EQ(cache.stats().cached_blocks, 3);

  // Same 2 blocks, then different tokens.
  Seq second;
  second.tokens.assign(first.tokens.begin(), first.tokens.begin() + 16);
  const auto tail = random_tokens(rng, 13);
  second.tokens.insert(second.tokens.end(), tail.begin(), tail.end());
  cache.extend_keys(second.tokens, 3, second.keys);
  auto hit = cache.acquire(second.tokens, second.keys, 3, false);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[0], first.blocks[0]);
  EXPECT_EQ(hit.blocks[1], first.blocks[1]);
  EXPECT_EQ(cache.shared_blocks(first.blocks), 2);
  // max_blocks caps the run (one token must stay to compute).
  Seq again{first.tokens, {}, {}};
  cache.extend_keys(again.tokens, 3, again.keys);
  EXPECT_EQ(cache.acquire(again.tokens, again.keys, 1, false).blocks.size(), 1u);
  cache.release(std::span<const int32_t>(first.blocks).first(1));  // give the capped hit's reference back

  // Released by its owner, block 0 and 1 stay held by `second`; block 2 becomes evictable.
  cache.release(first.blocks);
  EXPECT_EQ(cache.evictable_blocks(), 1);
  cache.release(hit.blocks);
  EXPECT_EQ(cache.evictable_blocks(), 3);
  EXPECT_EQ(cache.available_blocks(), 16);
}

TEST(PrefixCache, NeverCachedBlocksGoFirstThenLeastRecentTailFirst) {
  StatePool pool(small_layout(), 2, 6);
  PrefixCache cache(pool, 3);
  std::mt19937_64 rng(11);
  Seq a{random_tokens(rng, 24), {}, {}}, b{random_tokens(rng, 16), {}, {}};
  compute(cache, a);  // blocks a0 a1 a2, cached
  compute(cache, b);  // b0 b1, cached
  cache.release(a.blocks);
  cache.release(b.blocks);
  EXPECT_EQ(pool.free_block_count(), 1);
  EXPECT_EQ(cache.available_blocks(), 6);
  // One free never-cached block first, then a's tail (a2, a1, a0), then b's (b1, b0).
  std::vector<int32_t> got;
  ASSERT_TRUE(cache.allocate(1, got));
  EXPECT_EQ(cache.stats().evicted_blocks, 0) << "a free block must be used before any cached one is evicted";
  ASSERT_TRUE(cache.allocate(4, got));
  EXPECT_EQ(cache.stats().evicted_blocks, 4);
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 1, got.end()),
            (std::vector<int32_t>{a.blocks[2], a.blocks[1], a.blocks[0], b.blocks[1]}));
  // b's first block is still a hit.
  std::vector<uint64_t> keys;
  cache.extend_keys(b.tokens, 2, keys);
  const auto hit = cache.acquire(b.tokens, keys, 2, false);
  ASSERT_EQ(hit.blocks.size(), 1u);
  EXPECT_EQ(hit.blocks[0], b.blocks[0]);
  EXPECT_FALSE(cache.allocate(2, got)) << "only the hit block is left and it is referenced";
  cache.release(hit.blocks);
  cache.release(got);
  EXPECT_EQ(cache.available_blocks(), 6);
}

TEST(PrefixCache, LookupCountersGiveTheHitRate) {
  StatePool pool(small_layout(), 2, 8);
  PrefixCache cache(pool, 3);
  cache.record_lookup(40, 0, false);
  cache.record_lookup(40, 4, false);
  EXPECT_EQ(cache.stats().queries, 2);
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().hit_tokens, 32);
  EXPECT_DOUBLE_EQ(cache.stats().hit_rate(), 32.0 / 80.0);
}

TEST(PrefixCache, SnapshotsEndExactHitsAndDieWithTheirBlock) {
  const StateLayout layout = small_layout();
  StatePool pool(layout, 3, 4);
  PrefixCache cache(pool, 5, /*snapshot_slots=*/1);
  EXPECT_EQ(pool.free_slot_count(), 2) << "the snapshot slot comes out of the pool";
  std::mt19937_64 rng(2);
  Seq a{random_tokens(rng, 17), {}, {}};
  compute(cache, a);
  // The sequence's slot: distinct contents, snapshotted at the end of block 1 (position 16).
  const int32_t slot = *pool.allocate_slot();
  std::vector<float> contents(static_cast<size_t>(layout.slot_elems));
  std::iota(contents.begin(), contents.end(), 1.0f);
  std::copy(contents.begin(), contents.end(), pool.storage().slot(slot));
  cache.take_snapshot(a.keys[1], slot);
  EXPECT_TRUE(cache.has_snapshot(a.keys[1]));
  EXPECT_FALSE(cache.has_snapshot(a.keys[0]));

  // Exact lookups end at the snapshot; without one at block 0 a 1-block hit is empty.
  auto hit = cache.acquire(a.tokens, a.keys, 2, true);
  ASSERT_EQ(hit.blocks.size(), 2u);
  ASSERT_GE(hit.snapshot_slot, 0);
  EXPECT_TRUE(std::equal(contents.begin(), contents.end(), pool.storage().slot(hit.snapshot_slot)));
  cache.release(hit.blocks);
  hit = cache.acquire(a.tokens, a.keys, 1, true);
  EXPECT_TRUE(hit.blocks.empty());
  EXPECT_TRUE(hit.shortened);

  // A second snapshot evicts the first (one slot); evicting a block drops its snapshot.
  cache.take_snapshot(a.keys[0], slot);
  EXPECT_FALSE(cache.has_snapshot(a.keys[1]));
  EXPECT_EQ(cache.stats().snapshots_evicted, 1);
  cache.release(a.blocks);
  std::vector<int32_t> taken;
  ASSERT_TRUE(cache.allocate(4, taken));  // 1 free + all 3 cached
  EXPECT_FALSE(cache.has_snapshot(a.keys[0]));
  cache.release(taken);
  pool.free_slot(slot);
}

TEST(PrefixCache, ClearLeavesOnlyReferencedBlocks) {
  StatePool pool(small_layout(), 2, 8);
  PrefixCache cache(pool, 9);
  std::mt19937_64 rng(4);
  Seq a{random_tokens(rng, 16), {}, {}}, b{random_tokens(rng, 16), {}, {}};
  compute(cache, a);
  compute(cache, b);
  cache.release(a.blocks);
  cache.clear();
  EXPECT_EQ(pool.free_block_count(), 6);
  EXPECT_EQ(cache.stats().cached_blocks, 2);  // b still holds its blocks
  std::vector<uint64_t> keys;
  cache.extend_keys(a.tokens, 2, keys);
  EXPECT_TRUE(cache.acquire(a.tokens, keys, 2, false).blocks.empty());
  cache.release(b.blocks);
}

}  // namespace
}  // namespace deepinfer::kv
