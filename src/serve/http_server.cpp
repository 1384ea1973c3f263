#include "serve/http_server.h"

#include <httplib.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <thread>

#include "core/error.h"
#include "serve/openai_response.h"
#include "serve/server_context.h"

namespace deepinfer::serve {

using encoding::Json;

namespace {

std::atomic<int> g_signals{0};
extern "C" void on_stop_signal(int) { g_signals.fetch_add(1); }

// Runs a handler, turning what it throws into OpenAI-shaped errors.
template <typename Handler>
httplib::Server::Handler guarded(ServerContext& ctx, Handler handler) {
  return [&ctx, handler](const httplib::Request& request, httplib::Response& response) {
    try {
      handler(ctx, request, response);
    } catch (const ApiError& e) {
      spdlog::debug("{} {}: {} {}", request.method, request.path, e.status(), e.what());
      set_error(response, e);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: internal error: {}", request.method, request.path, e.what());
      set_error(response, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
    }
  };
}

void models(ServerContext& ctx, const httplib::Request&, httplib::Response& response) {
  Json model = {{"id", ctx.model_name},         {"object", "model"},
                {"created", ctx.started_unix},  {"owned_by", "deepinfer"},
                {"root", ctx.model_name},       {"parent", nullptr},
                {"max_model_len", ctx.engine.context_limit()}};
  response.set_content(dump(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
}

bool authorized(const ServerOptions& options, const httplib::Request& request) {
  if (options.api_key.empty()) return true;
  return request.get_header_value("Authorization") == "Bearer " + options.api_key;
}

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

int serve(LLM& llm, const ServerOptions& options) {
  // Logs go to stderr (stdout stays free for pipes), colored only on a terminal.
  if (!spdlog::get("deepinfer")) spdlog::set_default_logger(spdlog::stderr_color_mt("deepinfer"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(options.log_level == "warning" ? "warn" : options.log_level));
  Metrics metrics(options.served_model_name);
  AsyncLLM engine(llm, metrics);
  ServerContext ctx{engine, metrics, options, options.served_model_name, static_cast<int64_t>(std::time(nullptr))};
  std::atomic<bool> draining{false};

  httplib::Server server;
  const int threads = std::max(1, options.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server.set_payload_max_length(options.max_request_bytes);
  server.set_read_timeout(30, 0);
  server.set_write_timeout(30, 0);
  // httplib's keep-alive timeout is also how long a new connection may take to send its first
  // request. At 2 s, clients opening a thousand connections at once on a busy machine were closed
  // before they wrote and saw resets (and Node's fetch then stranded requests); 5 s is httplib's
  // and uvicorn's default.
  server.set_keep_alive_timeout(5);

  server.set_pre_routing_handler([&](const httplib::Request& request, httplib::Response& response) {
    if (request.path.rfind("/v1/", 0) == 0 && !authorized(options, request)) {
      set_error(response, ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                                   "authentication_error", "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib's own refusals (unknown route, 413 body too large, bad request line) in OpenAI's shape.
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    std::string message = response.status == 404 ? fmt::format("{} {} is not an endpoint of this server", request.method, request.path)
                                                 : fmt::format("{} {}: HTTP {}", request.method, request.path, response.status);
    if (response.status == 413) message = "the request body is too large (see --max-request-bytes)";
    set_error(response, ApiError(response.status, message, status_type(response.status)));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    set_error(response, ApiError(500, "internal error: " + what, "server_error"));
  });
  server.set_logger([&](const httplib::Request& request, const httplib::Response& response) {
    metrics.http_response(response.status);
    spdlog::debug("{} {} -> {}", request.method, request.path, response.status);
  });

  server.Post("/v1/chat/completions", guarded(ctx, handle_chat_completions));
  server.Post("/v1/completions", guarded(ctx, handle_completions));
  server.Get("/v1/models", guarded(ctx, models));
  server.Post("/tokenize", guarded(ctx, handle_tokenize));
  server.Post("/detokenize", guarded(ctx, handle_detokenize));
  server.Get("/health", [&](const httplib::Request&, httplib::Response& response) {
    if (draining) set_error(response, ApiError(503, "the server is shutting down", "service_unavailable"));
    else response.set_content("", "text/plain");
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/version", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(R"({"version": "0.1.0"})", "application/json");
  });

  // httplib listens with a backlog of 5: a burst of a thousand connects would overflow it, and the
  // clients' SYN retries (1 s, 3 s, 7 s...) would outlast their connect timeouts. The listening
  // socket is captured here and given a real backlog once bound (listen() again resizes it).
  std::atomic<int> listen_fd{-1};
  server.set_socket_options([&](socket_t sock) {  // httplib's socket_t is global
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    DEEPINFER_CHECK(port > 0, "cannot listen on {}: no free port", options.host);
  } else {
    DEEPINFER_CHECK(server.bind_to_port(options.host, port),
                    "cannot listen on {}:{} (is another server using the port?)", options.host, port);
  }
  if (listen_fd >= 0) ::listen(listen_fd, 4096);  // capped by net.core.somaxconn
  std::signal(SIGPIPE, SIG_IGN);
  g_signals = 0;
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  std::atomic<bool> listening{true};
  std::thread listener([&] {
    server.listen_after_bind();
    listening = false;
  });
  spdlog::info("serving {} on http://{}:{} (OpenAI API at /v1; Ctrl-C or SIGTERM to stop)", ctx.model_name,
               options.host, port);

  while (g_signals.load() == 0 && listening) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Graceful shutdown: refuse new work, let in-flight requests finish (a second signal or the
  // timeout aborts them), then close the listener and let the workers end.
  draining = true;
  spdlog::info("shutting down: {} request(s) in flight, waiting up to {}s (signal again to abort them)",
               engine.in_flight(), options.shutdown_timeout);
  std::thread drainer([&] {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(options.shutdown_timeout * 1000));
    engine.begin_drain();
    while (engine.in_flight() > 0 && std::chrono::steady_clock::now() < deadline && g_signals.load() < 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    engine.drain(std::chrono::steady_clock::now());
  });
  drainer.join();
  server.stop();
  listener.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace deepinfer::serve
