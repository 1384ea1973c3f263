#pragma once
// The step loop: requests come in with add_request, each step() schedules one batch (decodes
// first, then prefill chunks within the token budget), runs it through the model, samples one
// token per sequence that reached the end of its known tokens, applies the stop conditions and
// returns what every affected request produced. Requests can be aborted between any two steps;
// whatever they held in the state pool goes back at once.
//
//   LLMEngine engine(model, &tokenizer, options);
//   engine.add_request(prompt_ids, params);
//   while (engine.has_unfinished())
//     for (const RequestDelta& d : engine.step()) ...
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/model_runner.h"
#include "engine/output_text.h"
#include "engine/request_engine.h"
#include "engine/scheduler.h"
#include "kv/prefix_cache.h"
#include "kv/state_pool.h"
#include "model/model.h"
#include "sampling/guided_decoding.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "sampling/sequence_sampler.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

struct EngineOptions {
  SchedulerLimits limits;
  PolicyKind policy = PolicyKind::DecodeFirst;
  // State pool budget in bytes; 0 = default_kv_memory_bytes() (a fraction of RAM). The pool never
  // takes more than max_num_seqs sequences of the model's full context need.
  size_t kv_memory_bytes = 0;
  // Seeds for requests that bring none are derived from this (default: random per engine), one
  // per request, so unseeded requests never share a random stream.
  std::optional<uint64_t> seed;
  // Compiled guided-decoding grammars kept (least recently used dropped first).
  size_t grammar_cache_entries = 64;
  // Prefix caching (kv/prefix_cache.h): full blocks of computed prompts and outputs are kept and
  // reused by later sequences that start with the same tokens.
  bool enable_prefix_caching = true;
  // Sliding-window state on a hit. > 0: bounded replay of this many tokens before the hit (must
  // be >= the model's window; approximate, O(keep) work). 0: exact — window-state snapshots at
  // block boundaries are cached as well (`snapshot_slots` slots of the pool) and a hit ends where
  // one exists; outputs then equal uncached ones bit for bit in batch-invariant mode.
  int64_t swa_replay_keep = 140;
  int64_t snapshot_slots = 0;  // exact mode; 0 = max_num_seqs
};

class LLMEngine final : public RequestEngine {
 public:
  // `tokenizer` may be null (ids only: no text, no stop strings). Both must outlive the engine.
  LLMEngine(const model::CausalLM& model, const Tokenizer* tokenizer, EngineOptions options = {});
  ~LLMEngine() override;

  // Queues a request (sampling.n sequences) and returns its id. Throws Error (and queues nothing)
  // for an empty prompt, ids outside the vocabulary, a prompt longer than the context limit, or
  // invalid parameters (a guided-decoding spec that does not compile included: it is compiled
  // here, once per spec, through the engine's bounded grammar cache).
  uint64_t add_request(std::vector<int32_t> prompt, RequestParams params) override;
  // Drops an unfinished request (all its sequences), returning their slots and blocks; false if
  // the id is not active.
  bool abort(uint64_t id) override;
  // Runs one step; returns one delta per sequence that sampled a token (in forward order).
  std::vector<RequestDelta> step() override;
  bool has_unfinished() const override { return !requests_.empty(); }

  // EOS ids from the model config plus the tokenizer's EOS (sorted, deduplicated).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Positions one sequence may hold: the model's context, capped by what the pool can hold.
  int64_t context_limit() const override { return context_limit_; }
  EngineStats stats() const override { return stats_; }
  EngineUsage usage() const override;
  const kv::StatePool& pool() const { return pool_; }
  // Blocks a new sequence could get: free ones plus unreferenced cached ones.
  int64_t available_blocks() const {
    return prefix_cache_ ? prefix_cache_->available_blocks() : pool_.free_block_count();
  }
  // Null when prefix caching is off.
  const kv::PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
  kv::PrefixCache* prefix_cache() { return prefix_cache_.get(); }
  // Test hook: fill every slot with NaN when it is handed out (see kv::StatePool).
  void poison_slots_for_testing(bool on) { pool_.set_poison_slots(on); }
  const Scheduler& scheduler() const { return scheduler_; }
  const model::CausalLM& model() const { return model_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }
  const EngineOptions& options() const { return options_; }
  size_t num_requests() const { return groups_.size(); }
  // The guided-decoding grammar cache (null until the first guided request).
  const sampling::GrammarCache* grammar_cache() const { return grammar_cache_.get(); }

 private:
  using Clock = std::chrono::steady_clock;
  // One sequence: a request with n = 1, or one of the n completions of a request.
  struct Request {
    Sequence seq;
    RequestParams params;
    OutputText text;
    Clock::time_point arrival, first_token;
    uint64_t request_id = 0;  // add_request's id (seq.id for completion 0)
    size_t index = 0;         // completion index
    std::unique_ptr<sampling::SequenceSampler> sampler;
    // prompt_logprobs: entries collected as the prompt's rows come back (completion 0 only).
    std::vector<std::optional<sampling::TokenLogprob>> prompt_logprobs;
    bool prompt_logprobs_sent = false;
  };
  // Appends a sampled token and applies the stop conditions; fills `out`.
  void append_token(Request& req, int32_t token, RequestDelta& out);
  // Records the prompt logprobs of the rows a chunk returned for positions [start, start + count).
  void collect_prompt_logprobs(Request& req, std::span<const float> rows, int64_t start, int64_t count);

  const model::CausalLM& model_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  kv::StatePool pool_;
  std::unique_ptr<kv::PrefixCache> prefix_cache_;  // null when prefix caching is off
  Scheduler scheduler_;
  ModelRunner runner_;
  sampling::Sampler sampler_;
  std::vector<int32_t> eos_ids_;
  int64_t context_limit_ = 0;
  uint64_t seed_base_ = 0;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;  // by sequence id
  std::unordered_map<uint64_t, std::vector<uint64_t>> groups_;       // request id -> its live sequence ids
  std::unique_ptr<sampling::GrammarCache> grammar_cache_;
  sampling::ReasoningTokens reasoning_;  // where a grammar waits for `</think>`
  sampling::SamplingScratch scratch_;
  std::vector<backend::SampleRow> sample_rows_;  // a step's rows when it samples on the backend
  EngineStats stats_;
};

}  // namespace deepinfer::engine
