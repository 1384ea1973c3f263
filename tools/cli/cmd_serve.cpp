// `deepinfer serve`: an OpenAI-compatible HTTP server (src/serve/http_server.h) over a model
// folder, with the engine flags `generate` takes.
#include <cstdlib>
#include <deepinfer/llm.h>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "core/error.h"
#include "engine/load_progress.h"
#include "io/model_config.h"
#include "serve/http_server.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string model_dir;
  serve::ServerOptions server;
  std::optional<uint64_t> seed;
  EngineFlags engine;
};

int run_serve(ServeArgs& args) {
  const fs::path dir = args.model_dir;
  DEEPINFER_CHECK(fs::is_directory(dir), "model folder '{}' does not exist or is not a directory", dir.string());
  io::load_model_config(dir);  // a bad config fails before the weights load
  check_engine_flags(args.engine);
  if (args.server.api_key.empty())
    if (const char* key = std::getenv("DEEPINFER_API_KEY")) args.server.api_key = key;
  if (args.server.served_model_name.empty()) args.server.served_model_name = fs::absolute(dir).filename().string();
  if (args.server.served_model_name.empty() || args.server.served_model_name == ".")
    args.server.served_model_name = fs::canonical(dir).filename().string();

  engine::LoadProgress progress;
  LLM llm(dir, engine_config(args.engine, args.seed, [&](size_t d, size_t t) { progress.update(d, t); }));
  progress.finish();
  return serve::serve(llm, args.server);
}

const CommandRegistration registration{Command{
    "serve", "Serve a model folder over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, ...)",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<ServeArgs>();
      sub.add_option("--model", args->model_dir, "Model folder (config.json, *.safetensors, tokenizer.json)")
          ->required();
      sub.add_option("--host", args->server.host, "Address to listen on (0.0.0.0 for every interface)")
          ->default_val("127.0.0.1");
      sub.add_option("--port", args->server.port, "TCP port; 0 picks a free one (printed)")
          ->default_val(8000)
          ->check(CLI::Range(0, 65535));
      sub.add_option("--api-key", args->server.api_key,
                     "Require 'Authorization: Bearer KEY' on /v1/* (default: DEEPINFER_API_KEY, else none)");
      sub.add_option("--served-model-name", args->server.served_model_name,
                     "The model name clients send and /v1/models lists (default: the folder's name)");
      sub.add_option("--max-request-bytes", args->server.max_request_bytes,
                     "Largest request body accepted; larger ones get 413")
          ->default_val(32 << 20)
          ->check(CLI::PositiveNumber);
      sub.add_option("--http-threads", args->server.threads,
                     "HTTP worker threads = connections served at once (more wait to be accepted)")
          ->default_val(1024)
          ->check(CLI::Range(1, 16384));
      sub.add_option("--shutdown-timeout", args->server.shutdown_timeout,
                     "Seconds SIGTERM/SIGINT waits for in-flight requests before aborting them (a second signal "
                     "aborts at once)")
          ->default_val(30)
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--log-level", args->server.log_level, "Log verbosity: one line per request at info")
          ->default_val("info")
          ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
      sub.add_option("--seed", args->seed, "Base of the seeds given to requests without one (default: random)");
      add_engine_flags(sub, args->engine);
      return [args] { return run_serve(*args); };
    }}};

}  // namespace
}  // namespace deepinfer::cli
