#include "serve/protocol/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "core/json_excerpt.h"
#include "serve/protocol/api_error.h"
#include "serve/protocol/field_reader.h"
#include "structured/grammar.h"
#include "structured/grammar_compiler.h"

namespace deepinfer::serve {

using encoding::Json;

namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxLogprobs = 20;  // vLLM's default max_logprobs
constexpr int64_t kMaxN = 128;

// A guided-decoding spec is compiled here (no tokenizer needed) so that an unsupported or invalid
// schema comes back typed, naming the keyword, before the request is queued.
void check_grammar(structured::GrammarKind kind, const std::string& text, const std::string& param) {
  try {
    structured::compile_grammar({.kind = kind, .text = text, .json_options = {}});
  } catch (const structured::GrammarError& e) {
    const bool unsupported = e.kind() == structured::GrammarErrorKind::kUnsupported;
    throw bad_request(fmt::format("{}: {}", param, e.what()), param,
                      unsupported ? "unsupported_schema_keyword:" + e.keyword() : "invalid_schema");
  }
}

void check_structured_outputs(const StructuredOutputs& so, const std::string& param) {
  using structured::GrammarKind;
  const int kinds = so.json.has_value() + so.regex.has_value() + so.grammar.has_value() + so.choice.has_value() +
                    so.json_object;
  if (kinds > 1) throw bad_request(fmt::format("'{}': give one kind of constraint, got {}", param, kinds), param);
  if (so.json) check_grammar(GrammarKind::kJsonSchema, *so.json, param + ".json");
  if (so.regex) check_grammar(GrammarKind::kRegex, *so.regex, param + ".regex");
  if (so.grammar) check_grammar(GrammarKind::kEbnf, *so.grammar, param + ".grammar");
  if (so.choice && so.choice->empty()) throw bad_request(fmt::format("'{}.choice' is empty", param), param + ".choice");
}

// vLLM's structured_outputs object: {"json": schema} | {"regex"} | {"grammar"} | {"choice"} | {"json_object"}.
StructuredOutputs structured_outputs(const Json& v, const std::string& param) {
  if (!v.is_object()) throw bad_request(fmt::format("'{}' must be an object", param), param);
  FieldReader f(v, param + ".");
  StructuredOutputs so;
  if (const Json* j = f.get("json")) {
    if (!j->is_object() && !j->is_string() && !j->is_boolean())
      throw bad_request(fmt::format("'{}.json' must be a JSON Schema object", param), param + ".json");
    so.json = j->is_string() ? j->get<std::string>() : j->dump();
  }
  so.regex = f.string("regex");
  so.grammar = f.string("grammar");
  so.choice = f.strings("choice");
  so.json_object = f.boolean("json_object").value_or(false);
  so.disable_any_whitespace = f.boolean("disable_any_whitespace").value_or(false);
  f.finish();
  check_structured_outputs(so, param);
  return so;
}

std::vector<std::pair<int32_t, double>> logit_bias(const Json& v, int64_t vocab) {
  if (!v.is_object()) throw bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
  std::vector<std::pair<int32_t, double>> out;
  for (const auto& [key, bias] : v.items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= vocab)
      throw bad_request(fmt::format("'logit_bias': '{}' is not a token id in [0, {})", key, vocab), "logit_bias");
    if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100)
      throw bad_request(fmt::format("'logit_bias': the bias of token {} must be a number in [-100, 100]", id),
                        "logit_bias");
    out.emplace_back(static_cast<int32_t>(id), bias.get<double>());
  }
  return out;
}

