// Request parsing, format selection and the ChatEncoder front door.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/text_file.h"
#include "encoding/chat_encoding.h"

namespace deepinfer::encoding {

namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Model-folder JSON (config.json, tokenizer_config.json): bounded in size and nesting.
constexpr size_t kMaxConfigJsonDepth = 128;

Json read_json_file(const std::filesystem::path& file, uint64_t max_bytes, std::string_view what) {
  const std::string text = read_text_file(file, max_bytes, what);
  const size_t depth = json_nesting_depth(text);
  DEEPINFER_CHECK(depth <= kMaxConfigJsonDepth, "{} nests JSON {} levels deep (at most {})", file.string(), depth,
                  kMaxConfigJsonDepth);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail("{} is not valid JSON: {}", file.string(), e.what());
  }
}

// tokenizer_config stores special tokens either as strings or as AddedToken objects.
std::string token_text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return {};
}

const std::set<std::string>& allowed_roles(ChatFormat format) {
  static const std::set<std::string> v3 = {"system", "user", "assistant", "tool"};
  static const std::set<std::string> v32 = {"system", "user", "assistant", "tool", "developer"};
  static const std::set<std::string> v4 = {"system", "user", "assistant", "tool", "developer",
                                           "latest_reminder"};
  switch (format) {
    case ChatFormat::kV3:
    case ChatFormat::kV3_1: return v3;
    case ChatFormat::kV3_2: return v32;
    default: return v4;
  }
}

// The text of OpenAI content parts, for formats without image support.
Json flatten_text_parts(const Json& parts, ChatFormat format) {
  std::string text;
  bool first = true;
  for (const auto& part : parts) {
    std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                           ? part["type"].get<std::string>()
                           : "";
    DEEPINFER_CHECK(type == "text", "format {} accepts only text content parts, found a '{}' part",
                    chat_format_name(format), type);
    // Same joining as SGLang's content flattening for the DeepSeek encoders.
    if (!first) text += ' ';
    first = false;
    text += part.value("text", "");
  }
  return text;
}

bool is_user_like_last(const Json& messages) {
  if (messages.empty()) return false;
  return messages.back().value("role", "") != "assistant";
}

}  // namespace

ChatFormat parse_chat_format(std::string_view name) {
  std::string key = lowercase(name);
  if (key.rfind("deepseek-", 0) == 0 || key.rfind("deepseek_", 0) == 0) key = key.substr(9);
  if (key == "v3" || key == "v30") return ChatFormat::kV3;
  if (key == "v3.1" || key == "v31" || key == "v3_1") return ChatFormat::kV3_1;
  if (key == "v3.2" || key == "v32" || key == "v3_2") return ChatFormat::kV3_2;
  if (key == "v4") return ChatFormat::kV4;
  if (key == "v4.1" || key == "v41" || key == "v4_1") return ChatFormat::kV4_1;
  fail("unknown chat format '{}' (expected v3, v3.1, v3.2, v4 or v4.1)", name);
}

std::string_view chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::kV3: return "v3";
    case ChatFormat::kV3_1: return "v3.1";
    case ChatFormat::kV3_2: return "v3.2";
    case ChatFormat::kV4: return "v4";
    case ChatFormat::kV4_1: return "v4.1";
  }
  return "?";
}

ChatFormat chat_format_from_model_dir(const std::filesystem::path& dir) {
  Json config = read_json_file(dir / "config.json", kConfigFileLimit, "model config");
  std::string model_type = lowercase(config.value("model_type", ""));
  // V3 and V3.1 share model_type deepseek_v3; V3.1's tokenizer_config template mentions </think>.
  if (model_type == "deepseek_v3") {
    auto tokenizer_config = dir / "tokenizer_config.json";
    if (std::filesystem::exists(tokenizer_config)) {
      Json tc = read_json_file(tokenizer_config, kTokenizerConfigFileLimit, "tokenizer config");
      std::string tmpl = tc.value("chat_template", "");
      if (tmpl.find("</think>") != std::string::npos) return ChatFormat::kV3_1;
    }
    return ChatFormat::kV3;
  }
  if (model_type == "deepseek_v32") return ChatFormat::kV3_2;
  if (model_type == "deepseek_v4") return ChatFormat::kV4;
  if (model_type == "deepseek_v41" || model_type == "deepseek_v4_1") return ChatFormat::kV4_1;
  fail("cannot pick a chat format for model_type '{}' in {} (pass the format explicitly)", model_type,
       (dir / "config.json").string());
}

JinjaTemplateSource jinja_source_from_tokenizer_config(const std::filesystem::path& file) {
  Json config = read_json_file(file, kTokenizerConfigFileLimit, "tokenizer config");
  JinjaTemplateSource source;
  DEEPINFER_CHECK(config.contains("chat_template") && config["chat_template"].is_string(),
                  "{} has no chat_template string", file.string());
  source.chat_template = config["chat_template"].get<std::string>();
  source.bos_token = config.contains("bos_token") ? token_text(config["bos_token"]) : "";
  source.eos_token = config.contains("eos_token") ? token_text(config["eos_token"]) : "";
  return source;
}

