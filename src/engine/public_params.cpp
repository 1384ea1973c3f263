// The public SamplingParams -> the engine's RequestParams (declared in engine/public_params.h).
// Its own file: the request-line fuzz target links it without the engine and model libraries.
#include "engine/public_params.h"

#include "core/error.h"

namespace deepinfer {

engine::RequestParams to_request_params(const SamplingParams& p) {
  DEEPINFER_CHECK(p.top_k >= -1, "invalid sampling parameter: top_k must be >= -1 (0 or -1 = off), got {}", p.top_k);
  engine::RequestParams r;
  r.sampling.n = p.n;
  r.sampling.temperature = p.temperature;
  r.sampling.top_p = p.top_p;
  r.sampling.top_k = p.top_k < 0 ? 0 : p.top_k;
  r.sampling.min_p = p.min_p;
  r.sampling.presence_penalty = p.presence_penalty;
  r.sampling.frequency_penalty = p.frequency_penalty;
  r.sampling.repetition_penalty = p.repetition_penalty;
  r.sampling.logit_bias = p.logit_bias;
  r.sampling.max_tokens = p.max_tokens;
  r.sampling.min_tokens = p.min_tokens;
  r.sampling.stop_token_ids = p.stop_token_ids;
  r.sampling.ignore_eos = p.ignore_eos;
  r.sampling.logprobs = p.logprobs;
  r.sampling.prompt_logprobs = p.prompt_logprobs;
  const StructuredOutputs& so = p.structured_outputs;
  r.sampling.structured_outputs = {so.json, so.regex, so.choice, so.grammar, so.json_object, so.disable_any_whitespace};
  r.sampling.validate();
  r.seed = p.seed;
  r.stop = p.stop;
  r.include_stop_str_in_output = p.include_stop_str_in_output;
  r.skip_special_tokens = p.skip_special_tokens;
  r.return_logits = p.return_logits;
  return r;
}

}  // namespace deepinfer
