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

  std::optional<int32_t> slot;  // state slot while running
  std::vector<int32_t> blocks;  // block table: blocks[i] covers positions [i, i+1) * block_tokens
  int64_t num_preemptions = 0;

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
