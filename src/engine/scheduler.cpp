#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::engine {

const char* to_string(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::Waiting: return "waiting";
    case SequenceStatus::Running: return "running";
    case SequenceStatus::Preempted: return "preempted";
    case SequenceStatus::Finished: return "finished";
  }
  return "?";
}

PoolView PoolView::of(const kv::StatePool& pool) {
  return PoolView{pool.free_slot_count(), pool.free_block_count(), pool.layout().block_tokens};
}

void SchedulerLimits::validate() const {
  DEEPINFER_CHECK(max_num_seqs >= 1, "max_num_seqs must be >= 1, got {}", max_num_seqs);
  DEEPINFER_CHECK(max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  DEEPINFER_CHECK(max_prefill_chunk >= 0, "the prefill chunk limit must be >= 0 (0 = the step budget), got {}",
                  max_prefill_chunk);
}

int64_t StepPlan::num_samples() const {
  return std::count_if(entries.begin(), entries.end(), [](const Entry& e) { return e.sample; });
}

namespace {

// Book-keeping shared by the policies while they fill one decision: what is left of the budget,
// the pool and the slots, and which active sequence is scheduled or paused.
struct Draft {
  Draft(const std::vector<Sequence*>& active, const PoolView& pool, const SchedulerLimits& limits)
      : active(active), pool(pool), budget(limits.max_num_batched_tokens), free_blocks(pool.free_blocks),
        free_slots(pool.free_slots), entry(active.size(), -1), paused(active.size(), 0), cursor(active.size()) {
    for (const Sequence* s : active) holding += s->running() ? 1 : 0;
  }

  void schedule(size_t i, int64_t tokens, int64_t total_blocks) {
    Sequence* s = active[i];
    total_blocks = std::max(total_blocks, s->num_blocks());
    entry[i] = static_cast<int32_t>(decision.scheduled.size());
    decision.scheduled.push_back({s, tokens, total_blocks});
    free_blocks -= total_blocks - s->num_blocks();
    budget -= tokens;
    if (!s->running()) {
      --free_slots;
      ++holding;
    }
  }

  // Preempts the newest running sequence not yet paused, refunding what it was given in this
  // decision. Returns true when that sequence is `self` (nothing newer was left to preempt).
  bool preempt_newest(size_t self) {
    while (cursor > 0) {
      const size_t j = --cursor;
      Sequence* s = active[j];
      if (!s->running() || paused[j]) continue;
      paused[j] = 1;
      decision.paused.push_back(s);
      if (entry[j] >= 0) {
        ScheduledSeq& e = decision.scheduled[static_cast<size_t>(entry[j])];
        budget += e.num_tokens;
        free_blocks += e.total_blocks - s->num_blocks();
        e.seq = nullptr;  // dropped below
        entry[j] = -1;
      }
      free_blocks += s->num_blocks() - s->num_shared_blocks;  // shared prefix blocks stay held
      ++free_slots;
      --holding;
      return j == self;
    }
    return true;
  }

  ScheduleDecision finish() {
    std::erase_if(decision.scheduled, [](const ScheduledSeq& e) { return e.seq == nullptr; });
    return std::move(decision);
  }

  const std::vector<Sequence*>& active;
  const PoolView& pool;
  int64_t budget, free_blocks, free_slots, holding = 0;
  std::vector<int32_t> entry;  // index into decision.scheduled, or -1
  std::vector<char> paused;
  size_t cursor;               // victims are taken from active[cursor - 1] downwards (newest first)
  ScheduleDecision decision;
};

bool is_decode(const Sequence& s) { return s.running() && s.remaining() == 1; }

int64_t chunk_size(const Sequence& s, int64_t budget, const SchedulerLimits& limits) {
  int64_t n = std::min(s.remaining(), budget);
  if (limits.max_prefill_chunk > 0) n = std::min(n, limits.max_prefill_chunk);
  for (int64_t stop : s.chunk_stops)
    if (stop > s.num_computed) {
      n = std::min(n, stop - s.num_computed);
      break;
    }
  return n;
}

}  // namespace

ScheduleDecision DecodeFirstPolicy::operator()(const std::vector<Sequence*>& active, const PoolView& pool) const {
  Draft d(active, pool, limits);
  // 1. Decodes, oldest first: one token each, a new block when the token starts one.
  for (size_t i = 0; i < active.size() && d.budget > 0; ++i) {
    Sequence& s = *active[i];
    if (d.paused[i] || !is_decode(s)) continue;
    const int64_t total = pool.blocks_for(s.num_computed + 1);
    bool self_paused = false;
    while (total - s.num_blocks() > d.free_blocks && !(self_paused = d.preempt_newest(i))) {
    }
    if (!self_paused) d.schedule(i, 1, total);
  }
  // 2. Prefill chunks, FCFS over running sequences with prompt left and waiting ones.
  bool admission_closed = false;
  for (size_t i = 0; i < active.size() && d.budget > 0; ++i) {
    Sequence& s = *active[i];
    if (d.paused[i] || d.entry[i] >= 0 || is_decode(s) || s.remaining() <= 0) continue;
    const bool admit = s.waiting();
    if (admit && (admission_closed || d.holding >= limits.max_num_seqs || d.free_slots <= 0)) {
      admission_closed = true;
      continue;
    }
    const int64_t want = chunk_size(s, d.budget, limits);
    // As many tokens as the free blocks hold (a chunk may stop short of its budget).
    auto fit = [&] { return std::min(want, (s.num_blocks() + d.free_blocks) * pool.block_tokens - s.num_computed); };
    int64_t count = fit();
    if (count <= 0 && admit) {
      admission_closed = true;
      continue;
    }
    bool self_paused = false;
    while ((count = fit()) <= 0 && !(self_paused = d.preempt_newest(i))) {
    }
    if (self_paused) continue;
    d.schedule(i, count, pool.blocks_for(s.num_computed + count));
  }
  return d.finish();
}

ScheduleDecision ReserveFullPolicy::operator()(const std::vector<Sequence*>& active, const PoolView& pool) const {
  Draft d(active, pool, limits);
  auto reserve = [&](const Sequence& s, int64_t upto) {
    return std::max(pool.blocks_for(std::max(s.max_positions, upto)), s.num_blocks());
  };
  for (size_t i = 0; i < active.size() && d.budget > 0; ++i) {
    Sequence& s = *active[i];
    if (!is_decode(s)) continue;
    const int64_t total = reserve(s, s.num_computed + 1);
    if (total - s.num_blocks() <= d.free_blocks) d.schedule(i, 1, total);  // always true when max_positions holds
  }
  bool admission_closed = false;
  for (size_t i = 0; i < active.size() && d.budget > 0; ++i) {
    Sequence& s = *active[i];
    if (d.entry[i] >= 0 || is_decode(s) || s.remaining() <= 0) continue;
    const bool admit = s.waiting();
    const int64_t count = chunk_size(s, d.budget, limits);
    const int64_t total = reserve(s, s.num_computed + count);
    const bool fits = total - s.num_blocks() <= d.free_blocks;
    if (admit && (admission_closed || d.holding >= limits.max_num_seqs || d.free_slots <= 0 || !fits)) {
      admission_closed = true;
      continue;
    }
    if (fits) d.schedule(i, count, total);
  }
  return d.finish();
}

SchedulePolicy make_policy(PolicyKind kind, const SchedulerLimits& limits) {
  limits.validate();
  if (kind == PolicyKind::ReserveFull) return ReserveFullPolicy{limits};
  return DecodeFirstPolicy{limits};
}

Scheduler::Scheduler(kv::StatePool& pool, SchedulePolicy policy, PrefixCaching caching)
    : pool_(pool), policy_(std::move(policy)), caching_(caching) {
  DEEPINFER_CHECK(static_cast<bool>(policy_), "the scheduler needs a policy");
  DEEPINFER_CHECK(caching_.replay_keep >= 0, "the replay length must be >= 0, got {}", caching_.replay_keep);
}

bool Scheduler::snapshots_on() const {
  return caching_.cache && caching_.replay_keep == 0 && caching_.cache->snapshot_slots() > 0;
}

void Scheduler::reset_prefix_state(Sequence& seq) {
  seq.num_registered_blocks = 0;
  seq.window_floor = 0;
  seq.cached_until = 0;
  seq.chunk_stops.clear();
  // The last block boundary a later hit could end at (one token must stay to compute).
  if (snapshots_on()) seq.chunk_stops.push_back((seq.num_tokens() - 1) / pool_.layout().block_tokens *
                                                pool_.layout().block_tokens);
}

std::optional<Scheduler::TentativeHit> Scheduler::try_hit(Sequence& seq) {
  // Bounded replay is approximate: a preempted sequence recomputes in full, so preemption never
  // changes what a sequence generates.
  if (caching_.replay_keep > 0 && seq.num_preemptions > 0) return std::nullopt;
  kv::PrefixCache& cache = *caching_.cache;
  const int64_t bt = cache.block_tokens();
  const int64_t max_blocks = (seq.num_tokens() - 1) / bt;  // at least one token left to compute
  cache.extend_keys(seq.tokens, max_blocks, seq.block_keys);
  const bool exact = caching_.replay_keep == 0;
  kv::PrefixCache::Hit hit = cache.acquire(seq.tokens, seq.block_keys, max_blocks, exact);
  TentativeHit t{&seq, static_cast<int64_t>(hit.blocks.size()), hit.snapshot_slot, hit.shortened};
  if (hit.shortened && snapshots_on()) {
    // Exact mode matched more blocks than it has a snapshot for: the end of the match is a branch
    // point (a shared system prompt, say). Stop a chunk there, so the window state gets
    // snapshotted and the next sequence through it hits exactly.
    const int64_t branch = hit.matched_blocks * bt;
    auto& stops = seq.chunk_stops;
    if (std::find(stops.begin(), stops.end(), branch) == stops.end()) {
      stops.push_back(branch);
      std::sort(stops.begin(), stops.end());
    }
  }
  if (hit.blocks.empty()) return t;
  const int64_t end = t.blocks * bt;
  seq.blocks = std::move(hit.blocks);
  seq.num_registered_blocks = t.blocks;
  seq.cached_until = end;
  // Exact: the snapshot restores the window state at `end`. Bounded replay: recompute from
  // end - keep with the window clamped there.
  seq.num_computed = exact ? end : std::max<int64_t>(0, end - caching_.replay_keep);
  seq.window_floor = exact ? 0 : seq.num_computed;
  return t;
}

void Scheduler::register_computed(Sequence& seq) {
  kv::PrefixCache& cache = *caching_.cache;
  const int64_t bt = cache.block_tokens();
  const int64_t full = std::min(seq.num_computed / bt, seq.num_blocks());
  if (full <= seq.num_registered_blocks) return;
  cache.extend_keys(seq.tokens, full, seq.block_keys);
  cache.register_blocks(seq.tokens, seq.block_keys, seq.blocks, seq.num_registered_blocks, full);
  seq.num_registered_blocks = full;
  if (caching_.replay_keep == 0 && seq.num_computed % bt == 0) {
    const uint64_t key = seq.block_keys[static_cast<size_t>(full - 1)];
    cache.take_snapshot(key, *seq.slot);
    // In decode only the newest boundary is kept (what a next turn of the conversation hits), so
    // long generations do not push the prompts' snapshots out.
    if (seq.num_computed > seq.num_prompt_tokens) {
      if (seq.decode_snapshot_key && *seq.decode_snapshot_key != key) cache.drop_snapshot(*seq.decode_snapshot_key);
      seq.decode_snapshot_key = key;
    }
  }
}

void Scheduler::add(Sequence& seq) {
  DEEPINFER_CHECK(seq.num_tokens() >= 1, "request {}: a sequence needs at least one token", seq.id);
  DEEPINFER_CHECK(!seq.slot && seq.blocks.empty(), "request {}: a new sequence must not hold pool resources", seq.id);
  seq.status = SequenceStatus::Waiting;
  seq.num_computed = 0;
  seq.arrival = next_arrival_++;
  reset_prefix_state(seq);
  active_.push_back(&seq);
}

void Scheduler::release(Sequence& seq) {
  if (seq.slot) pool_.free_slot(*seq.slot);
  seq.slot.reset();
  if (caching_.cache)
    caching_.cache->release(seq.blocks);
  else
    pool_.free_blocks(seq.blocks);
  seq.blocks.clear();
}

void Scheduler::remove(Sequence& seq) {
  // active_ is sorted by arrival.
  auto it = std::lower_bound(active_.begin(), active_.end(), seq.arrival,
                             [](const Sequence* s, uint64_t arrival) { return s->arrival < arrival; });
  DEEPINFER_CHECK(it != active_.end() && *it == &seq, "request {} is not in the scheduler", seq.id);
  active_.erase(it);
}

void Scheduler::abort(Sequence& seq) {
  DEEPINFER_CHECK(seq.status != SequenceStatus::Finished, "request {} has already finished", seq.id);
  remove(seq);
  release(seq);
  seq.status = SequenceStatus::Finished;
}

void Scheduler::finish(Sequence& seq) { abort(seq); }

StepPlan Scheduler::schedule() {
  // Prefix-cache lookups for the waiting sequences that could be admitted now (arrival order,
  // one per free slot), so the policy sees what is left to compute and to allocate.
  std::vector<TentativeHit> hits;
  std::vector<std::pair<const Sequence*, int32_t>> restore;  // exact mode: snapshot slot per admitted hit
  if (caching_.cache) {
    int64_t candidates = pool_.free_slot_count();
    for (Sequence* s : active_) {
      if (candidates <= 0) break;
      if (!s->waiting()) continue;
      --candidates;
      if (!s->use_prefix_cache || s->all_prompt_logits || !s->blocks.empty() || s->num_computed != 0) continue;
      if (auto hit = try_hit(*s)) hits.push_back(*hit);
    }
  }
  PoolView view = PoolView::of(pool_);
  if (caching_.cache) {
    view.free_blocks = caching_.cache->available_blocks();
    for (Sequence* s : active_)
      if (s->running())
        s->num_shared_blocks = caching_.cache->shared_blocks(
            std::span<const int32_t>(s->blocks).first(static_cast<size_t>(s->num_registered_blocks)));
  }
  ScheduleDecision decision = policy_(active_, view);
  if (!hits.empty()) {
    std::vector<const Sequence*> admitted;
    for (const ScheduledSeq& e : decision.scheduled) admitted.push_back(e.seq);
    std::sort(admitted.begin(), admitted.end());
    for (const TentativeHit& h : hits) {
      Sequence& s = *h.seq;
      if (std::binary_search(admitted.begin(), admitted.end(), &s)) {
        caching_.cache->record_lookup(s.num_tokens(), h.blocks, h.shortened);
        if (!s.num_cached_tokens) s.num_cached_tokens = std::min(s.cached_until, s.num_prompt_tokens);
        s.num_replayed_tokens += s.cached_until - s.num_computed;
        replayed_tokens_ += s.cached_until - s.num_computed;
        if (h.snapshot_slot >= 0) restore.emplace_back(&s, h.snapshot_slot);
        continue;
      }
      caching_.cache->release(s.blocks);  // not admitted this step: look up again next time
      s.blocks.clear();
      s.num_computed = 0;
      reset_prefix_state(s);
    }
  }
  StepPlan plan;
  for (Sequence* s : decision.paused) {
    DEEPINFER_CHECK(s && s->running(), "the policy paused a sequence that is not running");
    release(*s);
    s->num_computed = 0;
    reset_prefix_state(*s);
    s->status = SequenceStatus::Preempted;
    ++s->num_preemptions;
    ++preemptions_;
    plan.preempted.push_back(s);
  }
  const int64_t block_tokens = pool_.layout().block_tokens;
  for (const ScheduledSeq& e : decision.scheduled) {
    Sequence& s = *e.seq;
    DEEPINFER_CHECK(s.status != SequenceStatus::Finished && e.num_tokens >= 1 && e.num_tokens <= s.remaining(),
                    "the policy scheduled {} tokens of request {} ({}, {} tokens left)", e.num_tokens, s.id,
                    to_string(s.status), s.remaining());
    if (!s.slot) {
      const auto slot = pool_.allocate_slot();
      DEEPINFER_CHECK(slot.has_value(), "the policy scheduled more sequences than there are free slots");
      s.slot = *slot;
      for (const auto& [seq, snapshot] : restore)
        if (seq == &s) pool_.copy_slot(snapshot, *slot);  // the window state at the end of the hit
    }
    if (e.total_blocks > s.num_blocks()) {
      const int64_t n = e.total_blocks - s.num_blocks();
      const bool ok = caching_.cache ? caching_.cache->allocate(n, s.blocks) : pool_.allocate_blocks(n, s.blocks);
      DEEPINFER_CHECK(ok, "the policy scheduled more blocks than are free ({} free)",
                      caching_.cache ? caching_.cache->available_blocks() : pool_.free_block_count());
    }
    DEEPINFER_CHECK(s.num_blocks() * block_tokens >= s.num_computed + e.num_tokens,
                    "request {}: {} blocks do not cover {} positions", s.id, s.num_blocks(),
                    s.num_computed + e.num_tokens);
    s.status = SequenceStatus::Running;
    plan.entries.push_back({&s, s.num_computed, e.num_tokens, s.num_computed + e.num_tokens == s.num_tokens()});
    plan.num_tokens += e.num_tokens;
  }
  return plan;
}

void Scheduler::complete(const StepPlan& plan) {
  for (const auto& e : plan.entries) {
    e.seq->num_computed += e.num_tokens;
    if (caching_.cache) register_computed(*e.seq);
  }
}

int64_t Scheduler::num_running() const {
  return std::count_if(active_.begin(), active_.end(), [](const Sequence* s) { return s->running(); });
}

int64_t Scheduler::num_waiting() const {
  return std::count_if(active_.begin(), active_.end(), [](const Sequence* s) { return s->waiting(); });
}

}  // namespace deepinfer::engine
