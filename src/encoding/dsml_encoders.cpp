// DeepSeek-V3.2, V4 and V4.1 prompt rendering. Each branch mirrors DeepSeek's reference encoder
// (encoding_dsv32.py, encoding_dsv4.py, SGLang's encoding_dsv41.py) so prompts match byte for byte,
// including its quirks (e.g. consecutive user messages merge with a blank line in V4).
#include <algorithm>
#include <map>

#include "core/error.h"
#include "encoding/chat_encoding.h"

namespace deepinfer::encoding {

namespace {

using std::string;

const string kDsml(tokens::kDsml);

// A message field as Python's dict.get would return it (null when absent).
const Json& field(const Json& message, const char* key) {
  static const Json null_value;
  if (!message.is_object()) return null_value;
  auto it = message.find(key);
  return it == message.end() ? null_value : *it;
}

string role_of(const Json& message) { return python_str(field(message, "role")); }

// `x or ""` followed by str.format: falsy values print as nothing.
string text_or_empty(const Json& value) { return python_truthy(value) ? python_str(value) : ""; }

// Text of a content part: null renders as empty, never as Python's "None".
string part_text(const Json& value) { return value.is_null() ? "" : python_str(value); }

// The DSML spelling of each version.
struct DsmlNames {
  string block;      // "function_calls" | "tool_calls" | " calls"
  string invoke;     // "invoke" | " invoke"
  string parameter;  // "parameter" | " parameter"
};

string render_tool_schemas(const Json& tools) {
  string out;
  bool first = true;
  for (const auto& tool : tools) {
    if (!first) out += "\n";
    first = false;
    DEEPINFER_CHECK(tool.is_object() && tool.contains("function"), "a tool definition has no 'function'");
    out += python_json_dumps(tool["function"]);
  }
  return out;
}

string render_tools_v32(const Json& tools) {
  const string& d = kDsml;
  return "## Tools\nYou have access to a set of tools you can use to answer the user's question.\n"
         "You can invoke functions by writing a \"<" + d + "function_calls>\" block like the following as part of your reply to the user:\n"
         "<" + d + "function_calls>\n"
         "<" + d + "invoke name=\"$FUNCTION_NAME\">\n"
         "<" + d + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d + "parameter>\n"
         "...\n"
         "</" + d + "invoke>\n"
         "<" + d + "invoke name=\"$FUNCTION_NAME2\">\n"
         "...\n"
         "</" + d + "invoke>\n"
         "</" + d + "function_calls>\n"
         "String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. "
         "The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n"
         "If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n"
         "<" + d + "function_calls>\n"
         "...\n"
         "</" + d + "function_calls>\n"
         "<function_results>\n"
         "...\n"
         "</function_results>\n"
         "<think>...thinking about results</think>\n"
         "Here are the functions available in JSONSchema format:\n"
         "<functions>\n" + render_tool_schemas(tools) + "\n</functions>\n";
}

string render_tools_v4(const Json& tools, const DsmlNames& n) {
  const string& d = kDsml;
  return "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
         "You can invoke tools by writing a \"<" + d + n.block + ">\" block like the following:\n\n"
         "<" + d + n.block + ">\n"
         "<" + d + n.invoke + " name=\"$TOOL_NAME\">\n"
         "<" + d + n.parameter + " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d + n.parameter + ">\n"
         "...\n"
         "</" + d + n.invoke + ">\n"
         "<" + d + n.invoke + " name=\"$TOOL_NAME2\">\n"
         "...\n"
         "</" + d + n.invoke + ">\n"
         "</" + d + n.block + ">\n\n"
         "String parameters should be specified as is and set `string=\"true\"`. For all other types "
         "(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
         "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
         "<think>...</think> BEFORE any tool calls or final response.\n\n"
         "Otherwise, output directly after </think> with tool calls or final response.\n\n"
         "### Available Tool Schemas\n\n" + render_tool_schemas(tools) +
         "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

string render_response_format(const Json& response_format) {
  return "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
         python_json_dumps(response_format);
}

// Tool-call arguments as DSML parameters. `lenient` is V4's rule: arguments that are not a JSON
// string become a single "arguments" parameter; V3.2 and V4.1 require a JSON object.
string encode_arguments(const Json& arguments_field, const DsmlNames& n, bool lenient) {
  Json arguments;
  if (arguments_field.is_string()) {
    try {
      arguments = Json::parse(arguments_field.get<string>());
    } catch (const Json::exception&) {
      if (!lenient) fail("tool call arguments are not valid JSON: {}", arguments_field.get<string>());
      arguments = Json{{"arguments", arguments_field}};
    }
  } else if (lenient) {
    arguments = Json{{"arguments", arguments_field}};  // json.loads(non-str) raises, caught upstream
  } else {
    arguments = arguments_field;
  }
  DEEPINFER_CHECK(arguments.is_object(), "assistant tool call function.arguments must be a JSON object");
  string out;
  bool first = true;
  for (const auto& [key, value] : arguments.items()) {
    if (!first) out += "\n";
    first = false;
    bool is_string = value.is_string();
    out += "<" + kDsml + n.parameter + " name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") +
           "\">" + (is_string ? value.get<string>() : python_json_dumps(value)) + "</" + kDsml + n.parameter + ">";
  }
  return out;
}

string render_tool_calls(const Json& tool_calls, const DsmlNames& n, bool lenient) {
  string calls;
  bool first = true;
  for (const auto& call : tool_calls) {
    const Json& function = field(call, "function");
    DEEPINFER_CHECK(function.is_object(), "a tool call has no 'function' object");
    if (!first) calls += "\n";
    first = false;
    calls += "<" + kDsml + n.invoke + " name=\"" + python_str(field(function, "name")) + "\">\n" +
             encode_arguments(field(function, "arguments"), n, lenient) + "\n</" + kDsml + n.invoke + ">";
  }
  return "\n\n<" + kDsml + n.block + ">\n" + calls + "\n</" + kDsml + n.block + ">";
}

// ----------------------------------------------------------------------------------------------
// V3.2
// ----------------------------------------------------------------------------------------------

int last_user_index_v32(const Json& messages) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

string render_message_v32(int index, const Json& messages, bool thinking) {
  static const DsmlNames names{"function_calls", "invoke", "parameter"};
  const Json& msg = messages[index];
  int last_user = last_user_index_v32(messages);
  string role = role_of(msg);
  const Json& content = field(msg, "content");
  const Json& tools = field(msg, "tools");
  const Json& response_format = field(msg, "response_format");
  const Json& tool_calls = field(msg, "tool_calls");
  string think_marker = (index == last_user && thinking) ? string(tokens::kThinkStart) : string(tokens::kThinkEnd);
  string prompt;

  if (role == "system") {
    prompt += text_or_empty(content);
    if (python_truthy(tools)) prompt += "\n\n" + render_tools_v32(tools);
    if (python_truthy(response_format)) prompt += "\n\n" + render_response_format(response_format);
  } else if (role == "developer") {
    DEEPINFER_CHECK(python_truthy(content), "messages[{}]: a developer message needs content", index);
    string body;
    if (python_truthy(tools)) body += "\n\n" + render_tools_v32(tools);
    if (python_truthy(response_format)) body += "\n\n" + render_response_format(response_format);
    body += "\n\n# The user's message is: " + python_str(content);
    prompt += string(tokens::kUser) + body + string(tokens::kAssistant) + think_marker;
  } else if (role == "user") {
    prompt += string(tokens::kUser) + python_str(content) + string(tokens::kAssistant) + think_marker;
  } else if (role == "tool") {
    int prev = index - 1;
    while (prev >= 0 && role_of(messages[prev]) == "tool") --prev;
    DEEPINFER_CHECK(prev >= 0 && role_of(messages[prev]) == "assistant",
                    "messages[{}]: a tool result must follow an assistant message with tool_calls", index);
    int order = index - prev;
    const Json& calls = field(messages[prev], "tool_calls");
    DEEPINFER_CHECK(python_truthy(calls) && calls.is_array() && static_cast<int>(calls.size()) >= order,
                    "messages[{}]: tool result without a matching tool call", index);
    if (order == 1) prompt += "\n\n<function_results>";
    prompt += "\n<result>" + python_str(content) + "</result>";
    if (order == static_cast<int>(calls.size())) {
      prompt += "\n</function_results>";
      prompt += (index >= last_user && thinking) ? "\n\n<think>" : "\n\n</think>";
    }
  } else if (role == "assistant") {
    string tool_text = python_truthy(tool_calls) ? render_tool_calls(tool_calls, names, false) : "";
    string thinking_part;
    const Json& reasoning = field(msg, "reasoning_content");
    if (thinking && index > last_user) {
      DEEPINFER_CHECK(python_truthy(reasoning) || python_truthy(tool_calls),
                      "messages[{}]: in thinking mode an assistant message after the last user message "
                      "needs reasoning_content or tool_calls", index);
      thinking_part = text_or_empty(reasoning) + string(tokens::kThinkEnd);
    }
    prompt += thinking_part + text_or_empty(content) + tool_text + string(tokens::kEos);
  } else {
    fail("messages[{}]: unknown role '{}'", index, role);
  }
  return prompt;
}

}  // namespace

string render_v32(const ChatRequest& request) {
  Json messages = request.messages;
  size_t count = messages.size();
  if (request.thinking && request.drop_thinking) {
    int last_user = last_user_index_v32(messages);
    Json kept = Json::array();
    for (int i = 0; i < static_cast<int>(messages.size()); ++i) {
      string role = role_of(messages[i]);
      if (role == "user" || role == "system" || role == "tool" || i >= last_user) {
        kept.push_back(messages[i]);
      } else if (role == "assistant") {
        Json copy = messages[i];
        copy.erase("reasoning_content");
        kept.push_back(copy);
      }  // developer messages before the last user message are dropped
    }
    messages = kept;
  }
  DEEPINFER_CHECK(messages.size() == count,
                  "v3.2 cannot drop a developer message before the last user message in thinking mode");
  string prompt = request.add_bos ? string(tokens::kBos) : "";
  for (size_t i = 0; i < messages.size(); ++i)
    prompt += render_message_v32(static_cast<int>(i), messages, request.thinking);
  return prompt;
}

// ----------------------------------------------------------------------------------------------
// V4 and V4.1
// ----------------------------------------------------------------------------------------------

namespace {

const std::map<string, string>& task_tokens() {
  static const std::map<string, string> tasks = {
      {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
      {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};
  return tasks;
}

const string kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

struct V4Context {
  bool v41;
  bool thinking;
  bool drop_thinking;
  Json effort;  // already validated
  DsmlNames names;
};

int last_user_index_v4(const Json& messages, bool v41) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    string role = role_of(messages[i]);
    // V4.1: a system message after the first one also opens an assistant turn.
    if (role == "user" || role == "developer" || (v41 && role == "system" && i > 0)) return i;
  }
  return -1;
}

// V4.1's effort preamble: validated for every message, rendered once at index 0 in thinking mode.
string reasoning_effort_v41(int index, bool thinking, const Json& effort_field) {
  static const std::map<string, int> levels = {{"low", 25}, {"high", 50}, {"xhigh", 75}, {"max", 100}};
  Json effort = effort_field.is_null() ? Json("high") : effort_field;
  int budget = 0;
  if (effort.is_number_integer() && effort.get<int64_t>() >= 1 && effort.get<int64_t>() <= 100) {
    budget = static_cast<int>(effort.get<int64_t>());
  } else if (effort.is_string() && levels.count(effort.get<string>())) {
    budget = levels.at(effort.get<string>());
  } else {
    fail("invalid reasoning_effort for v4.1: {} (an integer in [1,100] or low/high/xhigh/max)",
         python_json_dumps(effort));
  }
  if (index == 0 && thinking)
    return "Reasoning Effort: " + std::to_string(budget) +
           " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
  return "";
}

string render_tool_result_content(const Json& content) {
  if (!content.is_array()) return part_text(content);
  string out;
  bool first = true;
  for (const auto& part : content) {
    if (!first) out += "\n\n";
    first = false;
    string type = python_str(field(part, "type"));
    if (type == "text")
      out += part.contains("text") ? part_text(part["text"]) : "";
    else
      out += "[Unsupported " + type + "]";
  }
  return out;
}

string render_user_v4(const Json& msg) {
  const Json& blocks = field(msg, "content_blocks");
  if (!python_truthy(blocks)) return text_or_empty(field(msg, "content"));
  string out;
  bool first = true;
  for (const auto& block : blocks) {
    if (!first) out += "\n\n";
    first = false;
    string type = python_str(field(block, "type"));
    if (type == "text") {
      out += block.contains("text") ? part_text(block["text"]) : "";
    } else if (type == "tool_result") {
      out += "<tool_result>" + (block.contains("content") ? render_tool_result_content(block["content"]) : "") +
             "</tool_result>";
    } else {
      out += "[Unsupported " + type + "]";
    }
  }
  return out;
}

string render_message_v4(int index, const Json& messages, const V4Context& ctx) {
  const Json& msg = messages[index];
  int last_user = last_user_index_v4(messages, ctx.v41);
  string role = role_of(msg);
  const Json& content = field(msg, "content");
  const Json& tools = field(msg, "tools");
  const Json& response_format = field(msg, "response_format");
  const Json& tool_calls = field(msg, "tool_calls");
  string prompt;

  if (ctx.v41) {
    string effort = reasoning_effort_v41(index, ctx.thinking, ctx.effort);
    if (index == 0 && (!effort.empty() || role == "system")) prompt += tokens::kSystem;
    prompt += effort;
  } else if (index == 0 && ctx.thinking && ctx.effort == Json("max")) {
    prompt += kReasoningEffortMax;
  }

  auto tools_and_format = [&]() {
    string out;
    if (python_truthy(tools)) out += "\n\n" + render_tools_v4(tools, ctx.names);
    if (python_truthy(response_format)) out += "\n\n" + render_response_format(response_format);
    return out;
  };

  if (role == "system") {
    if (ctx.v41 && index > 0) prompt += tokens::kSystem;
    prompt += text_or_empty(content) + tools_and_format();
  } else if (role == "developer") {
    DEEPINFER_CHECK(python_truthy(content), "messages[{}]: a developer message needs content", index);
    prompt += string(tokens::kUser) + python_str(content) + tools_and_format();
  } else if (role == "user") {
    prompt += string(tokens::kUser) + render_user_v4(msg);
  } else if (role == "latest_reminder") {
    prompt += string(tokens::kLatestReminder) + python_str(content);
  } else if (role == "assistant") {
    string tool_text = python_truthy(tool_calls) ? render_tool_calls(tool_calls, ctx.names, !ctx.v41) : "";
    bool previous_has_task = index > 0 && !field(messages[index - 1], "task").is_null();
    string thinking_part;
    if (ctx.thinking && !previous_has_task && (!ctx.drop_thinking || index > last_user))
      thinking_part = text_or_empty(field(msg, "reasoning_content")) + string(tokens::kThinkEnd);
    prompt += thinking_part + text_or_empty(content) + tool_text;
    if (!python_truthy(field(msg, "wo_eos"))) prompt += tokens::kEos;
  } else {
    fail("messages[{}]: unknown role '{}'", index, role);
  }

  // What follows decides the transition: nothing, a task token, or the assistant header.
  if (index + 1 < static_cast<int>(messages.size())) {
    string next = role_of(messages[index + 1]);
    if (next != "assistant" && next != "latest_reminder") return prompt;
  }
  const Json& task = field(msg, "task");
  if (!task.is_null()) {
    string name = python_str(task);
    DEEPINFER_CHECK(task_tokens().count(name), "messages[{}]: invalid task '{}'", index, name);
    if (name != "action") {
      prompt += task_tokens().at(name);
    } else {
      prompt += string(tokens::kAssistant) + string(ctx.thinking ? tokens::kThinkStart : tokens::kThinkEnd) +
                task_tokens().at(name);
    }
  } else if (role == "user" || role == "developer" || (ctx.v41 && role == "system" && index > 0)) {
    prompt += tokens::kAssistant;
    bool open_thinking = ctx.thinking && (!ctx.drop_thinking || index >= last_user);
    prompt += open_thinking ? tokens::kThinkStart : tokens::kThinkEnd;
  }
  return prompt;
}

bool is_user_with_blocks(const Json& message) {
  return role_of(message) == "user" && message.contains("content_blocks");
}

// Tool messages become <tool_result> blocks of a user message; consecutive user messages merge.
Json merge_tool_messages(const Json& messages, bool v41) {
  Json merged = Json::array();
  for (const auto& original : messages) {
    Json msg = original;
    string role = role_of(msg);
    if (role == "tool") {
      Json block = {{"type", "tool_result"},
                    {"tool_use_id", msg.contains("tool_call_id") ? msg["tool_call_id"] : Json("")},
                    {"content", msg.contains("content") ? msg["content"] : Json("")}};
      if (!merged.empty() && is_user_with_blocks(merged.back()))
        merged.back()["content_blocks"].push_back(block);
      else
        merged.push_back(Json{{"role", "user"}, {"content_blocks", Json::array({block})}});
    } else if (role == "user") {
      Json blocks;
      if (v41 && msg.contains("content_blocks") && !msg["content_blocks"].is_null())
        blocks = msg["content_blocks"];
      else
        blocks = Json::array({Json{{"type", "text"}, {"text", msg.contains("content") ? msg["content"] : Json("")}}});
      if (!merged.empty() && is_user_with_blocks(merged.back()) && field(merged.back(), "task").is_null()) {
        for (const auto& block : blocks) merged.back()["content_blocks"].push_back(block);
      } else if (v41) {
        msg["content_blocks"] = blocks;  // V4.1 keeps every message-level field
        merged.push_back(msg);
      } else {
        Json fresh = {{"role", "user"}, {"content", msg.contains("content") ? msg["content"] : Json("")},
                      {"content_blocks", blocks}};
        for (const char* key : {"task", "wo_eos", "mask"})
          if (msg.contains(key)) fresh[key] = msg[key];
        merged.push_back(fresh);
      }
    } else {
      merged.push_back(msg);
    }
  }
  return merged;
}

// Tool results follow the order of the assistant's tool calls (matched by id), stably.
void sort_tool_results(Json& messages) {
  std::map<string, int> order;
  for (auto& msg : messages) {
    string role = role_of(msg);
    if (role == "assistant" && python_truthy(field(msg, "tool_calls"))) {
      order.clear();
      int idx = 0;
      for (const auto& call : msg["tool_calls"]) {
        Json id = field(call, "id");
        if (!python_truthy(id)) id = field(field(call, "function"), "id");
        if (python_truthy(id)) order[python_str(id)] = idx;
        ++idx;
      }
    } else if (role == "user" && python_truthy(field(msg, "content_blocks"))) {
      std::vector<Json> tool_blocks;
      for (const auto& block : msg["content_blocks"])
        if (python_str(field(block, "type")) == "tool_result") tool_blocks.push_back(block);
      if (tool_blocks.size() > 1 && !order.empty()) {
        auto rank = [&](const Json& block) {
          auto it = order.find(python_str(block.contains("tool_use_id") ? block["tool_use_id"] : Json("")));
          return it == order.end() ? 0 : it->second;
        };
        std::stable_sort(tool_blocks.begin(), tool_blocks.end(),
                         [&](const Json& a, const Json& b) { return rank(a) < rank(b); });
        size_t next = 0;
        for (auto& block : msg["content_blocks"])
          if (python_str(field(block, "type")) == "tool_result") block = tool_blocks[next++];
      }
    }
  }
}

Json drop_thinking_messages(const Json& messages, bool v41) {
  int last_user = last_user_index_v4(messages, v41);
  Json kept = Json::array();
  for (int i = 0; i < static_cast<int>(messages.size()); ++i) {
    string role = role_of(messages[i]);
    if (role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
        role == "direct_search_results" || i >= last_user) {
      kept.push_back(messages[i]);
    } else if (role == "assistant") {
      Json copy = messages[i];
      copy.erase("reasoning_content");
      kept.push_back(copy);
    }
  }
  return kept;
}

bool is_image_block(const Json& block) {
  string type = python_str(field(block, "type"));
  return block.is_object() && (type == "image" || type == "image_url");
}

string image_record(const Json& block) {
  if (python_str(field(block, "type")) == "image_url") {
    const Json& url = field(block, "image_url");
    string text = url.is_string() ? url.get<string>() : text_or_empty(field(url, "url"));
    DEEPINFER_CHECK(!text.empty(), "an image block has no url");
    return text;
  }
  for (const char* key : {"source", "url", "data"})
    if (python_truthy(field(block, key)))
      return block[key].is_string() ? block[key].get<string>() : python_json_dumps(block[key]);
  fail("an image block does not contain a valid source");
}

// V4.1: image blocks become placeholders (their records are collected in prompt order).
Json process_image_blocks(const Json& blocks, std::vector<string>& images) {
  Json out = Json::array();
  for (const auto& block : blocks) {
    if (!block.is_object()) {
      out.push_back(block);
    } else if (is_image_block(block)) {
      out.push_back(Json{{"type", "text"}, {"text", tokens::kImage}});
      images.push_back(image_record(block));
    } else if (python_str(field(block, "type")) == "tool_result" && field(block, "content").is_array()) {
      Json copy = block;
      copy["content"] = process_image_blocks(block["content"], images);
      out.push_back(copy);
    } else {
      if (python_str(field(block, "type")) == "text") {
        string text = text_or_empty(field(block, "text"));
        DEEPINFER_CHECK(text.find(tokens::kImage) == string::npos,
                        "a text block contains the image placeholder {}; send images as image blocks",
                        tokens::kImage);
      }
      out.push_back(block);
    }
  }
  return out;
}

Json process_image_messages(const Json& messages, std::vector<string>& images) {
  Json processed = Json::array();
  for (const auto& original : messages) {
    Json msg = original;
    for (const char* key : {"content", "reasoning_content"}) {
      const Json& text = field(msg, key);
      DEEPINFER_CHECK(!(text.is_string() && text.get<string>().find(tokens::kImage) != string::npos),
                      "message {} contains the image placeholder {}; send images as image blocks", key,
                      tokens::kImage);
    }
    if (field(msg, "content").is_array() && !msg.contains("content_blocks")) {
      msg["content_blocks"] = msg["content"];
      msg.erase("content");
    }
    if (python_truthy(field(msg, "content_blocks"))) {
      msg["content_blocks"] = process_image_blocks(msg["content_blocks"], images);
      if (!field(msg, "content").is_string()) {
        string joined;
        bool first = true;
        for (const auto& block : msg["content_blocks"]) {
          if (!block.is_object() || python_str(field(block, "type")) != "text") continue;
          if (!first) joined += "\n\n";
          first = false;
          joined += block.contains("text") ? part_text(block["text"]) : "";
        }
        msg["content"] = joined;
      }
    }
    processed.push_back(msg);
  }
  return processed;
}

}  // namespace

RenderedPrompt render_v4(const ChatRequest& request, bool v41) {
  V4Context ctx;
  ctx.v41 = v41;
  ctx.thinking = request.thinking;
  ctx.names = v41 ? DsmlNames{" calls", " invoke", " parameter"} : DsmlNames{"tool_calls", "invoke", "parameter"};
  if (v41) {
    ctx.effort = request.reasoning_effort;
  } else {
    // V4 knows only "max" (a preamble) and "high" (the default); SGLang maps other levels to none.
    const Json& effort = request.reasoning_effort;
    DEEPINFER_CHECK(effort.is_null() || (effort.is_string() && (effort == "low" || effort == "medium" ||
                                                                 effort == "high" || effort == "xhigh" ||
                                                                 effort == "max")),
                    "invalid reasoning_effort for v4: {}", python_json_dumps(effort));
    ctx.effort = effort == Json("max") ? effort : Json();
  }

  RenderedPrompt rendered;
  Json messages = request.messages;
  if (v41) messages = process_image_messages(messages, rendered.images);
  messages = merge_tool_messages(messages, v41);
  sort_tool_results(messages);

  ctx.drop_thinking = request.drop_thinking;
  for (const auto& msg : messages)
    if (python_truthy(field(msg, "tools"))) ctx.drop_thinking = false;  // tool use keeps all reasoning
  if (ctx.thinking && ctx.drop_thinking) messages = drop_thinking_messages(messages, v41);

  string prompt = request.add_bos ? string(tokens::kBos) : "";
  for (size_t i = 0; i < messages.size(); ++i) prompt += render_message_v4(static_cast<int>(i), messages, ctx);
  rendered.text = std::move(prompt);
  return rendered;
}

}  // namespace deepinfer::encoding
