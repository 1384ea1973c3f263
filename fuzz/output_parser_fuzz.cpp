// Fuzzes the streaming output parser: arbitrary bytes, split at fuzzer-chosen points, in every
// format, with and without thinking. It must never crash, and streaming must agree with a
// one-piece parse.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "encoding/output_parser.h"

using namespace deepinfer::encoding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  OutputParserOptions options;
  options.format = static_cast<ChatFormat>(data[0] % 5);
  options.thinking = data[0] & 0x08;
  if (data[0] & 0x10) options.stop = {"###", "\n\n"};
  size_t chunk = 1 + data[1] % 16;
  std::string text(reinterpret_cast<const char*>(data + 2), size - 2);

  ParsedMessage whole = parse_output(text, options);
  StreamingOutputParser parser(options);
  std::string content, reasoning;
  size_t calls = 0;
  for (size_t i = 0; i < text.size(); i += chunk) {
    MessageDelta delta = parser.push(std::string_view(text).substr(i, chunk));
    content += delta.content;
    reasoning += delta.reasoning_content;
    calls += delta.tool_calls.size();
  }
  MessageDelta last = parser.finish();
  content += last.content;
  reasoning += last.reasoning_content;
  calls += last.tool_calls.size();
  const ParsedMessage& streamed = parser.message();
  if (streamed.content != whole.content || streamed.reasoning_content != whole.reasoning_content ||
      streamed.tool_calls.size() != whole.tool_calls.size() || streamed.error != whole.error ||
      streamed.finish_reason != whole.finish_reason || content != streamed.content ||
      reasoning != streamed.reasoning_content || calls != streamed.tool_calls.size())
    std::abort();
  (void)whole.to_json().dump(-1, ' ', false, Json::error_handler_t::replace);
  return 0;
}
