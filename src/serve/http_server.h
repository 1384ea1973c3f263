#pragma once
// `deepinfer serve`: an OpenAI-compatible HTTP server over one LLM.
//
// HTTP library: cpp-httplib (Debian's libcpp-httplib-dev). It is thread-per-connection, which
// suits this server: a handler blocks on its request's event channel while the single engine
// thread steps every request at once, and it lets a handler notice a client that went away
// (DataSink::is_writable peeks the socket) and abort its request within one poll interval.
// Boost.Beast's async model would scale to more idle connections, at several times the code;
// the engine, not the socket layer, bounds what one server sustains.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
// POST /tokenize, POST /detokenize, GET /metrics (Prometheus), GET /version.
#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/llm.h"

namespace deepinfer::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;             // empty: no authentication; else /v1/* needs "Authorization: Bearer KEY"
  std::string served_model_name;   // the name clients send as "model" (and /v1/models lists)
  size_t max_request_bytes = 32 << 20;  // a larger body gets 413
  int threads = 1024;              // HTTP worker threads: concurrent connections served
  double shutdown_timeout = 30;    // seconds SIGTERM waits for in-flight requests before aborting them
  std::string log_level = "info";  // debug, info, warning, error
  int64_t max_log_len = 0;         // debug logs print prompts up to this many characters
};

// Serves until SIGTERM or SIGINT, then stops taking requests, finishes (or after
// shutdown_timeout aborts) the in-flight ones and returns 0. Throws Error when it cannot listen.
int serve(LLM& llm, const ServerOptions& options);

}  // namespace deepinfer::serve
