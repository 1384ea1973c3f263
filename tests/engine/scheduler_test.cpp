// Scheduler and policies on their own: token budget, decodes first, FCFS, chunking, max sequences,
// block reservation, preemption of the newest, abort. No model runs: a step "runs" by advancing
// num_computed and appending a token where the plan samples.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>
#include <utility>

#include "core/error.h"
#include "engine/fake_model.h"

// Designated initialisers name only the fields a test cares about.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::engine {
namespace {

using Summary = std::vector<std::pair<uint64_t, int64_t>>;  // (request id, tokens) per plan entry

Summary summary(const StepPlan& plan) {
  Summary out;
  for (const auto& e : plan.entries) out.emplace_back(e.seq->id, e.num_tokens);
  return out;
}

class SchedulerTest : public ::testing::Test {
 protected:
  // block_tokens 8 throughout.
  void make(int64_t slots, int64_t blocks, SchedulerLimits limits, PolicyKind kind = PolicyKind::DecodeFirst) {
    pool_ = std::make_unique<kv::StatePool>(model_.state_layout(), slots, blocks);
    sched_ = std::make_unique<Scheduler>(*pool_, make_policy(kind, limits));
  }
  Sequence& add(int64_t prompt, int64_t max_tokens = 1000) {
    Sequence& s = seqs_.emplace_back();
    s.id = seqs_.size() - 1;
    s.tokens.assign(static_cast<size_t>(prompt), 5);
    s.num_prompt_tokens = prompt;
    s.max_positions = prompt + max_tokens - 1;
    sched_->add(s);
    return s;
  }
  // Schedules and "runs" one step.
  StepPlan step() {
    StepPlan plan = sched_->schedule();
    check_pool();
    sched_->complete(plan);
    for (const auto& e : plan.entries)
      if (e.sample) e.seq->tokens.push_back(7);
    return plan;
  }
  // Every running sequence's blocks cover its computed positions, nothing is held twice, and
  // free + held = total.
  void check_pool() const {
    int64_t slots = 0, blocks = 0;
    std::set<int32_t> seen;
    for (const Sequence* s : sched_->active()) {
      if (!s->running()) {
        EXPECT_FALSE(s->slot.has_value());
        EXPECT_TRUE(s->blocks.empty());
        continue;
      }
      ++slots;
      blocks += s->num_blocks();
      for (int32_t b : s->blocks) EXPECT_TRUE(seen.insert(b).second) << "block " << b << " held twice";
    }
    EXPECT_EQ(slots + pool_->free_slot_count(), pool_->num_slots());
    EXPECT_EQ(blocks + pool_->free_block_count(), pool_->num_blocks());
  }

  testing::FakeModel model_;  // block_tokens = 8
  std::unique_ptr<kv::StatePool> pool_;
  std::unique_ptr<Scheduler> sched_;
  std::deque<Sequence> seqs_;
};

TEST_F(SchedulerTest, TokenBudgetChunksPrefillsFcfs) {
  make(8, 100, {.max_num_seqs = 8, .max_num_batched_tokens = 16});
  add(10);
  add(10);
  add(10);
  StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 10}, {1, 6}}));
  EXPECT_EQ(plan.num_tokens, 16);
  EXPECT_TRUE(plan.entries[0].sample);
  EXPECT_FALSE(plan.entries[1].sample);  // its prompt continues next step
  // Next: the decode of 0 first, then 1's remaining 4, then all of 2 (10 < the 11 left).
  plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 4}, {2, 10}}));
  EXPECT_EQ(plan.entries[1].start, 6);
  plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 1}, {2, 1}}));
}

TEST_F(SchedulerTest, DecodesComeFirstAndCanUseTheWholeBudget) {
  make(8, 100, {.max_num_seqs = 8, .max_num_batched_tokens = 4});
  for (int i = 0; i < 4; ++i) add(1);
  step();  // four one-token prompts
  add(20);
  StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));  // the prefill waits
  sched_->abort(seqs_[1]);
  plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {2, 1}, {3, 1}, {4, 1}}));
}

TEST_F(SchedulerTest, PrefillChunkLimitAndSampleOnlyAtTheEnd) {
  make(8, 100, {.max_num_seqs = 8, .max_num_batched_tokens = 100, .max_prefill_chunk = 7});
  Sequence& s = add(20);
  std::vector<int64_t> chunks;
  while (s.num_output_tokens() == 0) {
    const StepPlan plan = step();
    ASSERT_EQ(plan.entries.size(), 1u);
    chunks.push_back(plan.entries[0].num_tokens);
    EXPECT_EQ(plan.entries[0].sample, s.num_output_tokens() == 1);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{7, 7, 6}));
  EXPECT_EQ(s.num_blocks(), 3);  // 20 positions, 8 per block
}

