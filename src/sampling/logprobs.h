#pragma once
// Log-probabilities reported to the user (vLLM's logprobs / prompt_logprobs). They are read from
// the row as the model produced it, with only the grammar mask applied (vLLM V1's default
// logprobs_mode "raw_logprobs"): temperature, penalties, logit_bias, min_tokens and top-k/p/min-p
// do not change them.
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::sampling {

struct Logprob {
  int32_t token_id = 0;
  float logprob = 0;
};

struct TokenLogprob {
  int32_t token_id = 0;      // the sampled (or prompt) token
  float logprob = 0;         // its log-probability
  int64_t rank = 0;          // 1 + the number of tokens with a strictly higher logprob
  std::vector<Logprob> top;  // the `top_n` most likely tokens, descending (ties: lower id first)
};

// log_softmax(row)[token] with its rank and the top_n most likely tokens. Tokens at -inf (masked)
// never appear in `top`, so it may be shorter than top_n. Computed in double, stored as float.
TokenLogprob token_logprob(std::span<const float> row, int32_t token, int64_t top_n);

// The log-sum-exp of the row (finite entries only; -inf when none): logprob = row[i] - it.
double log_normalizer(std::span<const float> row);

}  // namespace deepinfer::sampling
