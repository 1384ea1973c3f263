#include "engine/llm_engine.h"

#include <algorithm>
#include <limits>
#include <random>

#include "core/error.h"
#include "engine/memory_budget.h"
#include "sampling/random.h"

namespace deepinfer::engine {

namespace {

// Window-state snapshot slots the prefix cache holds (exact SWA mode only).
int64_t snapshot_slots(const EngineOptions& options) {
  if (!options.enable_prefix_caching || options.swa_replay_keep > 0) return 0;
  return options.snapshot_slots > 0 ? options.snapshot_slots : options.limits.max_num_seqs;
}

void validate_prefix_caching(const model::CausalLM& model, const EngineOptions& options) {
  int64_t window = 0;
  for (const auto& layer : model.state_layout().layers) window = std::max(window, layer.window.window);
  DEEPINFER_CHECK(options.swa_replay_keep == 0 || options.swa_replay_keep >= window,
                  "swa_replay_keep must be 0 (exact) or >= the model's sliding window ({}), got {}", window,
                  options.swa_replay_keep);
  DEEPINFER_CHECK(options.snapshot_slots >= 0, "snapshot_slots must be >= 0, got {}", options.snapshot_slots);
}

// The pool for max_num_seqs sequences (plus the prefix cache's snapshot slots) within the budget,
// never larger than those sequences can use at the model's full context.
kv::StatePool make_pool(const model::CausalLM& model, const EngineOptions& options) {
  options.limits.validate();
  validate_prefix_caching(model, options);
  const kv::StateLayout& layout = model.state_layout();
  size_t budget = options.kv_memory_bytes ? options.kv_memory_bytes : default_kv_memory_bytes();
  const int64_t slots = options.limits.max_num_seqs + snapshot_slots(options);
  const int64_t context = model.config().max_position_embeddings;
  if (context > 0) {
    const auto seqs = static_cast<size_t>(options.limits.max_num_seqs);
    const size_t useful =
        kv::StatePool::budget_for(layout, slots, static_cast<int64_t>(seqs) * layout.blocks_for(context));
    budget = std::min(budget, useful);
  }
  return kv::StatePool::from_budget(layout, budget, slots, model.backend().allocator());
}

// What a cached block's key must not be shared across: the model's shape and the numerics that
// change what a block holds.
uint64_t model_identity(const model::CausalLM& model, const EngineOptions& options) {
  const io::ModelConfig& c = model.config();
  const std::string id = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", c.model_type, c.vocab_size, c.hidden_size,
                                     c.num_hidden_layers, c.num_attention_heads, c.head_dim, c.sliding_window,
                                     c.compress_rate_csa, c.compress_rate_hca, options.swa_replay_keep,
                                     model.state_layout().block_tokens);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : id) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::unique_ptr<kv::PrefixCache> make_prefix_cache(const model::CausalLM& model, const EngineOptions& options,
                                                   kv::StatePool& pool) {
  if (!options.enable_prefix_caching) return nullptr;
  return std::make_unique<kv::PrefixCache>(pool, model_identity(model, options), snapshot_slots(options));
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

LLMEngine::LLMEngine(const model::CausalLM& model, const Tokenizer* tokenizer, EngineOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      pool_(make_pool(model, options_)),
      prefix_cache_(make_prefix_cache(model, options_, pool_)),
      scheduler_(pool_, make_policy(options_.policy, options_.limits), {prefix_cache_.get(), options_.swa_replay_keep}),
      runner_(model, pool_) {
  for (int64_t id : model_.config().eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_ && tokenizer_->eos_id()) eos_ids_.push_back(*tokenizer_->eos_id());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  const int64_t model_context = model_.config().max_position_embeddings;
  const int64_t pool_positions = pool_.num_blocks() * pool_.layout().block_tokens;
  context_limit_ = model_context > 0 ? std::min(model_context, pool_positions) : pool_positions;
  seed_base_ = options_.seed ? *options_.seed : random_seed();
  if (tokenizer_) reasoning_ = sampling::ReasoningTokens::of(*tokenizer_);
}

LLMEngine::~LLMEngine() = default;

EngineUsage LLMEngine::usage() const {
  EngineUsage u;
  u.running = scheduler_.num_running();
  u.waiting = scheduler_.num_waiting();
  u.blocks_total = pool_.num_blocks();
  u.blocks_in_use = pool_.num_blocks() - available_blocks();
  const int64_t snapshot_slots = prefix_cache_ ? prefix_cache_->snapshot_slots() : 0;
  u.slots_total = pool_.num_slots() - snapshot_slots;
  u.slots_in_use = pool_.num_slots() - pool_.free_slot_count() - snapshot_slots;
  u.pool_bytes = pool_.allocated_bytes();
  u.block_tokens = pool_.layout().block_tokens;
  u.prefix_caching = prefix_cache_ != nullptr;
  if (prefix_cache_) u.prefix = prefix_cache_->stats();
  return u;
}

EngineStats& operator+=(EngineStats& a, const EngineStats& b) {
  a.steps += b.steps;
  a.preemptions += b.preemptions;
  a.scheduled_tokens += b.scheduled_tokens;
  a.prompt_tokens += b.prompt_tokens;
  a.generated_tokens += b.generated_tokens;
  a.finished_requests += b.finished_requests;
  a.aborted_requests += b.aborted_requests;
  a.computed_prompt_tokens += b.computed_prompt_tokens;
  a.cached_prompt_tokens += b.cached_prompt_tokens;
  a.replayed_tokens += b.replayed_tokens;
  a.backend_sampled_steps += b.backend_sampled_steps;
  return a;
}

uint64_t LLMEngine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  const int64_t vocab = model_.vocab_size();
  params.sampling.validate(vocab);
  DEEPINFER_CHECK(!prompt.empty(), "the prompt is empty: at least one token id is needed");
  for (size_t i = 0; i < prompt.size(); ++i)
    DEEPINFER_CHECK(prompt[i] >= 0 && prompt[i] < vocab, "prompt token {} (at index {}) is outside the vocabulary [0, {})",
                    prompt[i], i, vocab);
  const auto length = static_cast<int64_t>(prompt.size());
  const int64_t model_context = model_.config().max_position_embeddings;
  if (model_context > 0 && length > model_context)
    fail("the prompt has {} tokens but the model's context is {} positions", length, model_context);
  DEEPINFER_CHECK(length <= context_limit_,
                  "the prompt has {} tokens but the state pool holds at most {} positions per sequence ({} blocks of {} "
                  "tokens): raise the memory budget (--kv-memory)",
                  length, context_limit_, pool_.num_blocks(), pool_.layout().block_tokens);

  // Everything that can fail happens before anything is queued: the grammar compiles here.
  sampling::SequenceSamplerOptions sampler_options;
  const auto& so = params.sampling.structured_outputs;
  if (so.active()) {
    DEEPINFER_CHECK(tokenizer_, "invalid sampling parameter: structured_outputs needs a tokenizer (the model folder has "
                    "no tokenizer.json)");
    DEEPINFER_CHECK(tokenizer_->eos_id().has_value(),
                    "invalid sampling parameter: structured_outputs needs a tokenizer with an EOS token (it ends the "
                    "guided output)");
    if (!grammar_cache_) grammar_cache_ = std::make_unique<sampling::GrammarCache>(*tokenizer_, options_.grammar_cache_entries);
    sampler_options.grammar = grammar_cache_->get(so);
    if (reasoning_.prompt_in_thinking(prompt)) sampler_options.grammar_after_token = reasoning_.end;
  }
  if (!params.sampling.ignore_eos) sampler_options.stop_ids = eos_ids_;
  sampler_options.stop_ids.insert(sampler_options.stop_ids.end(), params.sampling.stop_token_ids.begin(),
                                  params.sampling.stop_token_ids.end());
  const OutputText stop_check(tokenizer_, params.skip_special_tokens, params.stop);  // throws for bad stop strings

  // n sequences under one request id: the first sequence's id, so n = 1 keeps id == sequence id.
  const uint64_t id = next_id_;
  const auto n = static_cast<size_t>(params.sampling.n);
  next_id_ += n;
  const auto arrival = Clock::now();
  std::vector<uint64_t>& group = groups_[id];
  for (size_t i = 0; i < n; ++i) {
    const uint64_t seq_id = id + i;
    OutputText text(tokenizer_, params.skip_special_tokens, params.stop, params.include_stop_str_in_output,
                    params.sampling.min_tokens);
    auto req = std::make_unique<Request>(Request{Sequence{}, params, std::move(text), arrival, {}, id, i, nullptr, {}, false});
    // Seeded: seed + i (vLLM's rule for n > 1). Unseeded sequences draw distinct streams: a seed
    // derived from the engine's and the sequence id.
    req->params.sampling.seed =
        params.seed ? *params.seed + i : sampling::mix64(seed_base_ + 0x9E3779B97F4A7C15ull * (seq_id + 1));
    req->sampler = std::make_unique<sampling::SequenceSampler>(req->params.sampling, prompt, sampler_options);
    Sequence& seq = req->seq;
    seq.id = seq_id;
    seq.tokens = prompt;
    seq.num_prompt_tokens = length;
    seq.max_positions = std::min(length + req->params.sampling.max_tokens - 1, context_limit_);
    if (i == 0 && params.sampling.prompt_logprobs) {
      req->prompt_logprobs.reserve(prompt.size());
      req->prompt_logprobs.emplace_back();  // the first prompt token has no logprob
      seq.all_prompt_logits = length > 1;
    }
    scheduler_.add(seq);
    group.push_back(seq_id);
    requests_.emplace(seq_id, std::move(req));
  }
  stats_.prompt_tokens += length;
  return id;
}

bool LLMEngine::abort(uint64_t id) {
  const auto group = groups_.find(id);
  if (group == groups_.end()) return false;
  for (uint64_t seq_id : group->second) {
    const auto it = requests_.find(seq_id);
    scheduler_.abort(it->second->seq);
    requests_.erase(it);
  }
  groups_.erase(group);
  ++stats_.aborted_requests;
  return true;
}

void LLMEngine::collect_prompt_logprobs(Request& req, std::span<const float> rows, int64_t start, int64_t count) {
  const auto vocab = static_cast<size_t>(runner_.vocab_size());
  const Sequence& seq = req.seq;
  const int64_t top_n = req.params.sampling.prompt_logprobs.value_or(0);
  // Row k (position start + k) predicts prompt token start + k + 1. Recomputed rows (after a
  // preemption) are skipped; a row that never came back is an error, never a silent gap.
  for (int64_t k = 0; k < count; ++k) {
    const int64_t next = start + k + 1;
    const auto have = static_cast<int64_t>(req.prompt_logprobs.size());
    if (next >= seq.num_prompt_tokens) break;
    if (next < have) continue;
    DEEPINFER_CHECK(next == have, "internal error: request {} lost the prompt logits row of position {}", req.request_id,
                    have - 1);
    req.prompt_logprobs.emplace_back(sampling::token_logprob(rows.subspan(static_cast<size_t>(k) * vocab, vocab),
                                                             seq.tokens[static_cast<size_t>(next)], top_n));
  }
  if (static_cast<int64_t>(req.prompt_logprobs.size()) == seq.num_prompt_tokens) req.seq.all_prompt_logits = false;
}

void LLMEngine::append_token(Request& req, int32_t token, RequestDelta& out) {
  Sequence& seq = req.seq;
  const auto& sp = req.params.sampling;
  if (seq.num_output_tokens() == 0) req.first_token = Clock::now();
  seq.tokens.push_back(token);
  out.new_token_ids.push_back(token);
  ++stats_.generated_tokens;

  // vLLM's order: EOS, stop token ids, stop strings, then the length limits. A grammar ends on its
  // stop token (EOS) even under ignore_eos: nothing may follow a complete guided output.
  const bool eos = !sp.ignore_eos && std::binary_search(eos_ids_.begin(), eos_ids_.end(), token);
  const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), token) != sp.stop_token_ids.end();
  if (eos || stop_id || req.sampler->grammar_finished()) {
    out.finished = true;
    out.finish_reason = FinishReason::Stop;
    out.stop_token = token;
  } else if (req.text.push(token)) {
    out.finished = true;
    out.finish_reason = FinishReason::Stop;
  } else if (seq.num_output_tokens() >= sp.max_tokens || seq.num_tokens() > context_limit_) {
    // Feeding the token back would put it at position num_tokens - 1.
    out.finished = true;
    out.finish_reason = FinishReason::Length;
  }
  if (out.finished && req.text.flush()) out.finish_reason = FinishReason::Stop;
  if (req.text.stopped()) out.stop_string = req.text.matched_stop();
  out.text = req.text.take_delta();
}

