// DeepSeek-V3 renders the model's own Jinja chat_template; V3.1 follows DeepSeek-V3.1's chat
// template branch for branch (thinking / non-thinking, tool calls, tool outputs).
#include "core/error.h"
#include "encoding/chat_encoding.h"
#include "encoding/jinja/template.h"

namespace deepinfer::encoding {

std::string render_v3_jinja(const JinjaTemplateSource& source, const ChatRequest& request) {
  jinja::Template tmpl = jinja::Template::parse(source.chat_template);
  // The variables Hugging Face's apply_chat_template passes.
  jinja::ValueDict context = {
      {"messages", jinja::Value::from_json(request.messages)},
      {"add_generation_prompt", jinja::Value::boolean(request.add_generation_prompt)},
      {"bos_token", jinja::Value::string(source.bos_token)},
      {"eos_token", jinja::Value::string(source.eos_token)},
      {"thinking", jinja::Value::boolean(request.thinking)},
  };
  if (python_truthy(request.tools)) context.emplace_back("tools", jinja::Value::from_json(request.tools));
  return tmpl.render(context);
}

namespace {

// The template concatenates with `+`, which Jinja refuses for anything but strings.
const std::string& require_string(const Json& message, const char* key, size_t index) {
  auto it = message.find(key);
  DEEPINFER_CHECK(it != message.end() && it->is_string(), "messages[{}]: '{}' must be a string for format v3.1",
                  index, key);
  return it->get_ref<const std::string&>();
}

}  // namespace

std::string render_v31(const ChatRequest& request) {
  const Json& messages = request.messages;
  std::string prompt(tokens::kBos);
  bool first_system = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "system") continue;
    if (!first_system) prompt += "\n\n";
    prompt += require_string(messages[i], "content", i);
    first_system = false;
  }
  bool is_first = false, is_tool = false, is_last_user = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& msg = messages[i];
    std::string role = msg.value("role", "");
    auto tool_calls = msg.find("tool_calls");
    bool has_tool_calls = tool_calls != msg.end() && !tool_calls->is_null();
    if (role == "user") {
      is_tool = false;
      is_first = false;
      is_last_user = true;
      prompt += std::string(tokens::kUser) + require_string(msg, "content", i);
    } else if (role == "assistant" && has_tool_calls) {
      if (is_last_user) prompt += std::string(tokens::kAssistant) + std::string(tokens::kThinkEnd);
      is_last_user = false;
      is_first = false;
      is_tool = false;
      DEEPINFER_CHECK(tool_calls->is_array(), "messages[{}]: tool_calls must be an array", i);
      for (const auto& call : *tool_calls) {
        DEEPINFER_CHECK(call.is_object() && call.contains("function") && call["function"].is_object(),
                        "messages[{}]: a tool call needs a 'function' object", i);
        const std::string& name = require_string(call["function"], "name", i);
        const std::string& arguments = require_string(call["function"], "arguments", i);
        std::string one = "<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + arguments + "<｜tool▁call▁end｜>";
        if (!is_first) {
          bool null_content = !msg.contains("content") ? false : msg["content"].is_null();
          std::string content = null_content ? "" : require_string(msg, "content", i);
          prompt += content + "<｜tool▁calls▁begin｜>" + one;
          is_first = true;
        } else {
          prompt += one;
        }
      }
      prompt += "<｜tool▁calls▁end｜>" + std::string(tokens::kEos);
    } else if (role == "assistant") {
      if (is_last_user) {
        prompt += tokens::kAssistant;
        bool prefix = msg.contains("prefix") && python_truthy(msg["prefix"]);
        prompt += (prefix && request.thinking) ? tokens::kThinkStart : tokens::kThinkEnd;
      }
      is_last_user = false;
      std::string content = require_string(msg, "content", i);
      if (is_tool) {
        is_tool = false;
      } else {
        // Earlier turns keep only what follows their reasoning.
        size_t end_of_thinking = content.find(tokens::kThinkEnd);
        if (end_of_thinking != std::string::npos) content = content.substr(end_of_thinking + tokens::kThinkEnd.size());
      }
      prompt += content + std::string(tokens::kEos);
    } else if (role == "tool") {
      is_last_user = false;
      is_tool = true;
      prompt += "<｜tool▁output▁begin｜>" + require_string(msg, "content", i) + "<｜tool▁output▁end｜>";
    }
  }
  if (request.add_generation_prompt && is_last_user && !is_tool)
    prompt += std::string(tokens::kAssistant) + std::string(request.thinking ? tokens::kThinkStart : tokens::kThinkEnd);
  return prompt;
}

}  // namespace deepinfer::encoding
