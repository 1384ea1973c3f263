#pragma once
// Renders OpenAI-style chat requests into the exact prompt text each DeepSeek model version was
// trained on. V3 renders the model's own Jinja chat_template (our Jinja subset, see jinja/);
// V3.1, V3.2, V4 and V4.1 follow DeepSeek's reference encoders (the chat template of V3.1,
// encoding_dsv32.py, encoding_dsv4.py and the V4.1 encoder shipped by SGLang), branch for branch.
// One deliberate difference: a null content (a tool result, a text part) renders as empty, where
// the references print Python's "None".
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "encoding/python_json.h"

namespace deepinfer::encoding {

enum class ChatFormat { kV3, kV3_1, kV3_2, kV4, kV4_1 };

// Accepts "v3", "v3.1", "v3.2", "v4", "v4.1" (and "deepseek_" prefixed / model_type spellings).
ChatFormat parse_chat_format(std::string_view name);
std::string_view chat_format_name(ChatFormat format);
// The format a model folder needs, from config.json's model_type (and architectures).
ChatFormat chat_format_from_model_dir(const std::filesystem::path& dir);

namespace tokens {
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kImage = "<｜deepseek_image｜>";
}  // namespace tokens

// The parts of a chat-completions request body that shape the prompt.
struct ChatRequest {
  Json messages = Json::array();
  Json tools;             // null or an array of {"type":"function","function":{...}}
  Json response_format;   // null or an object, rendered verbatim as JSON
  Json reasoning_effort;  // null, a string (low/medium/high/xhigh/max) or an integer (V4.1: 1-100)
  bool add_generation_prompt = true;
  bool thinking = false;
  bool drop_thinking = true;  // drop reasoning of turns before the last user message
  bool add_bos = true;
};

// Reads `messages`, `tools`, `response_format`, `reasoning_effort`, `add_generation_prompt`,
// `thinking` (or chat_template_kwargs.thinking / enable_thinking) from a request body.
ChatRequest chat_request_from_json(const Json& body);

// What a V3-style Jinja format needs from the model folder's tokenizer_config.json.
struct JinjaTemplateSource {
  std::string chat_template;
  std::string bos_token;
  std::string eos_token;
};
// Reads chat_template, bos_token and eos_token from a tokenizer_config.json.
JinjaTemplateSource jinja_source_from_tokenizer_config(const std::filesystem::path& file);

struct RenderedPrompt {
  std::string text;
  std::vector<std::string> images;  // V4.1: one entry (url or JSON source) per image placeholder
};

class ChatEncoder {
 public:
  // V3 needs the model's chat template; the other formats are built in.
  explicit ChatEncoder(ChatFormat format, std::optional<JinjaTemplateSource> jinja = std::nullopt);
  // Format from config.json (or `format_override`), template from tokenizer_config.json.
  static ChatEncoder from_model_dir(const std::filesystem::path& dir,
                                    std::optional<ChatFormat> format_override = std::nullopt);

  ChatFormat format() const { return format_; }
  RenderedPrompt render(const ChatRequest& request) const;

 private:
  ChatFormat format_;
  std::optional<JinjaTemplateSource> jinja_;
};

// Per-format renderers (used by ChatEncoder; exposed for tests).
std::string render_v3_jinja(const JinjaTemplateSource& source, const ChatRequest& request);
std::string render_v31(const ChatRequest& request);
std::string render_v32(const ChatRequest& request);
RenderedPrompt render_v4(const ChatRequest& request, bool v41);

// Python's str() of a JSON value as the reference encoders' str.format would print it
// (None for null, True/False for booleans).
std::string python_str(const Json& value);
// Python truthiness of a JSON value (null, "", 0, [], {} are false).
bool python_truthy(const Json& value);

}  // namespace deepinfer::encoding