ChatRequest chat_request_from_json(const Json& body) {
  DEEPINFER_CHECK(body.is_object(), "a chat request must be a JSON object");
  DEEPINFER_CHECK(body.contains("messages") && body["messages"].is_array(),
                  "a chat request needs a 'messages' array");
  ChatRequest request;
  request.messages = body["messages"];
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const Json& message = request.messages[i];
    DEEPINFER_CHECK(message.is_object(), "messages[{}] is not an object", i);
    DEEPINFER_CHECK(message.contains("role") && message["role"].is_string(), "messages[{}] has no role", i);
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    DEEPINFER_CHECK(body["tools"].is_array(), "'tools' must be an array");
    for (const auto& tool : body["tools"])
      DEEPINFER_CHECK(tool.is_object() && tool.contains("function") && tool["function"].is_object(),
                      "each tool needs a 'function' object");
    request.tools = body["tools"];
  }
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    DEEPINFER_CHECK(body["response_format"].is_object(), "'response_format' must be an object");
    request.response_format = body["response_format"];
  }
  if (body.contains("reasoning_effort")) request.reasoning_effort = body["reasoning_effort"];
  auto read_bool = [&](const Json& object, const char* key, bool& out) {
    if (!object.contains(key) || object[key].is_null()) return;
    DEEPINFER_CHECK(object[key].is_boolean(), "'{}' must be a boolean", key);
    out = object[key].get<bool>();
  };
  read_bool(body, "add_generation_prompt", request.add_generation_prompt);
  if (body.contains("chat_template_kwargs") && body["chat_template_kwargs"].is_object()) {
    read_bool(body["chat_template_kwargs"], "enable_thinking", request.thinking);
    read_bool(body["chat_template_kwargs"], "thinking", request.thinking);
  }
  read_bool(body, "thinking", request.thinking);
  read_bool(body, "drop_thinking", request.drop_thinking);
  return request;
}

std::string python_str(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return value.get<bool>() ? "True" : "False";
    case Json::value_t::string: return value.get<std::string>();
    case Json::value_t::number_float: return python_float_repr(value.get<double>());
    default: return python_json_dumps(value);  // close enough for the odd list/dict in a prompt
  }
}

bool python_truthy(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return value.get<bool>();
    case Json::value_t::string: return !value.get_ref<const std::string&>().empty();
    case Json::value_t::number_integer: return value.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return value.get<uint64_t>() != 0;
    case Json::value_t::number_float: return value.get<double>() != 0.0;
    case Json::value_t::array:
    case Json::value_t::object: return !value.empty();
    default: return false;
  }
}

ChatEncoder::ChatEncoder(ChatFormat format, std::optional<JinjaTemplateSource> jinja)
    : format_(format), jinja_(std::move(jinja)) {
  DEEPINFER_CHECK(format != ChatFormat::kV3 || jinja_.has_value(),
                  "format v3 renders the model's chat_template: give a tokenizer_config.json");
}

ChatEncoder ChatEncoder::from_model_dir(const std::filesystem::path& dir,
                                        std::optional<ChatFormat> format_override) {
  ChatFormat format = format_override ? *format_override : chat_format_from_model_dir(dir);
  std::optional<JinjaTemplateSource> jinja;
  if (format == ChatFormat::kV3) jinja = jinja_source_from_tokenizer_config(dir / "tokenizer_config.json");
  return ChatEncoder(format, std::move(jinja));
}

RenderedPrompt ChatEncoder::render(const ChatRequest& original) const {
  ChatRequest request = original;
  const auto& roles = allowed_roles(format_);
  for (size_t i = 0; i < request.messages.size(); ++i) {
    Json& message = request.messages[i];
    std::string role = message.value("role", "");
    DEEPINFER_CHECK(roles.count(role), "messages[{}]: role '{}' is not part of format {}", i, role,
                    chat_format_name(format_));
    // A null content renders as empty (the reference encoders print Python's "None" for a null
    // tool result). Assistant turns keep null: the V3 templates test for it (tool calls only).
    if (role != "assistant" && message.contains("content") && message["content"].is_null()) message["content"] = "";
    // Only V4.1 understands structured content (images); the others get the text parts.
    if (format_ != ChatFormat::kV4_1 && message.contains("content") && message["content"].is_array())
      message["content"] = flatten_text_parts(message["content"], format_);
  }

  RenderedPrompt rendered;
  if (format_ == ChatFormat::kV3) {
    rendered.text = render_v3_jinja(*jinja_, request);
    return rendered;
  }
  if (format_ == ChatFormat::kV3_1) {
    rendered.text = render_v31(request);
    return rendered;
  }

  // DSML formats read tools and the response format from the system message at index 0, as the
  // reference test harness and SGLang's server attach them.
  bool has_tools = python_truthy(request.tools);
  bool has_format = python_truthy(request.response_format) &&
                    request.response_format.value("type", "") != "text";
  if (has_tools || has_format) {
    if (request.messages.empty() || request.messages[0].value("role", "") != "system")
      request.messages.insert(request.messages.begin(), Json{{"role", "system"}, {"content", ""}});
    if (has_tools) request.messages[0]["tools"] = request.tools;
    if (has_format) request.messages[0]["response_format"] = request.response_format;
  }
  if (format_ == ChatFormat::kV3_2)
    rendered.text = render_v32(request);
  else
    rendered = render_v4(request, format_ == ChatFormat::kV4_1);

  // The reference encoders always open the assistant turn; honour add_generation_prompt=false by
  // removing that trailing header.
  if (!request.add_generation_prompt && is_user_like_last(request.messages)) {
    for (std::string_view think : {tokens::kThinkStart, tokens::kThinkEnd}) {
      std::string header = std::string(tokens::kAssistant) + std::string(think);
      if (rendered.text.size() >= header.size() &&
          rendered.text.compare(rendered.text.size() - header.size(), header.size(), header) == 0) {
        rendered.text.resize(rendered.text.size() - header.size());
        break;
      }
    }
  }
  return rendered;
}

}  // namespace deepinfer::encoding
