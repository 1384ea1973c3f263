#pragma once
// What the scheduler knows about one request: its tokens (prompt, then generated), how many of
// them are already in the model state, and the pool resources that state occupies (a slot while
// running, blocks covering its positions). Nothing here knows about sampling or text.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace deepinfer::engine {

enum class SequenceStatus {
  Waiting,    // admitted by add_request, never scheduled yet
  Running,    // holds a slot and blocks; its state covers tokens [0, num_computed)
  Preempted,  // was running; its state was dropped and is recomputed from token 0 when rescheduled
  Finished,   // stopped or aborted; holds nothing
};
const char* to_string(SequenceStatus status);

struct Sequence {
  uint64_t id = 0;       // the request id
  uint64_t arrival = 0;  // FCFS rank: smaller = older (never reused)
  SequenceStatus status = SequenceStatus::Waiting;

  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed = 0;  // tokens already in the model state (positions 0 .. num_computed-1)
  // Most positions this sequence can ever put in the model state: prompt + max_tokens - 1 (the
  // last generated token is never fed back), capped by the context limit. Policies that reserve
  // a sequence's whole footprint up front read it.
  int64_t max_positions = 0;

  // prompt_logprobs: the forward returns a logits row for every prompt position (not only the
  // last), until the engine has them all. A prefix-cache hit would skip those rows, so such a
  // sequence must not read the cache (vLLM's rule too).
  bool all_prompt_logits = false;

  std::optional<int32_t> slot;  // state slot while running
  std::vector<int32_t> blocks;  // block table: blocks[i] covers positions [i, i+1) * block_tokens
  int64_t num_preemptions = 0;

  // Prefix cache (kv/prefix_cache.h; the scheduler keeps these).
  bool use_prefix_cache = true;       // false: never served from the cache (e.g. prompt logprobs asked)
  std::vector<uint64_t> block_keys;   // hash-chain keys of its full blocks, extended as needed
  int64_t num_registered_blocks = 0;  // leading blocks that are in the cache (hit or registered)
  int64_t num_shared_blocks = 0;      // of its blocks, those other sequences hold too (set per step)
  int64_t window_floor = 0;           // backend::SeqSlice::window_floor (bounded replay start)
  int64_t cached_until = 0;           // backend::SeqSlice::cached_until (end of the hit)
  // Exact SWA mode: prefill chunks end at these positions (ascending), so the window state there
  // can be snapshotted: the prompt's last block boundary, and a branch point its lookup found.
  std::vector<int64_t> chunk_stops;
  std::optional<uint64_t> decode_snapshot_key;  // exact mode: its newest snapshot taken in decode
  std::optional<int64_t> num_cached_tokens;  // prompt tokens served by the cache at first admission
  int64_t num_replayed_tokens = 0;    // tokens recomputed by bounded replay (all admissions)

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Tokens still to run through the model before the next token can be sampled.
  int64_t remaining() const { return num_tokens() - num_computed; }
  bool waiting() const { return status == SequenceStatus::Waiting || status == SequenceStatus::Preempted; }
  bool running() const { return status == SequenceStatus::Running; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks.size()); }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(num_prompt_tokens));
  }
};

}  // namespace deepinfer::engine
