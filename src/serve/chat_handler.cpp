// POST /v1/chat/completions: the conversation is rendered into the model's own prompt format
// (the folder's: V4 / V4.1 DSML, ...), generated from with the request's sampling parameters, and
// the output parsed into reasoning_content, content and tool_calls, streamed as deltas when asked.
#include <fmt/format.h>

#include <ctime>

#include "serve/protocol/openai_request.h"
#include "serve/openai_response.h"
#include "serve/server_context.h"
#include "serve/tool_choice.h"

namespace deepinfer::serve {

using encoding::Json;

namespace {

struct ChatJob {
  std::string id;
  int64_t created = 0;
  ChatCompletionRequest request;
  int64_t prompt_tokens = 0;
  std::shared_ptr<RequestChannel> channel;
};

Json chunk(const ChatJob& job, const std::string& model, Json choices) {
  return {{"id", job.id}, {"object", "chat.completion.chunk"}, {"created", job.created}, {"model", model},
          {"choices", std::move(choices)}};
}

Json choice_chunk(size_t index, Json delta, Json logprobs, Json finish_reason) {
  return {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
          {"finish_reason", std::move(finish_reason)}};
}

void stream_chat(ServerContext& ctx, ChatJob& job, httplib::DataSink& sink) {
  const size_t n = static_cast<size_t>(job.request.params.n);
  std::vector<bool> started(n, false);
  std::vector<size_t> calls(n, 0);       // tool calls streamed so far, per choice
  std::vector<int64_t> tokens(n, 0);
  int64_t cached = 0;
  std::string finish;
  const TokenBytes bytes = [&](int32_t id) { return ctx.engine.token_text(id); };
  const bool usage_each = job.request.stream.continuous_usage_stats;
  auto with_usage = [&](Json c) {
    if (job.request.stream.include_usage) {
      int64_t completion = 0;
      for (int64_t t : tokens) completion += t;
      c["usage"] = usage_each ? usage_json(job.prompt_tokens, completion, cached) : Json();
    }
    return c;
  };
  auto on_events = [&](size_t, std::vector<StreamEvent>& events) {
    for (StreamEvent& e : events) {
      const size_t k = e.output_index;
      if (k >= n) continue;
      tokens[k] += static_cast<int64_t>(e.new_token_ids.size());
      if (e.request_finished) cached = e.num_cached_tokens;
      if (!started[k]) {  // OpenAI's first chunk of a choice carries the role
        started[k] = true;
        if (!write_sse(sink, dump(with_usage(chunk(job, ctx.model_name,
                                                   Json::array({choice_chunk(k, {{"role", "assistant"}, {"content", ""}},
                                                                             Json(), Json())}))))))
          return false;
      }
      AssistantMessage delta;
      if (e.delta) delta = *e.delta;
      else delta.content = e.text;
      Json d = chat_delta_json(delta, calls[k]);
      calls[k] += delta.tool_calls.size();
      Json logprobs = job.request.logprobs && !e.logprobs.empty() ? chat_logprobs_json(e.logprobs, bytes) : Json();
      if (!d.empty() || !logprobs.is_null()) {
        if (!write_sse(sink, dump(with_usage(chunk(job, ctx.model_name,
                                                   Json::array({choice_chunk(k, std::move(d), std::move(logprobs),
                                                                             Json())}))))))
          return false;
      }
      if (e.finished) {
        const std::string reason = e.finish_reason == "stop" && calls[k] > 0 ? "tool_calls" : e.finish_reason;
        finish = reason;
        if (!write_sse(sink, dump(with_usage(chunk(job, ctx.model_name,
                                                   Json::array({choice_chunk(k, Json::object(), Json(), reason)}))))))
          return false;
      }
    }
    return true;
  };
  const PumpResult result = pump_channels(ctx, {job.channel}, sink, on_events);
  int64_t completion = 0;
  for (int64_t t : tokens) completion += t;
  if (!result.client_gone) {
    if (!result.failure.empty()) {
      write_sse(sink, dump(ApiError(500, result.failure, "server_error").to_json()));
    } else if (job.request.stream.include_usage) {
      Json last = chunk(job, ctx.model_name, Json::array());
      last["usage"] = usage_json(job.prompt_tokens, completion, cached);
      write_sse(sink, dump(last));
    }
    write_sse(sink, "[DONE]");
    sink.done();
  }
  log_request(job.id, "chat.completions", job.prompt_tokens, cached, completion, job.channel->arrival(), finish, result);
}

void respond_chat(ServerContext& ctx, ChatJob& job, httplib::DataSink& sink) {
  const PumpResult result = pump_channels(ctx, {job.channel}, sink, [](size_t, std::vector<StreamEvent>&) { return true; });
  if (result.client_gone) {
    log_request(job.id, "chat.completions", job.prompt_tokens, 0, 0, job.channel->arrival(), "", result);
    return;
  }
  std::string body;
  int64_t completion = 0, cached = 0;
  std::string finish;
  if (!result.failure.empty()) {
    body = dump(ApiError(500, result.failure, "server_error").to_json());
  } else {
    const RequestOutput& out = job.channel->output();
    const TokenBytes bytes = [&](int32_t id) { return ctx.engine.token_text(id); };
    Json choices = Json::array();
    for (const CompletionOutput& c : out.outputs) {
      completion += static_cast<int64_t>(c.token_ids.size());
      finish = chat_finish_reason(c);
      choices.push_back({{"index", c.index},
                         {"message", chat_message_json(c)},
                         {"logprobs", job.request.logprobs ? chat_logprobs_json(c.logprobs, bytes) : Json()},
                         {"finish_reason", finish}});
    }
    cached = out.num_cached_tokens;
    body = dump(Json{{"id", job.id},
                     {"object", "chat.completion"},
                     {"created", job.created},
                     {"model", ctx.model_name},
                     {"choices", std::move(choices)},
                     {"usage", usage_json(job.prompt_tokens, completion, cached)}});
  }
  sink.write(body.data(), body.size());
  sink.done();
  log_request(job.id, "chat.completions", job.prompt_tokens, cached, completion, job.channel->arrival(), finish, result);
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const httplib::Request& http_request, httplib::Response& response) {
  auto job = std::make_shared<ChatJob>();
  job->id = make_response_id("chatcmpl");
  job->created = static_cast<int64_t>(std::time(nullptr));
  job->request = parse_chat_completion_request(read_json_body(http_request), ctx.engine.vocab_size());
  check_model(ctx, job->request.model);
  if (!ctx.engine.has_tokenizer())
    throw bad_request("this model folder has no tokenizer.json: chat needs one (use /v1/completions with token ids)");
  AsyncLLM::ChatPrompt prompt;
  try {
    prompt = ctx.engine.render_chat(job->request.conversation, job->request.options);
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw bad_request(e.what(), "messages");
  }
  job->prompt_tokens = static_cast<int64_t>(prompt.ids.size());
  SamplingParams& params = job->request.params;
  if (job->request.tool_call_required) {
    const bool named = !job->request.forced_function.empty();
    std::vector<ChatCompletionRequest::Tool> allowed;
    for (const auto& tool : job->request.tools)
      if (!named || tool.name == job->request.forced_function) allowed.push_back(tool);
    params.structured_outputs.grammar = forced_tool_call_grammar(prompt.parse.format, allowed, named);
  }
  params.max_tokens =
      resolve_max_tokens(ctx, job->prompt_tokens, job->request.max_tokens_given, params.max_tokens, "messages");
  job->channel = submit_or_throw(ctx, {std::move(prompt.ids), std::move(prompt.text), params, prompt.parse});
  const bool stream = job->request.stream.stream;
  response.set_header("Cache-Control", "no-cache");
  auto provider = [&ctx, job, stream](size_t, httplib::DataSink& sink) {
    if (stream) stream_chat(ctx, *job, sink);
    else respond_chat(ctx, *job, sink);
    return true;
  };
  // Whatever ends the connection early (a write error httplib saw first) aborts the request too.
  auto releaser = [&ctx, job](bool) { ctx.engine.abort(job->channel); };
  response.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider, releaser);
}

}  // namespace deepinfer::serve
