#include "serve/server_context.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/json_depth.h"
#include "serve/protocol/openai_request.h"
#include "serve/openai_response.h"

namespace deepinfer::serve {

using encoding::Json;

namespace {
constexpr size_t kMaxJsonDepth = 64;
// How soon a vanished client is noticed: a handler waits on its channel at most kPollInterval,
// then peeks the socket. Each quiet wait doubles the next one up to kMaxPollInterval (events reset
// it), so a thousand requests queued behind the running ones cost a few wakeups a second each,
// not forty: on two cores their polling had competed with the engine and the clients.
constexpr auto kPollInterval = std::chrono::milliseconds(25);
constexpr auto kMaxPollInterval = std::chrono::milliseconds(400);
}  // namespace

Json read_json_body(const httplib::Request& request) {
  if (request.body.empty()) throw bad_request("the request body is empty: send a JSON object");
  const size_t depth = json_nesting_depth(request.body);
  if (depth > kMaxJsonDepth)
    throw bad_request(fmt::format("the request body nests JSON {} levels deep (at most {})", depth, kMaxJsonDepth));
  try {
    return Json::parse(request.body);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for numbers like 9e999999
    throw bad_request(fmt::format("the request body is not valid JSON: {}", e.what()));
  }
}

void check_model(const ServerContext& ctx, const std::string& model) {
  if (!model.empty() && model != ctx.model_name)
    throw ApiError(404, fmt::format("The model `{}` does not exist (this server serves `{}`).", model, ctx.model_name),
                   "invalid_request_error", "model", "model_not_found");
}

void set_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status();
  response.set_content(dump(error.to_json()), "application/json");
}

bool write_sse(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

std::shared_ptr<RequestChannel> submit_or_throw(ServerContext& ctx, Submission submission) {
  std::shared_ptr<RequestChannel> channel = ctx.engine.submit(std::move(submission));
  switch (channel->wait_admitted()) {
    case RequestChannel::State::kRejected:
      if (channel->error() == "the server is shutting down")
        throw ApiError(503, "the server is shutting down", "service_unavailable");
      throw bad_request(channel->error());
    case RequestChannel::State::kAborted:
      throw ApiError(503, "the server is shutting down", "service_unavailable");
    default:
      return channel;
  }
}

int64_t resolve_max_tokens(const ServerContext& ctx, int64_t prompt_tokens, bool given, int64_t max_tokens,
                           const char* prompt_param) {
  const int64_t context = ctx.engine.context_limit();
  if (prompt_tokens >= context || (given && prompt_tokens + max_tokens > context))
    throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                  "({} in the {}, {} in the completion). Please reduce the length of the {} or "
                                  "completion.",
                                  context, prompt_tokens + (given ? max_tokens : 1), prompt_tokens, prompt_param,
                                  given ? max_tokens : 1, prompt_param),
                      prompt_param, "context_length_exceeded");
  return given ? max_tokens : context - prompt_tokens;
}

PumpResult pump_channels(ServerContext& ctx, const std::vector<std::shared_ptr<RequestChannel>>& channels,
                         httplib::DataSink& sink,
                         const std::function<bool(size_t, std::vector<StreamEvent>&)>& on_events) {
  PumpResult result;
  std::vector<bool> ended(channels.size(), false);
  size_t open = channels.size();
  std::vector<StreamEvent> events;
  auto abort_open = [&] {
    for (size_t i = 0; i < channels.size(); ++i)
      if (!ended[i]) ctx.engine.abort(channels[i]);
  };
  auto poll = kPollInterval;
  while (open > 0) {
    bool waited = false, quiet = true;
    for (size_t i = 0; i < channels.size(); ++i) {
      if (ended[i]) continue;
      events.clear();
      // Block on the first open channel only; the others are drained as they are.
      const auto state = channels[i]->next(events, waited ? std::chrono::milliseconds(0) : poll);
      waited = true;
      if (!events.empty() || state != RequestChannel::State::kRunning) quiet = false;
      if (result.ttft < 0)
        for (const StreamEvent& e : events)
          if (!e.new_token_ids.empty())
            result.ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - channels[i]->arrival()).count();
      if (!events.empty() && !on_events(i, events)) {
        result.client_gone = true;
        abort_open();
        return result;
      }
      if (state != RequestChannel::State::kRunning) {
        ended[i] = true;
        --open;
        if (state != RequestChannel::State::kFinished && result.failure.empty())
          result.failure = channels[i]->error().empty() ? "aborted" : channels[i]->error();
      }
    }
    if (open > 0 && !sink.is_writable()) {
      result.client_gone = true;
      abort_open();
      return result;
    }
    poll = quiet ? std::min(2 * poll, kMaxPollInterval) : kPollInterval;
  }
  return result;
}

void log_request(const std::string& id, const char* endpoint, int64_t prompt_tokens, int64_t cached_tokens,
                 int64_t completion_tokens, std::chrono::steady_clock::time_point arrival, const std::string& finish,
                 const PumpResult& result) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
  const std::string outcome = result.client_gone ? "client disconnected (aborted)"
                              : !result.failure.empty() ? "failed: " + result.failure
                                                         : "finish_reason=" + finish;
  spdlog::info("{} {}: prompt_tokens={} cached_tokens={} completion_tokens={} ttft={} time={:.3f}s {}", id, endpoint,
               prompt_tokens, cached_tokens, completion_tokens,
               result.ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", result.ttft), seconds, outcome);
}

}  // namespace deepinfer::serve