TEST_F(SchedulerTest, MaxNumSeqsCapsRunningSequences) {
  make(8, 100, {.max_num_seqs = 2, .max_num_batched_tokens = 100});
  for (int i = 0; i < 4; ++i) add(3);
  StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 3}, {1, 3}}));
  EXPECT_EQ(sched_->num_running(), 2);
  EXPECT_EQ(sched_->num_waiting(), 2);
  sched_->finish(seqs_[0]);
  plan = step();
  EXPECT_EQ(summary(plan), (Summary{{1, 1}, {2, 3}}));
}

TEST_F(SchedulerTest, BlocksAreReservedBeforeTokensRun) {
  make(4, 100, {.max_num_seqs = 4, .max_num_batched_tokens = 100});
  Sequence& s = add(8);
  step();
  EXPECT_EQ(s.num_blocks(), 1);  // positions 0-7
  step();                        // position 8 starts block 2
  EXPECT_EQ(s.num_blocks(), 2);
  for (int i = 0; i < 7; ++i) step();  // positions 9-15 stay in it
  EXPECT_EQ(s.num_blocks(), 2);
  step();
  EXPECT_EQ(s.num_blocks(), 3);
}

TEST_F(SchedulerTest, WaitingPrefillTakesWhatTheFreeBlocksHold) {
  make(4, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 100});
  add(16);  // 2 blocks
  step();
  add(16);
  add(1);
  // 0 decodes into position 16 (block 3); 1 gets the last block: a chunk of 8; 2 waits.
  const StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 8}}));
  EXPECT_EQ(pool_->free_block_count(), 0);
  EXPECT_TRUE(plan.preempted.empty());  // waiting sequences never preempt
}

TEST_F(SchedulerTest, AdmissionIsFcfsWithoutOvertaking) {
  make(4, 5, {.max_num_seqs = 4, .max_num_batched_tokens = 100}, PolicyKind::ReserveFull);
  add(8, /*max_tokens=*/9);  // 16 positions: 2 blocks
  EXPECT_EQ(summary(step()), (Summary{{0, 8}}));
  add(16, 17);  // 32 positions: 4 blocks, 3 free
  add(1, 1);    // 1 block would fit, but must not overtake
  EXPECT_EQ(summary(step()), (Summary{{0, 1}}));
  sched_->finish(seqs_[0]);
  EXPECT_EQ(summary(step()), (Summary{{1, 16}, {2, 1}}));
}

TEST_F(SchedulerTest, PreemptsTheNewestRunningSequenceAndRecomputesIt) {
  make(4, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 100});
  Sequence& a = add(15);  // 2 blocks
  Sequence& b = add(16);  // 2 blocks: the pool is full
  step();
  EXPECT_EQ(pool_->free_block_count(), 0);
  // a decodes into position 15 (still block 2); b's next position 16 needs a third block:
  // b is the newest, so b itself is preempted.
  StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 1}}));
  ASSERT_EQ(plan.preempted.size(), 1u);
  EXPECT_EQ(plan.preempted[0], &b);
  EXPECT_EQ(b.status, SequenceStatus::Preempted);
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(sched_->preemptions(), 1);
  // b comes back when blocks are free, recomputing its 17 tokens from position 0.
  EXPECT_EQ(a.num_tokens(), 17);
  plan = step();  // a needs block 3 for position 16: 2 blocks free since b left
  EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 8}}));  // b: one free block = 8 positions
  EXPECT_EQ(plan.entries[1].start, 0);
}

TEST_F(SchedulerTest, OlderPrefillPreemptsANewerDecodeAlreadyScheduled) {
  // The newer sequence's decode is scheduled first (decodes first); then the older sequence's
  // next prefill chunk needs a block: the decode is unscheduled, its budget and blocks refunded,
  // and the newer sequence preempted.
  make(4, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 100, .max_prefill_chunk = 8});
  Sequence& a = add(32);
  EXPECT_EQ(summary(step()), (Summary{{0, 8}}));
  Sequence& c = add(8);
  EXPECT_EQ(summary(step()), (Summary{{0, 8}, {1, 8}}));  // 3 blocks used
  const StepPlan plan = step();  // c's decode takes block 4; a's chunk 16-23 needs another
  EXPECT_EQ(summary(plan), (Summary{{0, 8}}));
  ASSERT_EQ(plan.preempted.size(), 1u);
  EXPECT_EQ(plan.preempted[0], &c);
  EXPECT_EQ(a.num_blocks(), 3);
  EXPECT_EQ(pool_->free_block_count(), 1);
}

