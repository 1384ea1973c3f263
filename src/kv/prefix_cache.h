#pragma once
// Automatic prefix caching over the state pool's blocks (vLLM's design, adapted to V4's state).
//
// A *full* block (block_tokens positions, all computed) is keyed by a hash chain: its key mixes the
// previous block's key, its own tokens and the model identity, so equal keys mean equal prefixes.
// Cached blocks carry reference counts; a block no sequence references stays cached, in an LRU
// list, until its memory is needed. Allocation takes never-cached free blocks first and evicts the
// least recently used cached block only when none is left (the fix for the 0%-hit churn that peers
// reported), and a finished sequence's blocks join the LRU tail-first, so a prefix's last blocks go
// before its first. The hit granularity is one block (64 positions on the kjv model, 128 on
// V4-Flash): a prompt hits its longest cached run of full blocks, leaving at least one token to
// compute.
//
// Blocks hold compressed KV and indexer keys, which depend only on the prefix. The sliding-window
// state (slot) does not fit in blocks; two ways to rebuild it on a hit (see the scheduler):
//  - bounded replay: recompute the last `keep` tokens before the hit with window attention clamped
//    at the replay start, writing nothing into the cached blocks (SeqSlice::window_floor,
//    SeqSlice::cached_until); approximate, O(keep) work;
//  - exact: snapshots of a sequence's whole slot at block boundaries are cached too (in slots the
//    cache holds), keyed like the block ending there; a hit whose snapshot is gone is shortened to
//    the longest prefix that has one.
// Hash keys are verified against the block's tokens and parent key on every hit.
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/state_pool.h"

namespace deepinfer::kv {

struct PrefixCacheStats {
  int64_t queries = 0;          // lookups committed (one per admission of a sequence)
  int64_t hits = 0;             // of them, lookups that reused at least one block
  int64_t queried_tokens = 0;   // tokens those lookups asked for (sequence lengths)
  int64_t hit_tokens = 0;       // tokens served from cached blocks
  int64_t evicted_blocks = 0;   // cached blocks whose memory was taken for new ones
  int64_t cached_blocks = 0;    // blocks registered now
  int64_t snapshots_taken = 0;  // exact mode: slot snapshots copied in
  int64_t snapshots_evicted = 0;
  int64_t shortened_hits = 0;   // exact mode: hits cut back to the last boundary with a snapshot
  double hit_rate() const {
    return queried_tokens ? static_cast<double>(hit_tokens) / static_cast<double>(queried_tokens) : 0.0;
  }
  // Several caches' counters added up (data-parallel ranks).
  PrefixCacheStats& operator+=(const PrefixCacheStats& o) {
    queries += o.queries;
    hits += o.hits;
    queried_tokens += o.queried_tokens;
    hit_tokens += o.hit_tokens;
    evicted_blocks += o.evicted_blocks;
    cached_blocks += o.cached_blocks;
    snapshots_taken += o.snapshots_taken;
    snapshots_evicted += o.snapshots_evicted;
    shortened_hits += o.shortened_hits;
    return *this;
  }
};

class PrefixCache {
 public:
  // `identity` keys the whole chain (model and configuration): caches of different models never
  // match. `snapshot_slots` > 0 (exact mode) takes that many slots from the pool for window-state
  // snapshots. The pool must outlive the cache and hand its blocks out only through it.
  PrefixCache(StatePool& pool, uint64_t identity, int64_t snapshot_slots = 0);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int64_t block_tokens() const { return block_tokens_; }
  // Hash-chain keys of the full blocks of `tokens`, extending `keys` (which holds the keys of the
  // first keys.size() blocks) up to `blocks` blocks.
  void extend_keys(std::span<const int32_t> tokens, int64_t blocks, std::vector<uint64_t>& keys) const;

  // Blocks for sequences: free ones first, then the least recently used unreferenced cached ones.
  int64_t available_blocks() const { return pool_.free_block_count() + static_cast<int64_t>(lru_.size()); }
  bool allocate(int64_t n, std::vector<int32_t>& table);  // false (nothing taken) if fewer are available
  // Drops a sequence's references: cached blocks become evictable (tail first), others free.
  void release(std::span<const int32_t> table);
  // Blocks of `table` that some other holder references too (releasing the table keeps them).
  int64_t shared_blocks(std::span<const int32_t> table) const;

  struct Hit {
    std::vector<int32_t> blocks;  // referenced cached blocks covering positions [0, size * block_tokens)
    int32_t snapshot_slot = -1;   // exact mode: the slot holding the window state at that boundary
    bool shortened = false;       // exact mode: a longer run of blocks matched but had no snapshot
    int64_t matched_blocks = 0;   // the run of cached blocks before any shortening
  };
  // The longest cached run of full blocks that starts the sequence, at most `max_blocks` long,
  // with a reference taken on each (give them back with release()). With `need_snapshot`, the run
  // ends where a window-state snapshot exists (possibly nowhere: an empty hit).
  Hit acquire(std::span<const int32_t> tokens, std::span<const uint64_t> keys, int64_t max_blocks,
              bool need_snapshot);
  // Counts a lookup whose result was used (a sequence admitted with `hit_blocks` cached blocks).
  void record_lookup(int64_t tokens, int64_t hit_blocks, bool shortened);

  // A sequence's blocks [from, to) are now full and computed: cache each one whose key is new
  // (another sequence may have cached the same prefix meanwhile: then the block stays private).
  void register_blocks(std::span<const int32_t> tokens, std::span<const uint64_t> keys,
                       std::span<const int32_t> table, int64_t from, int64_t to);
  // Exact mode: copies `slot` (window state exactly at the end of the block with key `key`) into a
  // snapshot slot, evicting the least recently used snapshot when all are taken. A no-op if the
  // key has a snapshot already or its block is not cached.
  void take_snapshot(uint64_t key, int32_t slot);
  bool has_snapshot(uint64_t key) const { return snapshots_.count(key) != 0; }
  void drop_snapshot(uint64_t key);  // frees its slot (no-op if there is none)
  int64_t snapshot_slots() const { return static_cast<int64_t>(snapshot_slot_ids_.size()); }

  const PrefixCacheStats& stats() const { return stats_; }
  int64_t evictable_blocks() const { return static_cast<int64_t>(lru_.size()); }
  // Drops every unreferenced cached block and snapshot (tests, benchmarks: a cold cache).
  void clear();

 private:
  struct BlockInfo {
    bool cached = false;
    int32_t refs = 0;        // sequences holding the block (cached blocks only)
    uint64_t key = 0, parent = 0;
    std::vector<int32_t> tokens;  // verification of the key on a hit
    std::list<int32_t>::iterator lru;  // valid when cached and refs == 0
  };
  struct Snapshot {
    int32_t slot;
    std::list<uint64_t>::iterator lru;
  };
  void uncache(int32_t block);      // drops a cached unreferenced block from the map and the LRU

  StatePool& pool_;
  uint64_t identity_;
  int64_t block_tokens_;
  std::vector<BlockInfo> info_;                   // by block id
  std::unordered_map<uint64_t, int32_t> by_key_;  // cached blocks
  std::list<int32_t> lru_;                        // unreferenced cached blocks, least recent first
  std::vector<int32_t> snapshot_slot_ids_, free_snapshot_slots_;
  std::unordered_map<uint64_t, Snapshot> snapshots_;
  std::list<uint64_t> snapshot_lru_;              // least recent first
  PrefixCacheStats stats_;
};

}  // namespace deepinfer::kv
