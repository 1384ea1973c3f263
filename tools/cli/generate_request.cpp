#include "cli/generate_request.h"

#include <set>

#include "cli/generate_fields.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_excerpt.h"
#include "engine/public_params.h"
#include "sampling/guided_decoding.h"
#include "sampling/sampling_params.h"

namespace deepinfer::cli {

using nlohmann::json;

// The checks the engine makes (the guided-decoding spec parsed by the grammar front end), so a bad
// flag or line fails before the weights load.
void validate(const SamplingParams& p, int64_t vocab_size) {
  const engine::RequestParams r = to_request_params(p);
  r.sampling.validate(vocab_size);
  sampling::check_structured_outputs(r.sampling.structured_outputs);
}

namespace {

const std::vector<std::string> kBasicFields = {"prompt", "prompt_token_ids", "max_tokens", "temperature", "top_p",
                                               "top_k", "seed", "stop", "stop_token_ids", "ignore_eos"};

// Every field a line may hold, and their list for the error message.
const std::set<std::string>& known_fields() {
  static const std::set<std::string> kAll = [] {
    std::set<std::string> all(kBasicFields.begin(), kBasicFields.end());
    all.insert(sampling_field_names().begin(), sampling_field_names().end());
    return all;
  }();
  return kAll;
}

std::string known_field_list() {
  std::string out;
  for (const auto& names : {kBasicFields, sampling_field_names()})
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<int32_t> token_id_list(const json& value, const std::string& field, int64_t vocab) {
  DEEPINFER_CHECK(value.is_array(), "'{}' must be an array of token ids, got {}", field, value.type_name());
  std::vector<int32_t> ids;
  for (const auto& v : value) {
    DEEPINFER_CHECK(v.is_number_integer(), "'{}' must hold integers, found {}", field, json_excerpt(v));
    const auto id = v.get<int64_t>();
    DEEPINFER_CHECK(id >= 0 && id < vocab, "'{}': token id {} is outside the vocabulary [0, {})", field, id, vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

FileRequest parse_request(const std::string& line, const SamplingParams& defaults, const io::ModelConfig& config,
                          const std::optional<Tokenizer>& tokenizer) {
  // Deeper JSON is refused before anything recursive (dump of a schema) sees it.
  const size_t depth = json_nesting_depth(line);
  DEEPINFER_CHECK(depth <= kMaxRequestJsonDepth, "the line nests JSON {} levels deep (at most {})", depth,
                  kMaxRequestJsonDepth);
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 9e999999
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    fail("invalid JSON ({})", what);
  }
  DEEPINFER_CHECK(j.is_object(), "expected a JSON object like {{\"prompt\": \"text\"}}, got {}", j.type_name());
  for (const auto& [key, value] : j.items())
    DEEPINFER_CHECK(known_fields().count(key), "unknown field '{}' (known: {})", key, known_field_list());
  DEEPINFER_CHECK(j.contains("prompt") != j.contains("prompt_token_ids"),
                  "give exactly one of 'prompt' (text) or 'prompt_token_ids' (a list of ids)");
  FileRequest r;
  r.params = defaults;
  r.params.skip_special_tokens = true;  // vLLM's default for returned text
  r.params.seed.reset();                // unseeded lines get the engine's per-request seeds
  if (j.contains("prompt")) {
    const auto& p = j["prompt"];
    DEEPINFER_CHECK(p.is_string(), "'prompt' must be a string, got {}", p.type_name());
    DEEPINFER_CHECK(!p.get<std::string>().empty(), "'prompt' is empty");
    DEEPINFER_CHECK(tokenizer.has_value(), "the model folder has no tokenizer.json, so 'prompt' text cannot be encoded: "
                    "use 'prompt_token_ids'");
    r.prompt_ids = tokenizer->encode_with_bos(p.get<std::string>());
    DEEPINFER_CHECK(!r.prompt_ids.empty(), "'prompt' encodes to no tokens");
  } else {
    r.prompt_ids = token_id_list(j["prompt_token_ids"], "prompt_token_ids", config.vocab_size);
    DEEPINFER_CHECK(!r.prompt_ids.empty(), "'prompt_token_ids' is empty");
  }
  const int64_t context = config.max_position_embeddings;
  DEEPINFER_CHECK(context <= 0 || static_cast<int64_t>(r.prompt_ids.size()) <= context,
                  "the prompt has {} tokens but the model's context is {} positions", r.prompt_ids.size(), context);
  auto number = [&](const char* field) -> std::optional<json> {
    if (!j.contains(field)) return std::nullopt;
    DEEPINFER_CHECK(j[field].is_number(), "'{}' must be a number, got {}", field, j[field].type_name());
    return j[field];
  };
  auto integer = [&](const char* field) -> std::optional<json> {
    if (!j.contains(field)) return std::nullopt;
    DEEPINFER_CHECK(j[field].is_number_integer(), "'{}' must be an integer, got {}", field, json_excerpt(j[field]));
    return j[field];
  };
  if (auto v = integer("max_tokens")) {
    DEEPINFER_CHECK(v->get<int64_t>() >= 1, "'max_tokens' must be >= 1, got {}", v->dump());
    r.params.max_tokens = v->get<int64_t>();
  }
  if (auto v = number("temperature")) r.params.temperature = v->get<double>();
  if (auto v = number("top_p")) r.params.top_p = v->get<double>();
  if (auto v = integer("top_k")) r.params.top_k = v->get<int64_t>();
  if (auto v = integer("seed")) {
    DEEPINFER_CHECK(v->is_number_unsigned(), "'seed' must be a non-negative integer, got {}", v->dump());
    r.params.seed = v->get<uint64_t>();
  }
  if (j.contains("stop")) {
    const auto& s = j["stop"];
    DEEPINFER_CHECK(s.is_string() || s.is_array(), "'stop' must be a string or an array of strings, got {}",
                    s.type_name());
    r.params.stop.clear();
    for (const auto& item : s.is_string() ? json::array({s}) : s) {
      DEEPINFER_CHECK(item.is_string(), "'stop' must hold strings, found {}", json_excerpt(item));
      DEEPINFER_CHECK(!item.get<std::string>().empty(), "'stop' strings must not be empty");
      r.params.stop.push_back(item.get<std::string>());
    }
    DEEPINFER_CHECK(r.params.stop.empty() || tokenizer.has_value(),
                    "'stop' strings need a tokenizer (the model folder has no tokenizer.json)");
  }
  if (j.contains("stop_token_ids"))
    r.params.stop_token_ids = token_id_list(j["stop_token_ids"], "stop_token_ids", config.vocab_size);
  if (j.contains("ignore_eos")) {
    DEEPINFER_CHECK(j["ignore_eos"].is_boolean(), "'ignore_eos' must be true or false, got {}", json_excerpt(j["ignore_eos"]));
    r.params.ignore_eos = j["ignore_eos"].get<bool>();
  }
  parse_sampling_fields(j, r.params, config.vocab_size);
  validate(r.params, config.vocab_size);
  return r;
}

}  // namespace deepinfer::cli