TEST_F(SchedulerTest, AbortReturnsEverythingInAnyState) {
  make(2, 10, {.max_num_seqs = 2, .max_num_batched_tokens = 12});
  Sequence& a = add(20);
  Sequence& b = add(5);
  Sequence& c = add(5);
  step();  // a: 12 of 20 (2 blocks); b, c wait (budget)
  EXPECT_TRUE(a.running());
  sched_->abort(c);  // waiting
  EXPECT_EQ(c.status, SequenceStatus::Finished);
  sched_->abort(a);  // running, mid-prefill
  EXPECT_EQ(pool_->free_block_count(), 10);
  EXPECT_EQ(pool_->free_slot_count(), 2);
  EXPECT_THROW(sched_->abort(a), Error);
  step();
  EXPECT_TRUE(b.running());
  sched_->abort(b);
  EXPECT_EQ(pool_->free_block_count(), 10);
  EXPECT_EQ(pool_->free_slot_count(), 2);
  EXPECT_TRUE(sched_->active().empty());
  EXPECT_TRUE(sched_->schedule().empty());
}

TEST_F(SchedulerTest, ReserveFullPolicyNeverPreempts) {
  make(4, 6, {.max_num_seqs = 4, .max_num_batched_tokens = 100}, PolicyKind::ReserveFull);
  Sequence& a = add(8, /*max_tokens=*/17);  // 24 positions: 3 blocks reserved up front
  Sequence& b = add(8, 17);
  Sequence& c = add(8, 17);
  StepPlan plan = step();
  EXPECT_EQ(summary(plan), (Summary{{0, 8}, {1, 8}}));  // c waits: only 0 blocks would be left
  EXPECT_EQ(a.num_blocks(), 3);
  EXPECT_EQ(pool_->free_block_count(), 0);
  for (int i = 0; i < 15; ++i) {
    plan = step();
    EXPECT_TRUE(plan.preempted.empty());
    EXPECT_EQ(summary(plan), (Summary{{0, 1}, {1, 1}}));
  }
  EXPECT_EQ(a.num_computed, 23);
  sched_->finish(a);
  plan = step();
  EXPECT_EQ(summary(plan), (Summary{{1, 1}, {2, 8}}));
  EXPECT_EQ(c.num_blocks(), 3);
  EXPECT_EQ(sched_->preemptions(), 0);
  (void)b;
}

TEST_F(SchedulerTest, PoliciesAreFunctionsOfTheirInputs) {
  // A policy can be called on its own: no pool needed, nothing changes.
  std::vector<Sequence> seqs(3);
  std::vector<Sequence*> active;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].id = i;
    seqs[i].arrival = i;
    seqs[i].tokens.assign(10, 3);
    seqs[i].num_prompt_tokens = 10;
    active.push_back(&seqs[i]);
  }
  const DecodeFirstPolicy policy{{.max_num_seqs = 2, .max_num_batched_tokens = 15}};
  const ScheduleDecision d = policy(active, PoolView{.free_slots = 2, .free_blocks = 100, .block_tokens = 8});
  ASSERT_EQ(d.scheduled.size(), 2u);
  EXPECT_EQ(d.scheduled[0].seq, &seqs[0]);
  EXPECT_EQ(d.scheduled[0].num_tokens, 10);
  EXPECT_EQ(d.scheduled[0].total_blocks, 2);
  EXPECT_EQ(d.scheduled[1].num_tokens, 5);
  EXPECT_EQ(d.scheduled[1].total_blocks, 1);
  EXPECT_TRUE(d.paused.empty());
  EXPECT_EQ(seqs[0].status, SequenceStatus::Waiting);
}

TEST(SchedulerLimits, RejectsNonsense) {
  EXPECT_THROW((SchedulerLimits{.max_num_seqs = 0}.validate()), Error);
  EXPECT_THROW((SchedulerLimits{.max_num_batched_tokens = 0}.validate()), Error);
  EXPECT_THROW((SchedulerLimits{.max_prefill_chunk = -1}.validate()), Error);
  EXPECT_NO_THROW(SchedulerLimits{}.validate());
}

}  // namespace
}  // namespace deepinfer::engine
