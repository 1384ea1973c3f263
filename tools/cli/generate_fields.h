#pragma once
// `generate --input`: the request-line fields beyond the prompt and the basic sampling controls
// (vLLM's names: n, min_p, penalties, logit_bias, min_tokens, include_stop_str_in_output,
// logprobs, prompt_logprobs, skip_special_tokens, structured_outputs), and the JSON of the
// logprobs a result line reports.
#include <deepinfer/llm.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::cli {

// The field names parse_sampling_fields reads.
const std::vector<std::string>& sampling_field_names();

// Reads those fields of `line` (an object) into `params`, checking their JSON types and token ids.
// Throws Error naming the field. Value ranges and the guided-decoding spec are checked after, with
// the rest of the request (cmd_generate.cpp's validate), still before the model loads.
void parse_sampling_fields(const nlohmann::json& line, SamplingParams& params, int64_t vocab_size);

// [{"token_id", "logprob", "rank", "top_logprobs": [{"token_id", "logprob"}, ...]}, ...]
nlohmann::json logprobs_json(const std::vector<TokenLogprob>& logprobs);
// As logprobs_json, with null for the first prompt token (vLLM's shape).
nlohmann::json prompt_logprobs_json(const std::vector<std::optional<TokenLogprob>>& logprobs);

}  // namespace deepinfer::cli