// Fields both endpoints share.
void parse_common(FieldReader& f, GenerationRequest& r, int64_t vocab, bool chat) {
  r.model = f.string("model").value_or("");
  SamplingParams& p = r.params;
  std::optional<int64_t> max_tokens = f.integer("max_tokens", 1, kMaxInt);
  if (chat) {
    if (auto m = f.integer("max_completion_tokens", 1, kMaxInt)) max_tokens = m;
  }
  if (max_tokens) {
    p.max_tokens = *max_tokens;
    r.max_tokens_given = true;
  }
  p.temperature = f.number("temperature", 0, 2).value_or(1.0);
  p.top_p = f.number("top_p", 0, 1).value_or(1.0);
  if (p.top_p <= 0) throw bad_request("'top_p' must be in (0, 1], got 0", "top_p");
  p.n = f.integer("n", 1, kMaxN).value_or(1);
  p.presence_penalty = f.number("presence_penalty", -2, 2).value_or(0);
  p.frequency_penalty = f.number("frequency_penalty", -2, 2).value_or(0);
  if (const Json* b = f.get("logit_bias")) p.logit_bias = logit_bias(*b, vocab);
  if (auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(), kMaxInt))
    p.seed = static_cast<uint64_t>(*seed);
  if (auto stop = f.strings("stop")) {
    for (const auto& s : *stop)
      if (s.empty()) throw bad_request("'stop' strings must not be empty", "stop");
    p.stop = *stop;
  }
  r.stream.stream = f.boolean("stream").value_or(false);
  if (const Json* so = f.get("stream_options")) {
    if (!so->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    if (!r.stream.stream) throw bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
    FieldReader s(*so, "stream_options.");
    r.stream.include_usage = s.boolean("include_usage").value_or(false);
    r.stream.continuous_usage_stats = s.boolean("continuous_usage_stats").value_or(false);
    s.finish();
  }
  // vLLM's extra sampling parameters.
  p.top_k = f.integer("top_k", -1, vocab).value_or(0);
  p.min_p = f.number("min_p", 0, 1).value_or(0);
  p.repetition_penalty = f.number("repetition_penalty", 1e-6, 1e6).value_or(1.0);
  p.min_tokens = f.integer("min_tokens", 0, kMaxInt).value_or(0);
  p.ignore_eos = f.boolean("ignore_eos").value_or(false);
  if (auto ids = f.token_ids("stop_token_ids", vocab)) p.stop_token_ids = *ids;
  p.skip_special_tokens = f.boolean("skip_special_tokens").value_or(true);
  p.include_stop_str_in_output = f.boolean("include_stop_str_in_output").value_or(false);
  if (const Json* so = f.get("structured_outputs")) p.structured_outputs = structured_outputs(*so, "structured_outputs");
  // Accepted, no effect here: end-user ids, storage and routing hints of OpenAI's platform.
  f.ignore({"user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key", "request_id",
            "priority"});
}

