#pragma once
// What a request asks of the sampler and the generation loop, with vLLM's names and semantics.
// validate() rejects nonsense up front so a bad request fails with a clear message naming the field
// instead of producing odd tokens.
//
// How a logits row becomes a token (vLLM V1's order):
//   grammar mask (guided decoding)            -> logprobs are read here ("raw" logprobs)
//   logit_bias, min_tokens (stop ids masked), repetition / frequency / presence penalties
//   temperature (0 = greedy argmax of the processed row), min_p, top_k, top_p, one draw.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::sampling {

// Guided decoding (vLLM's StructuredOutputsParams): at most one kind may be set.
struct StructuredOutputs {
  std::optional<std::string> json;                 // a JSON Schema (JSON text)
  std::optional<std::string> regex;                // the whole output matches it
  std::optional<std::vector<std::string>> choice;  // the output is exactly one of these strings
  std::optional<std::string> grammar;              // GBNF (llama.cpp's EBNF dialect), start rule `root`
  bool json_object = false;                        // any JSON object
  bool disable_any_whitespace = false;             // JSON kinds: no whitespace between tokens

  int kinds_set() const;
  bool active() const { return kinds_set() > 0; }
  const char* kind_name() const;  // "json", "regex", ... of the (first) kind set; "" when none
};

// The largest logprobs / prompt_logprobs count (vLLM's default max_logprobs).
inline constexpr int64_t kMaxLogprobs = 20;

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy (argmax, ties -> lowest id)
  double top_p = 1.0;        // nucleus mass kept, in (0, 1]; 1 = off
  int64_t top_k = 0;         // keep the k most likely tokens; 0 = off
  // Drop tokens whose probability (after temperature) is below min_p times the top token's; 0 = off.
  double min_p = 0.0;
  uint64_t seed = 0;         // same seed + same logits -> same tokens
  int64_t max_tokens = 64;   // generated tokens at most (stop tokens included)
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids
  bool ignore_eos = false;   // keep generating past EOS (benchmarks); stop_token_ids still apply

  int64_t n = 1;  // completions per prompt, each its own sequence (the engine derives their seeds)
  // OpenAI's penalties over the generated tokens, in [-2, 2]: logit -= frequency * count, and
  // logit -= presence once a token has appeared.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  // CTRL's penalty over prompt and generated tokens, > 0 (1 = off): a positive logit of a token
  // seen is divided by it, a negative one multiplied.
  double repetition_penalty = 1.0;
  std::vector<std::pair<int32_t, double>> logit_bias;  // token id -> added to its logit
  int64_t min_tokens = 0;  // EOS and stop_token_ids are masked until this many tokens were generated
  // Top-N logprobs per generated token (0: the sampled token's only), 0..kMaxLogprobs.
  std::optional<int64_t> logprobs;
  // For every prompt token but the first: its logprob and the top N, 0..kMaxLogprobs.
  std::optional<int64_t> prompt_logprobs;
  StructuredOutputs structured_outputs;

  // Throws deepinfer::Error naming the first invalid field.
  void validate() const;
  // validate() plus the checks that need the vocabulary: logit_bias and stop token ids.
  void validate(int64_t vocab_size) const;
  bool greedy() const { return temperature == 0.0 || top_k == 1; }
  bool has_penalties() const {
    return presence_penalty != 0.0 || frequency_penalty != 0.0 || repetition_penalty != 1.0;
  }
};

}  // namespace deepinfer::sampling
