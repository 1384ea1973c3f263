#pragma once
// Continuous batching. Every step the scheduler asks its policy which sequences run and with how
// many tokens, applies the answer to the state pool (preempted sequences give back their slot and
// blocks; scheduled ones get the slot and blocks their tokens need) and returns the step as plain
// data (StepPlan). The model runner executes the plan; the engine samples and calls
// Scheduler::complete() to advance the sequences.
//
// Policies are small function objects in the style of TensorRT-LLM's batch manager:
//   (active sequences in arrival order, pool occupancy) -> (scheduled, paused)
// They only decide; they never touch the pool, so each one can be tested on its own.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "kv/prefix_cache.h"
#include "kv/state_pool.h"

namespace deepinfer::engine {

// What a policy may know about the pool: free resources and the block size.
struct PoolView {
  int64_t free_slots = 0;
  int64_t free_blocks = 0;
  int64_t block_tokens = 1;
  int64_t blocks_for(int64_t positions) const { return (positions + block_tokens - 1) / block_tokens; }
  static PoolView of(const kv::StatePool& pool);
};

struct SchedulerLimits {
  int64_t max_num_seqs = 64;              // running sequences at most (the pool's slot count caps it too)
  int64_t max_num_batched_tokens = 2048;  // tokens per step (decodes + prefill chunks)
  int64_t max_prefill_chunk = 0;          // prompt tokens of one sequence per step; 0 = the step budget
  void validate() const;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;     // tokens of this sequence in the step, from position seq->num_computed
  int64_t total_blocks = 0;   // block-table size the sequence must have before the step runs
};

struct ScheduleDecision {
  std::vector<ScheduledSeq> scheduled;  // decodes first, then prefill chunks (the forward's order)
  std::vector<Sequence*> paused;        // running sequences to preempt (state dropped, recomputed later)
};

using SchedulePolicy = std::function<ScheduleDecision(const std::vector<Sequence*>& active, const PoolView& pool)>;

// The default (vLLM V1 / SGLang): decodes first (one token each, oldest first), then prefill
// chunks FCFS (unfinished prompts of running sequences and waiting ones, oldest first) until the
// token budget is spent. A running sequence that needs a block when none is free preempts the
// newest running sequence (itself when it is the newest). Waiting sequences never preempt: they
// are admitted in arrival order while a slot, the budget and blocks for at least one token last,
// and the first that cannot be admitted stops admission (no overtaking).
struct DecodeFirstPolicy {
  SchedulerLimits limits;
  ScheduleDecision operator()(const std::vector<Sequence*>& active, const PoolView& pool) const;
};

// TensorRT-LLM's GUARANTEED_NO_EVICT: a sequence is admitted only when blocks for its whole
// footprint (Sequence::max_positions) can be reserved, so nothing is ever preempted. Lower
// occupancy, no recompute. Same order and budget as DecodeFirstPolicy.
struct ReserveFullPolicy {
  SchedulerLimits limits;
  ScheduleDecision operator()(const std::vector<Sequence*>& active, const PoolView& pool) const;
};

enum class PolicyKind { DecodeFirst, ReserveFull };
SchedulePolicy make_policy(PolicyKind kind, const SchedulerLimits& limits);

// One step as plain data: which sequences run, from which position, with how many tokens.
struct StepPlan {
  struct Entry {
    Sequence* seq = nullptr;
    int64_t start = 0;       // position of the first token (= seq->num_computed)
    int64_t num_tokens = 0;  // tokens seq->tokens[start, start + num_tokens)
    bool sample = false;     // the chunk reaches the end of the known tokens: sample the next one
  };
  std::vector<Entry> entries;        // decodes first, then prefill chunks
  std::vector<Sequence*> preempted;  // sent back to waiting by this step
  int64_t num_tokens = 0;
  bool empty() const { return entries.empty(); }
  int64_t num_samples() const;
};

// How a prefix-cache hit rebuilds the sliding-window state (kv/prefix_cache.h).
struct PrefixCaching {
  kv::PrefixCache* cache = nullptr;  // null: no prefix caching
  // > 0: bounded replay of this many tokens before the hit (>= the model's window);
  // 0: exact (the cache holds window-state snapshots; hits end where one exists).
  int64_t replay_keep = 0;
};

class Scheduler {
 public:
  Scheduler(kv::StatePool& pool, SchedulePolicy policy, PrefixCaching caching = {});

  // Queues a sequence (status Waiting, nothing allocated); it must outlive its time here.
  void add(Sequence& seq);
  // Removes a sequence in any unfinished state, giving back its slot and blocks; marks it Finished.
  void abort(Sequence& seq);
  // Marks a sequence Finished after its last token, giving back everything it holds.
  void finish(Sequence& seq);

  // Decides the next step and applies it to the pool. An empty plan means nothing can run.
  StepPlan schedule();
  // After the forward: every entry's tokens are now in the model state.
  void complete(const StepPlan& plan);

  const std::vector<Sequence*>& active() const { return active_; }
  int64_t num_running() const;
  int64_t num_waiting() const;
  int64_t preemptions() const { return preemptions_; }
  const kv::StatePool& pool() const { return pool_; }
  const kv::PrefixCache* prefix_cache() const { return caching_.cache; }
  int64_t replayed_tokens() const { return replayed_tokens_; }  // recomputed by bounded replay, in all

 private:
  struct TentativeHit {
    Sequence* seq;
    int64_t blocks;
    int32_t snapshot_slot;
    bool shortened;
  };
  void release(Sequence& seq);  // gives back slot and blocks
  void remove(Sequence& seq);
  void reset_prefix_state(Sequence& seq);
  // Looks a waiting sequence up in the prefix cache and, on a hit, gives it the cached blocks and
  // the position to compute from; undone after the policy if the sequence is not admitted.
  std::optional<TentativeHit> try_hit(Sequence& seq);
  void register_computed(Sequence& seq);  // caches its newly full blocks (and snapshots, exact mode)
  bool snapshots_on() const;  // exact SWA mode with snapshot slots

  kv::StatePool& pool_;
  SchedulePolicy policy_;
  PrefixCaching caching_;
  std::vector<Sequence*> active_;  // unfinished sequences in arrival order
  uint64_t next_arrival_ = 0;
  int64_t preemptions_ = 0;
  int64_t replayed_tokens_ = 0;
};

}  // namespace deepinfer::engine
