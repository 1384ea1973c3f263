#pragma once
// What every handler shares: the engine, the metrics, the options, and the response plumbing
// common to the generation endpoints (reading a JSON body, pumping request channels into a
// client's connection while watching for it to go away).
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "encoding/python_json.h"
#include "serve/protocol/api_error.h"
#include "serve/async_llm.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

namespace deepinfer::serve {

struct ServerContext {
  AsyncLLM& engine;
  Metrics& metrics;
  const ServerOptions& options;
  std::string model_name;
  int64_t started_unix = 0;  // "created" of /v1/models
};

// The body as JSON (ordered: message objects keep their key order for the prompt encoders).
// Throws ApiError 400 for malformed or too deeply nested JSON.
encoding::Json read_json_body(const httplib::Request& request);

// Throws ApiError 404 when `model` is set and is not the served name.
void check_model(const ServerContext& ctx, const std::string& model);

// Writes an ApiError as the response.
void set_error(httplib::Response& response, const ApiError& error);

// How a pumped generation ended.
struct PumpResult {
  bool client_gone = false;           // the client disconnected: the requests were aborted
  std::string failure;                // an engine failure or shutdown (message), empty otherwise
  double ttft = -1;                   // seconds from arrival to the first generated token (-1: none)
};

// Feeds each channel's events to `on_events(channel index, events)` as they arrive, until every
// channel ended or the client went away (its requests are then aborted at once). `on_events`
// returns false when writing to the client failed (treated as gone).
PumpResult pump_channels(ServerContext& ctx, const std::vector<std::shared_ptr<RequestChannel>>& channels,
                         httplib::DataSink& sink,
                         const std::function<bool(size_t, std::vector<StreamEvent>&)>& on_events);

// Submits and waits for admission; a refused request throws ApiError (400, or 503 while the
// server shuts down).
std::shared_ptr<RequestChannel> submit_or_throw(ServerContext& ctx, Submission submission);

// One SSE event: "data: <json>\n\n".
bool write_sse(httplib::DataSink& sink, const std::string& data);

// The per-request log line.
void log_request(const std::string& id, const char* endpoint, int64_t prompt_tokens, int64_t cached_tokens,
                 int64_t completion_tokens, std::chrono::steady_clock::time_point arrival,
                 const std::string& finish, const PumpResult& result);

// Handlers (chat_handler.cpp, completion_handler.cpp, tokenize_handler.cpp).
void handle_chat_completions(ServerContext& ctx, const httplib::Request& request, httplib::Response& response);
void handle_completions(ServerContext& ctx, const httplib::Request& request, httplib::Response& response);
void handle_tokenize(ServerContext& ctx, const httplib::Request& request, httplib::Response& response);
void handle_detokenize(ServerContext& ctx, const httplib::Request& request, httplib::Response& response);

// The max_tokens a request may have: the given one checked against the context, or the rest of it.
int64_t resolve_max_tokens(const ServerContext& ctx, int64_t prompt_tokens, bool given, int64_t max_tokens,
                           const char* prompt_param);

}  // namespace deepinfer::serve
