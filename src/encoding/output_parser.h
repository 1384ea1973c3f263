#pragma once
// Streaming parser for model output: splits the generated text into reasoning (<think>...</think>),
// content and tool calls (DSML invoke/parameter blocks for V3.2/V4/V4.1, DeepSeek's
// <｜tool▁call▁begin｜> blocks with fenced or bare JSON for V3/V3.1) while it streams. Works on
// bytes: markers split across tokens are held back until they are decided, and so is an
// incomplete UTF-8 character, so every delta is valid text. Malformed tool-call text becomes
// content and sets `error`; the parser never throws on model output.
#include <string>
#include <string_view>
#include <vector>

#include "encoding/chat_encoding.h"

namespace deepinfer::encoding {

struct ToolCall {
  std::string id;         // "call_<index>"
  std::string name;
  std::string arguments;  // JSON object text
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "stop", "tool_calls", or empty when the output ended without EOS/stop
  std::string error;          // non-empty when tool-call text could not be parsed
  Json to_json() const;       // OpenAI-style assistant message
};

// What one push() added, shaped like an OpenAI chat.completion.chunk delta.
struct MessageDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<std::pair<int, ToolCall>> tool_calls;  // (index, complete call)
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
  Json to_json() const;
};

struct OutputParserOptions {
  ChatFormat format = ChatFormat::kV4_1;
  bool thinking = false;           // the prompt ended with <think>: output starts as reasoning
  std::vector<std::string> stop;   // stop strings (checked in reasoning and content, not in tool calls)
};

class StreamingOutputParser {
 public:
  explicit StreamingOutputParser(OutputParserOptions options);
  MessageDelta push(std::string_view text);
  MessageDelta finish();  // end of stream: flushes held-back text, reports unterminated tool calls
  bool done() const { return mode_ == Mode::kDone; }
  const ParsedMessage& message() const { return message_; }

 private:
  enum class Mode { kReasoning, kContent, kToolBlock, kDone };
  struct Markers {
    std::vector<std::string> block_open;
    std::string block_close, call_open, call_close, param_open, param_close;
    bool dsml = true;
    bool fenced_json = false;  // V3: type<sep>name\n```json\n{...}\n```
  };

  void process(bool final, MessageDelta& delta);
  bool step(bool final, MessageDelta& delta);  // false when more input is needed
  bool step_text(bool final, MessageDelta& delta);
  bool step_block(bool final, MessageDelta& delta);
  void emit_text(std::string text, MessageDelta& delta);
  void finish_call(const std::string& body, MessageDelta& delta);
  void fail_block(const std::string& why, MessageDelta& delta);
  // Earliest complete marker in pending_ (index into `markers`), -2 when undecided, -1 when none.
  int find_marker(const std::vector<std::string>& markers, bool final, size_t& position) const;
  size_t held_prefix(const std::vector<std::string>& markers) const;

  OutputParserOptions options_;
  Markers markers_;
  Mode mode_;
  bool at_start_ = true;
  bool tools_disabled_ = false;  // after a malformed block everything is content
  bool in_call_ = false;
  std::string pending_;    // bytes not yet decided
  std::string call_text_;  // current call body
  std::string block_raw_;  // block text since the last complete call (content if the block fails)
  ParsedMessage message_;
};

// One-shot parse: identical to pushing `text` in any pieces and finishing.
ParsedMessage parse_output(std::string_view text, const OutputParserOptions& options);

}  // namespace deepinfer::encoding