Json parse_response_format(const Json& v, ChatCompletionRequest& r) {
  if (!v.is_object()) throw bad_request("'response_format' must be an object", "response_format");
  // structured_outputs may add options (disable_any_whitespace) but not a second constraint.
  const StructuredOutputs& so = r.params.structured_outputs;
  if (so.json || so.regex || so.grammar || so.choice || so.json_object)
    throw bad_request("give 'response_format' or a 'structured_outputs' constraint, not both", "response_format");
  FieldReader f(v, "response_format.");
  const std::string type = f.string("type").value_or("");
  if (type == "json_schema") {
    const Json* js = f.get("json_schema");
    if (!js || !js->is_object())
      throw bad_request("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
    FieldReader s(*js, "response_format.json_schema.");
    s.string("name");
    s.string("description");
    s.boolean("strict");
    const Json* schema = s.get("schema");
    s.finish();
    const std::string text = schema ? schema->dump() : "{}";
    check_grammar(structured::GrammarKind::kJsonSchema, text, "response_format.json_schema.schema");
    r.params.structured_outputs.json = text;
  } else if (type == "json_object") {
    r.params.structured_outputs.json_object = true;
  } else if (type != "text") {
    throw bad_request(fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'", type),
                      "response_format.type");
  }
  f.finish();
  return v;
}

void parse_tools(FieldReader& f, ChatCompletionRequest& r) {
  const Json* tools = f.get("tools");
  std::string choice = "auto";
  if (const Json* c = f.get("tool_choice")) {
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required")
        throw bad_request(fmt::format("'tool_choice' must be auto, none, required or a function, got '{}'", choice),
                          "tool_choice");
    } else if (c->is_object() && c->value("type", "") == "function" && c->contains("function") &&
               (*c)["function"].is_object() && (*c)["function"].value("name", Json()).is_string()) {
      choice = "function";
      r.forced_function = (*c)["function"]["name"].get<std::string>();
    } else {
      throw bad_request("'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                        "tool_choice");
    }
  }
  f.ignore({"parallel_tool_calls"});
  if (!tools) {
    if (choice == "required" || choice == "function")
      throw bad_request(fmt::format("tool_choice '{}' needs 'tools'", choice), "tool_choice");
    return;
  }
  if (!tools->is_array()) throw bad_request("'tools' must be an array", "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
      throw bad_request(fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", param), param);
    const Json& fn = t["function"];
    // OpenAI's rule for function names (it also keeps them safe to spell inside a grammar).
    const bool name_ok = fn.contains("name") && fn["name"].is_string() && !fn["name"].get<std::string>().empty() &&
                         fn["name"].get<std::string>().size() <= 64 &&
                         fn["name"].get<std::string>().find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos;
    if (!name_ok)
      throw bad_request(fmt::format("'{}.function.name' must be 1-64 letters, digits, '_' or '-'", param),
                        param + ".function.name");
    if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null())
      throw bad_request(fmt::format("'{}.function.parameters' must be a JSON Schema object", param),
                        param + ".function.parameters");
    ChatCompletionRequest::Tool tool{fn["name"].get<std::string>(), {}, true};
    if (fn.contains("parameters") && fn["parameters"].is_object() && fn["parameters"].contains("properties") &&
        fn["parameters"]["properties"].is_object()) {
      tool.any_properties = false;
      for (const auto& [key, schema] : fn["parameters"]["properties"].items()) tool.properties.push_back(key);
    }
    r.tools.push_back(std::move(tool));
  }
  if (choice == "function" && std::none_of(r.tools.begin(), r.tools.end(),
                                           [&](const auto& t) { return t.name == r.forced_function; }))
    throw bad_request(fmt::format("tool_choice names '{}', which is not in 'tools'", r.forced_function), "tool_choice");
  r.tool_call_required = choice == "required" || choice == "function";
  if (r.tool_call_required && r.tools.empty())
    throw bad_request("tool_choice 'required' needs at least one tool", "tool_choice");
  if (choice == "none") return;  // the model is not told about tools it may not call
  if (!tools->empty()) r.options.tools_json = tools->dump();
}

void parse_messages(const Json* messages, ChatCompletionRequest& r) {
  if (!messages) throw bad_request("'messages' is required", "messages");
  if (!messages->is_array() || messages->empty())
    throw bad_request("'messages' must be a non-empty array of messages", "messages");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "latest_reminder"};
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw bad_request(fmt::format("'{}' must be an object", param), param);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !kRoles.count(role->get<std::string>()))
      throw bad_request(fmt::format("'{}.role' must be one of system, developer, user, assistant, tool", param),
                        param + ".role");
    const auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array())
      throw bad_request(fmt::format("'{}.content' must be a string or an array of content parts", param),
                        param + ".content");
  }
  r.conversation = Conversation::from_json(messages->dump());
}

}  // namespace

