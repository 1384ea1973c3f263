// `deepinfer encode`: renders an OpenAI chat-completions request body into the exact prompt a
// DeepSeek model version expects, printed as text (nothing else) or as token ids.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "core/text_file.h"
#include "encoding/chat_encoding.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using encoding::Json;

struct EncodeArgs {
  std::string request_file;
  std::string format;
  std::string model_dir;
  std::string tokenizer_config;
  std::string tokenizer_file;
  bool ids = false;
};

std::string read_all(const std::string& path) {
  if (path == "-") return read_text_stream(std::cin, kRequestFileLimit, "the request on stdin");
  return read_text_file(path, kRequestFileLimit, "chat request");
}

encoding::ChatEncoder make_encoder(const EncodeArgs& args) {
  std::optional<encoding::ChatFormat> format;
  if (!args.format.empty()) format = encoding::parse_chat_format(args.format);
  if (!args.model_dir.empty()) return encoding::ChatEncoder::from_model_dir(args.model_dir, format);
  DEEPINFER_CHECK(format.has_value(), "give --format or --model");
  std::optional<encoding::JinjaTemplateSource> jinja;
  if (!args.tokenizer_config.empty()) jinja = encoding::jinja_source_from_tokenizer_config(args.tokenizer_config);
  return encoding::ChatEncoder(*format, std::move(jinja));
}

int run_encode(const EncodeArgs& args) {
  encoding::ChatEncoder encoder = make_encoder(args);
  Json body;
  try {
    body = Json::parse(read_all(args.request_file));
  } catch (const Json::exception& e) {
    fail("{} is not valid JSON: {}", args.request_file, e.what());
  }
  encoding::RenderedPrompt prompt = encoder.render(encoding::chat_request_from_json(body));
  if (!args.ids) {
    std::fwrite(prompt.text.data(), 1, prompt.text.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  DEEPINFER_CHECK(!args.tokenizer_file.empty() || !args.model_dir.empty(), "--ids needs --tokenizer FILE or --model");
  Tokenizer tokenizer = args.tokenizer_file.empty() ? Tokenizer::from_model_dir(args.model_dir)
                                                    : Tokenizer::from_file(args.tokenizer_file);
  std::string line;
  for (int32_t id : tokenizer.encode(prompt.text)) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

const CommandRegistration registration{Command{
    "encode", "Render a chat-completions request (JSON file or -) into a DeepSeek prompt",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<EncodeArgs>();
      sub.add_option("request", args->request_file, "Request body JSON (messages, tools, response_format, ...)")
          ->required();
      sub.add_option("--format", args->format, "Chat format: v3, v3.1, v3.2, v4, v4.1");
      sub.add_option("--model", args->model_dir, "Model folder: format from config.json, v3 template from it");
      sub.add_option("--tokenizer-config", args->tokenizer_config, "tokenizer_config.json holding the v3 chat_template");
      sub.add_flag("--ids", args->ids, "Print token ids instead of text");
      sub.add_option("--tokenizer", args->tokenizer_file, "tokenizer.json for --ids");
      return [args] { return run_encode(*args); };
    }}};

}  // namespace
}  // namespace deepinfer::cli
