// `deepinfer parse`: reads model output on stdin and prints the parsed assistant message
// (reasoning_content, content, tool_calls, finish_reason, error) as JSON; --deltas prints the
// OpenAI-style deltas as stdin arrives, one JSON object per line, then the message.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "encoding/output_parser.h"

namespace deepinfer::cli {
namespace {

struct ParseArgs {
  std::string format = "v4.1";
  bool thinking = false;
  bool deltas = false;
  std::vector<std::string> stop;
};

void print_json(const encoding::Json& json) {
  std::string text = json.dump(-1, ' ', false, encoding::Json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

int run_parse(const ParseArgs& args) {
  encoding::OutputParserOptions options;
  options.format = encoding::parse_chat_format(args.format);
  options.thinking = args.thinking;
  options.stop = args.stop;
  encoding::StreamingOutputParser parser(options);
  std::vector<char> buffer(4096);
  while (std::cin.good()) {
    std::cin.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    std::streamsize got = std::cin.gcount();
    if (got <= 0) break;
    encoding::MessageDelta delta = parser.push(std::string_view(buffer.data(), static_cast<size_t>(got)));
    if (args.deltas && !delta.empty()) print_json(delta.to_json());
  }
  encoding::MessageDelta last = parser.finish();
  if (args.deltas && !last.empty()) print_json(last.to_json());
  print_json(parser.message().to_json());
  return 0;
}

const CommandRegistration registration{Command{
    "parse", "Parse model output (stdin) into reasoning, content and tool calls as JSON",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<ParseArgs>();
      sub.add_option("--format", args->format, "Chat format: v3, v3.1, v3.2, v4, v4.1 (default v4.1)");
      sub.add_flag("--thinking", args->thinking, "The prompt opened <think>: output starts with reasoning");
      sub.add_option("--stop", args->stop, "Stop string (repeatable)");
      sub.add_flag("--deltas", args->deltas, "Print streaming deltas before the message");
      return [args] { return run_parse(*args); };
    }}};

}  // namespace
}  // namespace deepinfer::cli