std::vector<RequestDelta> LLMEngine::step() {
  std::vector<RequestDelta> outputs;
  if (requests_.empty()) return outputs;
  const StepPlan plan = scheduler_.schedule();
  stats_.preemptions = scheduler_.preemptions();
  DEEPINFER_CHECK(!plan.empty(), "internal error: {} unfinished requests but nothing could be scheduled ({} free blocks)",
                  requests_.size(), pool_.free_block_count());
  // Sampled on the backend (the logits stay on the device) when every row of the step is a plain
  // draw from the model's row; otherwise every row comes to the host.
  const auto vocab = static_cast<size_t>(runner_.vocab_size());
  bool on_backend = true;
  for (const auto& e : plan.entries) {
    if (logit_rows(e) == 0) continue;
    const Request& req = *requests_.at(e.seq->id);
    on_backend = on_backend && !returns_all_rows(e) && e.sample && !req.params.return_logits &&
                 req.sampler->samples_on_backend(static_cast<uint64_t>(req.seq.num_output_tokens()));
  }
  std::span<const float> logits;
  std::span<const int32_t> tokens;
  if (on_backend) {
    sample_rows_.clear();
    for (const auto& e : plan.entries) {
      if (logit_rows(e) == 0) continue;
      Request& req = *requests_.at(e.seq->id);
      sample_rows_.push_back(req.sampler->backend_row(static_cast<uint64_t>(req.seq.num_output_tokens()), vocab));
    }
    tokens = runner_.execute_sampled(plan, sample_rows_);
    if (!sample_rows_.empty()) ++stats_.backend_sampled_steps;
  } else {
    logits = runner_.execute(plan);
  }
  scheduler_.complete(plan);
  ++stats_.steps;
  stats_.scheduled_tokens += plan.num_tokens;
  for (const auto& e : plan.entries)
    stats_.computed_prompt_tokens += std::max<int64_t>(0, std::min(e.start + e.num_tokens, e.seq->num_prompt_tokens) - e.start);
  if (prefix_cache_) {
    stats_.cached_prompt_tokens = prefix_cache_->stats().hit_tokens;
    stats_.replayed_tokens = scheduler_.replayed_tokens();
  }

  size_t row = 0, sampled_row = 0;
  for (const auto& e : plan.entries) {
    const auto rows = static_cast<size_t>(logit_rows(e));
    const auto entry_logits = on_backend ? std::span<const float>() : logits.subspan(row * vocab, rows * vocab);
    row += rows;
    if (rows == 0) continue;
    Request& req = *requests_.at(e.seq->id);
    if (returns_all_rows(e)) collect_prompt_logprobs(req, entry_logits, e.start, static_cast<int64_t>(rows));
    if (!e.sample) continue;
    RequestDelta& out = outputs.emplace_back();
    out.id = req.request_id;
    out.index = req.index;
    out.seed = req.params.sampling.seed;
    out.num_cached_tokens = req.seq.num_cached_tokens.value_or(0);
    // The RNG is keyed by (sequence seed, index of the token being generated): batch-independent.
    sampling::SampledToken sampled;
    if (on_backend) {
      sampled.token = tokens[sampled_row++];
    } else {
      sampled = req.sampler->sample(entry_logits.subspan((rows - 1) * vocab, vocab),
                                    static_cast<uint64_t>(req.seq.num_output_tokens()), sampler_, scratch_,
                                    req.params.return_logits ? &out.logits : nullptr);
    }
    if (sampled.logprob) out.logprobs.push_back(std::move(*sampled.logprob));
    if (req.params.sampling.prompt_logprobs && req.index == 0 && !req.prompt_logprobs_sent) {
      out.prompt_logprobs = std::move(req.prompt_logprobs);
      req.prompt_logprobs_sent = true;
    }
    req.sampler->accept(sampled.token);
    append_token(req, sampled.token, out);
    if (out.finished) {
      const auto now = Clock::now();
      out.time_to_first_token = seconds(req.first_token - req.arrival);
      out.total_time = seconds(now - req.arrival);
      scheduler_.finish(req.seq);
      const uint64_t seq_id = req.seq.id;
      auto& group = groups_.at(req.request_id);
      std::erase(group, seq_id);
      if (group.empty()) {
        groups_.erase(req.request_id);
        ++stats_.finished_requests;
      }
      requests_.erase(seq_id);
    }
  }
  return outputs;
}

}  // namespace deepinfer::engine
