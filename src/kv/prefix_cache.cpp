#include "kv/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::kv {

namespace {

// SplitMix64's finaliser: every input bit reaches every output bit.
constexpr uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t block_key(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x9E3779B97F4A7C15ull);
  for (int32_t t : tokens) h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x632BE59BD9B4E019ull));
  return h;
}

}  // namespace

PrefixCache::PrefixCache(StatePool& pool, uint64_t identity, int64_t snapshot_slots)
    : pool_(pool), identity_(mix(identity)), block_tokens_(pool.layout().block_tokens) {
  DEEPINFER_CHECK(block_tokens_ >= 1, "prefix cache: blocks of {} tokens", block_tokens_);
  DEEPINFER_CHECK(snapshot_slots >= 0, "prefix cache: {} snapshot slots", snapshot_slots);
  info_.resize(static_cast<size_t>(pool.num_blocks()));
  for (int64_t i = 0; i < snapshot_slots; ++i) {
    const auto slot = pool.allocate_slot();
    DEEPINFER_CHECK(slot.has_value(), "prefix cache: the pool has no slot left for window-state snapshot {} of {}",
                    i + 1, snapshot_slots);
    snapshot_slot_ids_.push_back(*slot);
  }
  free_snapshot_slots_ = snapshot_slot_ids_;
}

PrefixCache::~PrefixCache() {
  for (int32_t s : snapshot_slot_ids_) pool_.free_slot(s);
}

void PrefixCache::extend_keys(std::span<const int32_t> tokens, int64_t blocks, std::vector<uint64_t>& keys) const {
  blocks = std::min<int64_t>(blocks, static_cast<int64_t>(tokens.size()) / block_tokens_);
  for (auto b = static_cast<int64_t>(keys.size()); b < blocks; ++b) {
    const uint64_t parent = b == 0 ? identity_ : keys[static_cast<size_t>(b - 1)];
    keys.push_back(block_key(parent, tokens.subspan(static_cast<size_t>(b * block_tokens_),
                                                    static_cast<size_t>(block_tokens_))));
  }
}

bool PrefixCache::allocate(int64_t n, std::vector<int32_t>& table) {
  if (n <= 0) return true;
  if (n > available_blocks()) return false;
  const int64_t fresh = std::min(n, pool_.free_block_count());
  DEEPINFER_CHECK(pool_.allocate_blocks(fresh, table), "internal error: the pool refused {} free blocks", fresh);
  for (int64_t i = fresh; i < n; ++i) {
    const int32_t b = lru_.front();
    uncache(b);
    ++stats_.evicted_blocks;
    table.push_back(b);  // the pool still counts it as in use: it changes owner
  }
  return true;
}

void PrefixCache::uncache(int32_t block) {
  BlockInfo& bi = info_[static_cast<size_t>(block)];
  DEEPINFER_CHECK(bi.cached && bi.refs == 0, "internal error: evicting block {} that is in use", block);
  lru_.erase(bi.lru);
  by_key_.erase(bi.key);
  drop_snapshot(bi.key);
  bi.cached = false;
  bi.tokens.clear();
  --stats_.cached_blocks;
}

void PrefixCache::release(std::span<const int32_t> table) {
  // Tail first: the blocks of the sequence's end are evicted before those of its beginning.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    BlockInfo& bi = info_.at(static_cast<size_t>(b));
    if (!bi.cached) {
      pool_.free_blocks(std::span<const int32_t>(&b, 1));
      continue;
    }
    DEEPINFER_CHECK(bi.refs > 0, "internal error: releasing cached block {} with no reference", b);
    if (--bi.refs == 0) bi.lru = lru_.insert(lru_.end(), b);
  }
}

int64_t PrefixCache::shared_blocks(std::span<const int32_t> table) const {
  return std::count_if(table.begin(), table.end(), [&](int32_t b) {
    const BlockInfo& bi = info_[static_cast<size_t>(b)];
    return bi.cached && bi.refs > 1;
  });
}