ChatCompletionRequest parse_chat_completion_request(const Json& body, int64_t vocab_size) {
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  ChatCompletionRequest r;
  FieldReader f(body);
  parse_common(f, r, vocab_size, /*chat=*/true);
  parse_messages(f.get("messages"), r);
  parse_tools(f, r);
  if (const Json* rf = f.get("response_format")) {
    parse_response_format(*rf, r);
    if (rf->value("type", "") != "text") r.options.response_format_json = rf->dump();
  }
  r.options.reasoning_effort = f.string("reasoning_effort");
  if (const Json* kwargs = f.get("chat_template_kwargs")) {
    if (!kwargs->is_object()) throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    FieldReader k(*kwargs, "chat_template_kwargs.");
    if (auto t = k.boolean("thinking")) r.options.thinking = *t;
    if (auto t = k.boolean("enable_thinking")) r.options.thinking = *t;
    if (auto e = k.string("reasoning_effort")) r.options.reasoning_effort = e;
    if (auto d = k.boolean("drop_thinking")) r.options.drop_thinking = *d;
    k.finish();
  }
  if (auto t = f.boolean("thinking")) r.options.thinking = *t;  // DeepSeek's own API spelling
  r.options.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  const StructuredOutputs& so = r.params.structured_outputs;
  if (r.tool_call_required && (so.json || so.regex || so.grammar || so.choice || so.json_object))
    throw bad_request("tool_choice 'required' or a named function constrains the output already: drop "
                      "response_format / structured_outputs",
                      "tool_choice");
  r.logprobs = f.boolean("logprobs").value_or(false);
  r.top_logprobs = f.integer("top_logprobs", 0, kMaxLogprobs).value_or(0);
  if (f.get("top_logprobs") && !r.logprobs)
    throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (r.logprobs) r.params.logprobs = r.top_logprobs;
  f.ignore({"modalities", "audio", "prediction", "web_search_options", "verbosity"});
  if (const Json* fc = f.get("functions"); fc || f.get("function_call"))
    throw bad_request("'functions' / 'function_call' are deprecated by OpenAI and not supported: use 'tools'",
                      "functions");
  f.finish();
  return r;
}

CompletionRequest parse_completion_request(const Json& body, int64_t vocab_size) {
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  CompletionRequest r;
  FieldReader f(body);
  parse_common(f, r, vocab_size, /*chat=*/false);
  if (!r.max_tokens_given) {  // OpenAI's completions default
    r.params.max_tokens = 16;
    r.max_tokens_given = true;
  }
  const Json* prompt = f.get("prompt");
  if (!prompt) throw bad_request("'prompt' is required", "prompt");
  auto ids_of = [&](const Json& a, const std::string& param) {
    std::vector<int32_t> ids;
    for (const Json& id : a) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
        throw bad_request(fmt::format("'{}': {} is not a token id in [0, {})", param, json_excerpt(id), vocab_size), param);
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    if (ids.empty()) throw bad_request(fmt::format("'{}' is empty", param), param);
    return ids;
  };
  if (prompt->is_string()) {
    r.prompts.emplace_back(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    r.prompts.emplace_back(ids_of(*prompt, "prompt"));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (size_t i = 0; i < prompt->size(); ++i) {
      const Json& p = (*prompt)[i];
      if (p.is_string()) r.prompts.emplace_back(p.get<std::string>());
      else if (p.is_array()) r.prompts.emplace_back(ids_of(p, fmt::format("prompt[{}]", i)));
      else throw bad_request("'prompt' must be a string, an array of strings, token ids, or arrays of token ids", "prompt");
    }
  } else {
    throw bad_request("'prompt' must be a non-empty string, an array of strings, token ids, or arrays of token ids",
                      "prompt");
  }
  for (const Prompt& p : r.prompts)
    if (p.text && p.text->empty()) throw bad_request("'prompt' must not be empty", "prompt");
  if (r.prompts.size() * static_cast<size_t>(r.params.n) > 1024)
    throw bad_request("'prompt' x 'n' asks for more than 1024 completions in one request", "prompt");
  r.echo = f.boolean("echo").value_or(false);
  r.logprobs = f.integer("logprobs", 0, kMaxLogprobs);
  if (r.logprobs) r.params.logprobs = *r.logprobs;
  if (r.echo && r.logprobs) r.params.prompt_logprobs = *r.logprobs;
  if (auto pl = f.integer("prompt_logprobs", 0, kMaxLogprobs)) r.params.prompt_logprobs = *pl;
  if (auto best_of = f.integer("best_of", 1, kMaxN); best_of && *best_of != r.params.n)
    throw bad_request("'best_of' other than 'n' is not supported", "best_of", "unsupported_parameter");
  if (const Json* suffix = f.get("suffix"); suffix && !(suffix->is_string() && suffix->get<std::string>().empty()))
    throw bad_request("'suffix' is not supported by DeepSeek-V4 models", "suffix", "unsupported_parameter");
  f.finish();
  return r;
}

}  // namespace deepinfer::serve
