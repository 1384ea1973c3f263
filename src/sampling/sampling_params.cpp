#include "sampling/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace deepinfer::sampling {

int StructuredOutputs::kinds_set() const {
  return json.has_value() + regex.has_value() + choice.has_value() + grammar.has_value() + json_object;
}

const char* StructuredOutputs::kind_name() const {
  if (json) return "json";
  if (regex) return "regex";
  if (choice) return "choice";
  if (grammar) return "grammar";
  if (json_object) return "json_object";
  return "";
}

void SamplingParams::validate() const {
  DEEPINFER_CHECK(std::isfinite(temperature) && temperature >= 0.0,
                  "invalid sampling parameter: temperature must be a finite number >= 0 (0 = greedy), got {}",
                  temperature);
  DEEPINFER_CHECK(top_p > 0.0 && top_p <= 1.0, "invalid sampling parameter: top_p must be in (0, 1], got {}", top_p);
  DEEPINFER_CHECK(top_k >= 0, "invalid sampling parameter: top_k must be >= 0 (0 = off), got {}", top_k);
  DEEPINFER_CHECK(min_p >= 0.0 && min_p <= 1.0, "invalid sampling parameter: min_p must be in [0, 1], got {}", min_p);
  DEEPINFER_CHECK(max_tokens >= 1, "invalid sampling parameter: max_tokens must be >= 1, got {}", max_tokens);
  for (int32_t id : stop_token_ids)
    DEEPINFER_CHECK(id >= 0, "invalid sampling parameter: stop token id {} is negative", id);
  DEEPINFER_CHECK(n >= 1, "invalid sampling parameter: n must be >= 1, got {}", n);
  DEEPINFER_CHECK(presence_penalty >= -2.0 && presence_penalty <= 2.0,
                  "invalid sampling parameter: presence_penalty must be in [-2, 2], got {}", presence_penalty);
  DEEPINFER_CHECK(frequency_penalty >= -2.0 && frequency_penalty <= 2.0,
                  "invalid sampling parameter: frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  DEEPINFER_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0,
                  "invalid sampling parameter: repetition_penalty must be a finite number > 0 (1 = off), got {}",
                  repetition_penalty);
  for (const auto& [id, bias] : logit_bias) {
    DEEPINFER_CHECK(id >= 0, "invalid sampling parameter: logit_bias token id {} is negative", id);
    DEEPINFER_CHECK(std::isfinite(bias), "invalid sampling parameter: logit_bias for token {} must be finite, got {}",
                    id, bias);
  }
  DEEPINFER_CHECK(min_tokens >= 0 && min_tokens <= max_tokens,
                  "invalid sampling parameter: min_tokens must be in [0, max_tokens = {}], got {}", max_tokens,
                  min_tokens);
  DEEPINFER_CHECK(!logprobs || (*logprobs >= 0 && *logprobs <= kMaxLogprobs),
                  "invalid sampling parameter: logprobs must be in [0, {}], got {}", kMaxLogprobs, logprobs.value_or(0));
  DEEPINFER_CHECK(!prompt_logprobs || (*prompt_logprobs >= 0 && *prompt_logprobs <= kMaxLogprobs),
                  "invalid sampling parameter: prompt_logprobs must be in [0, {}], got {}", kMaxLogprobs,
                  prompt_logprobs.value_or(0));
  const StructuredOutputs& so = structured_outputs;
  DEEPINFER_CHECK(so.kinds_set() <= 1,
                  "invalid sampling parameter: structured_outputs sets {} kinds of guided decoding; give at most one "
                  "of json, regex, choice, grammar, json_object",
                  so.kinds_set());
  DEEPINFER_CHECK(!so.choice || !so.choice->empty(), "invalid sampling parameter: structured_outputs.choice is empty");
}

void SamplingParams::validate(int64_t vocab_size) const {
  validate();
  for (const auto& [id, bias] : logit_bias)
    DEEPINFER_CHECK(id < vocab_size, "invalid sampling parameter: logit_bias token id {} is outside the vocabulary [0, {})",
                    id, vocab_size);
  for (int32_t id : stop_token_ids)
    DEEPINFER_CHECK(id < vocab_size, "invalid sampling parameter: stop token id {} is outside the vocabulary [0, {})",
                    id, vocab_size);
}

}  // namespace deepinfer::sampling