PrefixCache::Hit PrefixCache::acquire(std::span<const int32_t> tokens, std::span<const uint64_t> keys,
                                      int64_t max_blocks, bool need_snapshot) {
  Hit hit;
  max_blocks = std::min<int64_t>(max_blocks, static_cast<int64_t>(keys.size()));
  std::vector<int32_t> run;
  for (int64_t b = 0; b < max_blocks; ++b) {
    const auto found = by_key_.find(keys[static_cast<size_t>(b)]);
    if (found == by_key_.end()) break;
    const BlockInfo& bi = info_[static_cast<size_t>(found->second)];
    const auto want = tokens.subspan(static_cast<size_t>(b * block_tokens_), static_cast<size_t>(block_tokens_));
    const uint64_t parent = b == 0 ? identity_ : keys[static_cast<size_t>(b - 1)];
    if (bi.parent != parent || !std::equal(want.begin(), want.end(), bi.tokens.begin(), bi.tokens.end())) break;
    run.push_back(found->second);
  }
  auto length = static_cast<int64_t>(run.size());
  hit.matched_blocks = length;
  if (need_snapshot) {
    while (length > 0 && !has_snapshot(keys[static_cast<size_t>(length - 1)])) --length;
    hit.shortened = length < static_cast<int64_t>(run.size());
    if (length > 0) {
      auto& snap = snapshots_.at(keys[static_cast<size_t>(length - 1)]);
      snapshot_lru_.splice(snapshot_lru_.end(), snapshot_lru_, snap.lru);  // most recently used
      hit.snapshot_slot = snap.slot;
    }
  }
  run.resize(static_cast<size_t>(length));
  for (int32_t b : run) {
    BlockInfo& bi = info_[static_cast<size_t>(b)];
    if (bi.refs++ == 0) lru_.erase(bi.lru);
  }
  hit.blocks = std::move(run);
  return hit;
}

void PrefixCache::record_lookup(int64_t tokens, int64_t hit_blocks, bool shortened) {
  ++stats_.queries;
  stats_.queried_tokens += tokens;
  stats_.hits += hit_blocks > 0 ? 1 : 0;
  stats_.hit_tokens += hit_blocks * block_tokens_;
  stats_.shortened_hits += shortened ? 1 : 0;
}

void PrefixCache::register_blocks(std::span<const int32_t> tokens, std::span<const uint64_t> keys,
                                  std::span<const int32_t> table, int64_t from, int64_t to) {
  DEEPINFER_CHECK(to <= static_cast<int64_t>(keys.size()) && to <= static_cast<int64_t>(table.size()),
                  "internal error: registering blocks up to {} with {} keys and {} blocks", to, keys.size(),
                  table.size());
  for (int64_t b = from; b < to; ++b) {
    const int32_t block = table[static_cast<size_t>(b)];
    BlockInfo& bi = info_.at(static_cast<size_t>(block));
    const uint64_t key = keys[static_cast<size_t>(b)];
    if (bi.cached || by_key_.count(key)) continue;  // already cached (a hit), or a twin holds the key
    bi.cached = true;
    bi.refs = 1;  // the sequence that computed it
    bi.key = key;
    bi.parent = b == 0 ? identity_ : keys[static_cast<size_t>(b - 1)];
    const auto span = tokens.subspan(static_cast<size_t>(b * block_tokens_), static_cast<size_t>(block_tokens_));
    bi.tokens.assign(span.begin(), span.end());
    by_key_.emplace(key, block);
    ++stats_.cached_blocks;
  }
}

void PrefixCache::take_snapshot(uint64_t key, int32_t slot) {
  if (snapshot_slot_ids_.empty() || has_snapshot(key) || !by_key_.count(key)) return;
  if (free_snapshot_slots_.empty()) {
    drop_snapshot(snapshot_lru_.front());
    ++stats_.snapshots_evicted;
  }
  const int32_t dst = free_snapshot_slots_.back();
  free_snapshot_slots_.pop_back();
  pool_.copy_slot(slot, dst);
  snapshots_.emplace(key, Snapshot{dst, snapshot_lru_.insert(snapshot_lru_.end(), key)});
  ++stats_.snapshots_taken;
}

void PrefixCache::drop_snapshot(uint64_t key) {
  const auto it = snapshots_.find(key);
  if (it == snapshots_.end()) return;
  free_snapshot_slots_.push_back(it->second.slot);
  snapshot_lru_.erase(it->second.lru);
  snapshots_.erase(it);
}

void PrefixCache::clear() {
  while (!lru_.empty()) {
    const int32_t b = lru_.front();
    uncache(b);
    pool_.free_blocks(std::span<const int32_t>(&b, 1));
  }
  while (!snapshot_lru_.empty()) drop_snapshot(snapshot_lru_.front());
}

}  // namespace deepinfer::kv
