#pragma once
// How backend ops address a step's sequences and their model state. The state lives in two pools
// (see kv/state_pool.h): per-sequence *slots* (bounded state: the sliding-window ring and the
// compressors' unfinished windows) and fixed-size *blocks* of compressed KV entries and indexer keys,
// each block covering `block_tokens` positions of one sequence for every compressed layer. Ops get
// the storage base pointers, the element offsets of one layer's state inside a slot / block, and
// per-sequence slices of the step. Everything a compressor needs follows from positions: a sequence
// at position p has p / rate completed entries and p % rate tokens pending.
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace deepinfer::backend {

// One sequence's share of a step.
struct SeqSlice {
  int64_t begin = 0;  // index of its first token in the step's token arrays
  int64_t count = 0;  // its tokens in this step
  int64_t start = 0;  // position of its first token (= tokens already in its state)
  int32_t slot = 0;   // its state slot
  std::span<const int32_t> blocks;  // block table: block i covers positions [i, i + 1) * block_tokens
  // Prefix-cache hits (kv/prefix_cache.h). Window attention never reads positions below
  // `window_floor`: under bounded replay the window state is rebuilt from there, and whatever the
  // slot held before belongs to another sequence.
  int64_t window_floor = 0;
  // Positions below `cached_until` lie in shared, read-only cached blocks: compressed entries (and
  // indexer keys) of windows that end at or before it are neither computed nor written.
  int64_t cached_until = 0;
  // The sequence's prompt length (0: not given). DeepSeek-V4.1's decoder bounded replay skips the
  // decoder for prompt positions before prompt_end - keep, in whichever chunk they come; without it
  // only a chunk that asks for logits counts as ending its prompt.
  int64_t prompt_end = 0;
  // Its tokens before `start` (empty: not known, e.g. the single-sequence API). What a bounded
  // replay cannot rebuild from state is taken from them: DeepSeek-V4.1's Engram n-gram history
  // below window_floor.
  std::span<const int32_t> prior_tokens;
};

// A compressor's state inside the pools (main KV compressor or the indexer's own).
struct CompressorLayout {
  int64_t rate = 0;       // tokens per compressed entry
  int64_t head_dim = 0;   // width of one entry
  int64_t width = 0;      // projection width per token (2 x head_dim when overlapping)
  bool overlap = false;   // CSA: entry w mixes window w-1's first half with window w's second half
  // Slot: pending kv [rate, width], pending gate [rate, width]; with overlap also the previous
  // window's first half: kv [rate, head_dim], gate [rate, head_dim] (position bias included).
  int64_t slot_offset = 0;
  // Block: entries [block_tokens / rate, head_dim].
  int64_t block_offset = 0;
  int64_t entries_per_block = 0;

  int64_t slot_elems() const { return 2 * rate * width + (overlap ? 2 * rate * head_dim : 0); }
};

// Base pointers and strides of the two pools. Element type is `dtype` (F32 on the CPU backend).
struct StateStorage {
  DType dtype = DType::F32;
  float* slots = nullptr;
  float* blocks = nullptr;
  int64_t slot_elems = 0;   // elements per slot
  int64_t block_elems = 0;  // elements per block
  int64_t block_tokens = 0;

  float* slot(int32_t s) const { return slots + static_cast<int64_t>(s) * slot_elems; }
  float* block(int32_t b) const { return blocks + static_cast<int64_t>(b) * block_elems; }
  // Entry `e` of a compressor of one sequence.
  float* entry(const SeqSlice& seq, const CompressorLayout& c, int64_t e) const {
    const int64_t b = e / c.entries_per_block;
    return block(seq.blocks[static_cast<size_t>(b)]) + c.block_offset + (e % c.entries_per_block) * c.head_dim;
  }
};

// The sliding-window ring of one layer inside a slot: [window, head_dim], row = position % window.
struct WindowLayout {
  int64_t window = 0;
  int64_t head_dim = 0;
  int64_t slot_offset = 0;
};

// Every state op's precondition: the slices tile the step's tokens in order and each block table
// covers its sequence's positions after the step. Throws Error naming the first violation.
inline void check_slices(std::span<const SeqSlice> seqs, int64_t tokens, const StateStorage& state) {
  int64_t covered = 0;
  for (const auto& s : seqs) {
    DEEPINFER_CHECK(s.begin == covered && s.count >= 1 && s.start >= 0,
                    "sequence slices must tile the step's tokens in order (slice at {} with {} tokens, expected {})",
                    s.begin, s.count, covered);
    DEEPINFER_CHECK(static_cast<int64_t>(s.blocks.size()) * state.block_tokens >= s.start + s.count,
                    "block table of {} blocks does not cover {} positions", s.blocks.size(), s.start + s.count);
    DEEPINFER_CHECK(s.window_floor >= 0 && s.window_floor <= s.start && s.cached_until >= 0 &&
                        s.cached_until <= static_cast<int64_t>(s.blocks.size()) * state.block_tokens,
                    "bad prefix-cache bounds: window floor {}, cached until {} (start {}, {} blocks)", s.window_floor,
                    s.cached_until, s.start, s.blocks.size());
    covered += s.count;
  }
  DEEPINFER_CHECK(covered == tokens, "sequence slices cover {} tokens, the step has {}", covered, tokens);
}

}  // namespace deepinfer::backend
