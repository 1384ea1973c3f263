#pragma once
// The request-level types of the engine: what a request asks for, what a step reports back for it,
// and the engine's counters.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/finish_reason.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace deepinfer::engine {

// sampling.n > 1: n sequences share the request id, each with its own seed (`seed` + i when set,
// vLLM's rule; derived per sequence otherwise) and reports as RequestDelta::index = i.
struct RequestParams {
  sampling::SamplingParams sampling;  // sampling.seed is ignored: see `seed`
  std::optional<uint64_t> seed;       // empty: the engine picks one (reported in RequestDelta::seed)
  std::vector<std::string> stop;      // stop strings (need a tokenizer); trimmed from the text
  bool include_stop_str_in_output = false;  // keep the matched stop string at the end of the text
  bool skip_special_tokens = true;    // leave special tokens out of the text
  // Report every sampled token's logits row (tests, debugging): the model's row, with the grammar
  // mask applied when guided decoding is active (the row logprobs are read from).
  bool return_logits = false;
};

// What one request produced in one step.
struct RequestDelta {
  uint64_t id = 0;                     // the request id (add_request's)
  size_t index = 0;                    // which of the request's n completions
  uint64_t seed = 0;                   // the seed its samples are drawn with
  std::vector<int32_t> new_token_ids;  // tokens sampled this step (one; none in a prefill-only step)
  std::string text;                    // text that became final this step
  bool finished = false;
  FinishReason finish_reason = FinishReason::Length;  // when finished
  std::optional<std::string> stop_string;             // the stop string that ended it, if one did
  std::optional<int32_t> stop_token;                  // the EOS / stop token id that ended it, if one did
  std::vector<float> logits;  // return_logits: vocab_size floats per new token
  std::vector<sampling::TokenLogprob> logprobs;  // sampling.logprobs: one per new token
  // sampling.prompt_logprobs: in the first delta of completion 0, one entry per prompt token (the
  // first has none, as in vLLM); empty in every other delta.
  std::vector<std::optional<sampling::TokenLogprob>> prompt_logprobs;
  // When finished: seconds from add_request to the first token and to the last.
  double time_to_first_token = 0, total_time = 0;
  // Prompt tokens served by the prefix cache (OpenAI's cached_tokens), once known (first admission).
  int64_t num_cached_tokens = 0;
};

struct EngineStats {
  int64_t steps = 0;             // steps that ran the model
  int64_t preemptions = 0;       // sequences sent back to waiting for lack of blocks
  int64_t scheduled_tokens = 0;  // tokens run through the model (recomputed ones included)
  int64_t prompt_tokens = 0;     // prompt tokens of added requests
  int64_t generated_tokens = 0;
  int64_t finished_requests = 0, aborted_requests = 0;
  int64_t computed_prompt_tokens = 0;  // prompt positions run through the model (replay included)
  int64_t cached_prompt_tokens = 0;    // prompt tokens served by the prefix cache
  int64_t replayed_tokens = 0;         // tokens recomputed by bounded replay after hits
  int64_t backend_sampled_steps = 0;   // steps whose tokens were drawn on the backend (Backend::sample)
};

// Counters of several engines added up (data-parallel ranks).
EngineStats& operator+=(EngineStats& a, const EngineStats& b);

}  // namespace deepinfer::engine
