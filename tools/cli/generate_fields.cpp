#include "cli/generate_fields.h"
#include "core/json_excerpt.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "core/error.h"

namespace deepinfer::cli {
namespace {

using nlohmann::json;

const json* field(const json& line, const char* name) {
  const auto it = line.find(name);
  return it == line.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& v, const char* name) {
  DEEPINFER_CHECK(v.is_number(), "'{}' must be a number, got {}", name, json_excerpt(v));
  return v.get<double>();
}

int64_t integer(const json& v, const char* name) {
  DEEPINFER_CHECK(v.is_number_integer(), "'{}' must be an integer, got {}", name, json_excerpt(v));
  return v.get<int64_t>();
}

bool boolean(const json& v, const char* name) {
  DEEPINFER_CHECK(v.is_boolean(), "'{}' must be true or false, got {}", name, json_excerpt(v));
  return v.get<bool>();
}

std::string string(const json& v, const std::string& name) {
  DEEPINFER_CHECK(v.is_string(), "'{}' must be a string, got {}", name, json_excerpt(v));
  return v.get<std::string>();
}

// logit_bias: {"17": 2.5, "40": -100} (OpenAI / vLLM: token ids as strings).
std::vector<std::pair<int32_t, double>> logit_bias(const json& v, int64_t vocab) {
  DEEPINFER_CHECK(v.is_object(), "'logit_bias' must be an object of token id -> bias, got {}", json_excerpt(v));
  std::vector<std::pair<int32_t, double>> out;
  for (const auto& [key, bias] : v.items()) {
    errno = 0;
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    DEEPINFER_CHECK(!key.empty() && *end == '\0' && errno == 0, "'logit_bias': key '{}' is not a token id", key);
    DEEPINFER_CHECK(id >= 0 && id < vocab, "'logit_bias': token id {} is outside the vocabulary [0, {})", id, vocab);
    DEEPINFER_CHECK(bias.is_number(), "'logit_bias': the bias of token {} must be a number, got {}", id, json_excerpt(bias));
    out.emplace_back(static_cast<int32_t>(id), bias.get<double>());
  }
  return out;
}

// "structured_outputs": {"json": {...} | "schema text"} or {"regex": ...}, {"grammar": ...},
// {"choice": [...]}, {"json_object": true}; optionally "disable_any_whitespace".
StructuredOutputs structured_outputs(const json& v) {
  DEEPINFER_CHECK(v.is_object(), "'structured_outputs' must be an object like {{\"regex\": \"[0-9]+\"}}, got {}",
                  v.type_name());
  static const std::set<std::string> kKeys = {"json", "regex", "grammar", "choice", "json_object",
                                              "disable_any_whitespace"};
  StructuredOutputs so;
  for (const auto& [key, value] : v.items()) {
    DEEPINFER_CHECK(kKeys.count(key),
                    "unknown field 'structured_outputs.{}' (known: json, regex, grammar, choice, json_object, "
                    "disable_any_whitespace)",
                    key);
    if (value.is_null()) continue;
    if (key == "json") {
      DEEPINFER_CHECK(value.is_object() || value.is_boolean() || value.is_string(),
                      "'structured_outputs.json' must be a JSON Schema (an object), got {}", value.type_name());
      so.json = value.is_string() ? value.get<std::string>() : value.dump();
    } else if (key == "regex" || key == "grammar") {
      (key == "regex" ? so.regex : so.grammar) = string(value, "structured_outputs." + key);
    } else if (key == "choice") {
      DEEPINFER_CHECK(value.is_array(), "'structured_outputs.choice' must be an array of strings, got {}",
                      value.type_name());
      so.choice.emplace();
      for (const auto& c : value) so.choice->push_back(string(c, "structured_outputs.choice"));
    } else if (key == "json_object") {
      so.json_object = boolean(value, "structured_outputs.json_object");
    } else {
      so.disable_any_whitespace = boolean(value, "structured_outputs.disable_any_whitespace");
    }
  }
  return so;
}

json token_logprob_json(const TokenLogprob& t) {
  json top = json::array();
  for (const auto& l : t.top) top.push_back({{"token_id", l.token_id}, {"logprob", l.logprob}});
  return {{"token_id", t.token_id}, {"logprob", t.logprob}, {"rank", t.rank}, {"top_logprobs", std::move(top)}};
}

}  // namespace

const std::vector<std::string>& sampling_field_names() {
  static const std::vector<std::string> kNames = {
      "n",          "min_p",           "presence_penalty", "frequency_penalty",   "repetition_penalty",
      "logit_bias", "min_tokens",      "include_stop_str_in_output", "logprobs", "prompt_logprobs",
      "skip_special_tokens", "structured_outputs"};
  return kNames;
}

void parse_sampling_fields(const json& line, SamplingParams& params, int64_t vocab_size) {
  if (auto v = field(line, "n")) {
    params.n = integer(*v, "n");
    DEEPINFER_CHECK(params.n >= 1, "'n' must be >= 1, got {}", params.n);
  }
  if (auto v = field(line, "min_p")) params.min_p = number(*v, "min_p");
  if (auto v = field(line, "presence_penalty")) params.presence_penalty = number(*v, "presence_penalty");
  if (auto v = field(line, "frequency_penalty")) params.frequency_penalty = number(*v, "frequency_penalty");
  if (auto v = field(line, "repetition_penalty")) params.repetition_penalty = number(*v, "repetition_penalty");
  if (auto v = field(line, "logit_bias")) params.logit_bias = logit_bias(*v, vocab_size);
  if (auto v = field(line, "min_tokens")) params.min_tokens = integer(*v, "min_tokens");
  if (auto v = field(line, "include_stop_str_in_output"))
    params.include_stop_str_in_output = boolean(*v, "include_stop_str_in_output");
  if (auto v = field(line, "logprobs")) params.logprobs = integer(*v, "logprobs");
  if (auto v = field(line, "prompt_logprobs")) params.prompt_logprobs = integer(*v, "prompt_logprobs");
  if (auto v = field(line, "skip_special_tokens")) params.skip_special_tokens = boolean(*v, "skip_special_tokens");
  if (auto v = field(line, "structured_outputs")) params.structured_outputs = structured_outputs(*v);
}

json logprobs_json(const std::vector<TokenLogprob>& logprobs) {
  json out = json::array();
  for (const auto& t : logprobs) out.push_back(token_logprob_json(t));
  return out;
}

json prompt_logprobs_json(const std::vector<std::optional<TokenLogprob>>& logprobs) {
  json out = json::array();
  for (const auto& t : logprobs) out.push_back(t ? token_logprob_json(*t) : json(nullptr));
  return out;
}

}  // namespace deepinfer::cli
