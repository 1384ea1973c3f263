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
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/model_runner.h"
#include "engine/output_text.h"
#include "engine/scheduler.h"
#include "kv/state_pool.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
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
};

struct RequestParams {
  sampling::SamplingParams sampling;  // sampling.seed is ignored: see `seed`
  std::optional<uint64_t> seed;       // empty: the engine picks one (reported in RequestDelta::seed)
  std::vector<std::string> stop;      // stop strings (need a tokenizer); trimmed from the text
  bool skip_special_tokens = true;    // leave special tokens out of the text
  bool return_logits = false;         // report every sampled token's logits row (tests, debugging)
};

// What one request produced in one step.
struct RequestDelta {
  uint64_t id = 0;
  uint64_t seed = 0;                   // the seed its samples are drawn with
  std::vector<int32_t> new_token_ids;  // tokens sampled this step (one; none in a prefill-only step)
  std::string text;                    // text that became final this step
  bool finished = false;
  FinishReason finish_reason = FinishReason::Length;  // when finished
  std::optional<std::string> stop_string;             // the stop string that ended it, if one did
  std::optional<int32_t> stop_token;                  // the EOS / stop token id that ended it, if one did
  std::vector<float> logits;  // return_logits: vocab_size floats per new token
  // When finished: seconds from add_request to the first token and to the last.
  double time_to_first_token = 0, total_time = 0;
};

struct EngineStats {
  int64_t steps = 0;             // steps that ran the model
  int64_t preemptions = 0;       // sequences sent back to waiting for lack of blocks
  int64_t scheduled_tokens = 0;  // tokens run through the model (recomputed ones included)
  int64_t prompt_tokens = 0;     // prompt tokens of added requests
  int64_t generated_tokens = 0;
  int64_t finished_requests = 0, aborted_requests = 0;
};

class LLMEngine {
 public:
  // `tokenizer` may be null (ids only: no text, no stop strings). Both must outlive the engine.
  LLMEngine(const model::CausalLM& model, const Tokenizer* tokenizer, EngineOptions options = {});
  ~LLMEngine();

  // Queues a request and returns its id. Throws Error (and queues nothing) for an empty prompt, ids
  // outside the vocabulary, a prompt longer than the context limit, or invalid parameters.
  uint64_t add_request(std::vector<int32_t> prompt, RequestParams params);
  // Drops an unfinished request, returning its slot and blocks; false if the id is not active.
  bool abort(uint64_t id);
  // Runs one step; returns one delta per request that sampled a token (in forward order).
  std::vector<RequestDelta> step();
  bool has_unfinished() const { return !requests_.empty(); }

  // EOS ids from the model config plus the tokenizer's EOS (sorted, deduplicated).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Positions one sequence may hold: the model's context, capped by what the pool can hold.
  int64_t context_limit() const { return context_limit_; }
  const EngineStats& stats() const { return stats_; }
  const kv::StatePool& pool() const { return pool_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const model::CausalLM& model() const { return model_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }
  const EngineOptions& options() const { return options_; }
  size_t num_requests() const { return requests_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Request {
    Sequence seq;
    RequestParams params;
    OutputText text;
    Clock::time_point arrival, first_token;
  };
  // Appends a sampled token and applies the stop conditions; fills `out`.
  void append_token(Request& req, int32_t token, RequestDelta& out);

  const model::CausalLM& model_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  kv::StatePool pool_;
  Scheduler scheduler_;
  ModelRunner runner_;
  sampling::Sampler sampler_;
  std::vector<int32_t> eos_ids_;
  int64_t context_limit_ = 0;
  uint64_t seed_base_ = 0;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  EngineStats stats_;
};

}  // namespace deepinfer::engine
