// POST /v1/completions: raw prompts (text, token ids, or lists of either), each run with n
// completions; choice i*n + k is prompt i's completion k, as OpenAI numbers them.
#include <fmt/format.h>

#include <ctime>

#include "serve/protocol/openai_request.h"
#include "serve/openai_response.h"
#include "serve/server_context.h"

namespace deepinfer::serve {

using encoding::Json;

namespace {

struct CompletionJob {
  std::string id;
  int64_t created = 0;
  CompletionRequest request;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;  // for echo
  std::vector<std::shared_ptr<RequestChannel>> channels;
  int64_t prompt_tokens() const {
    int64_t n = 0;
    for (const auto& p : prompt_ids) n += static_cast<int64_t>(p.size());
    return n;
  }
};

Json completion_chunk(const CompletionJob& job, const std::string& model, Json choices) {
  return {{"id", job.id}, {"object", "text_completion"}, {"created", job.created}, {"model", model},
          {"choices", std::move(choices)}};
}

Json choice_json(size_t index, std::string text, Json logprobs, Json finish_reason) {
  return {{"index", index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs)},
          {"finish_reason", std::move(finish_reason)}};
}

// Echoed prompt logprobs followed by the generated ones (the prompt's first entry is null).
Json logprobs_for(const CompletionJob& job, const TokenBytes& bytes, const std::vector<std::optional<TokenLogprob>>& prompt,
                  const std::vector<TokenLogprob>& generated, size_t offset) {
  std::vector<std::optional<TokenLogprob>> all;
  if (job.request.echo) all = prompt;
  for (const auto& t : generated) all.emplace_back(t);
  return completion_logprobs_json(all, bytes, offset);
}

void stream_completions(ServerContext& ctx, CompletionJob& job, httplib::DataSink& sink) {
  const size_t n = static_cast<size_t>(job.request.params.n);
  const TokenBytes bytes = [&](int32_t id) { return ctx.engine.token_text(id); };
  std::vector<bool> echoed(job.channels.size() * n, false);
  std::vector<size_t> offsets(job.channels.size() * n, 0);
  int64_t completion = 0, cached = 0;
  std::string finish;
  auto on_events = [&](size_t prompt, std::vector<StreamEvent>& events) {
    for (StreamEvent& e : events) {
      const size_t index = prompt * n + e.output_index;
      if (e.finished) finish = e.finish_reason;
      if (e.request_finished) cached += e.num_cached_tokens;
      completion += static_cast<int64_t>(e.new_token_ids.size());
      std::string text;
      std::vector<std::optional<TokenLogprob>> prompt_lp;
      if (job.request.echo && !echoed[index]) {
        echoed[index] = true;
        text = job.prompt_texts[prompt];
        if (job.request.logprobs && e.output_index == 0) prompt_lp = e.prompt_logprobs;
      }
      text += e.text;
      Json lp;
      if (job.request.logprobs) {
        std::vector<std::optional<TokenLogprob>> all = prompt_lp;
        for (const auto& t : e.logprobs) all.emplace_back(t);
        lp = completion_logprobs_json(all, bytes, offsets[index]);
        for (const auto& t : all) offsets[index] += t ? bytes(t->token_id).size() : 0;
      }
      Json c = completion_chunk(job, ctx.model_name,
                                Json::array({choice_json(index, std::move(text), std::move(lp),
                                                         e.finished ? Json(e.finish_reason) : Json())}));
      if (job.request.stream.include_usage) c["usage"] = nullptr;
      if (!write_sse(sink, dump(c))) return false;
    }
    return true;
  };
  const PumpResult result = pump_channels(ctx, job.channels, sink, on_events);
  if (!result.client_gone) {
    if (!result.failure.empty()) {
      write_sse(sink, dump(ApiError(500, result.failure, "server_error").to_json()));
    } else if (job.request.stream.include_usage) {
      Json last = completion_chunk(job, ctx.model_name, Json::array());
      last["usage"] = usage_json(job.prompt_tokens(), completion, cached);
      write_sse(sink, dump(last));
    }
    write_sse(sink, "[DONE]");
    sink.done();
  }
  log_request(job.id, "completions", job.prompt_tokens(), cached, completion, job.channels[0]->arrival(), finish,
              result);
}

void respond_completions(ServerContext& ctx, CompletionJob& job, httplib::DataSink& sink) {
  const PumpResult result = pump_channels(ctx, job.channels, sink, [](size_t, std::vector<StreamEvent>&) { return true; });
  if (result.client_gone) {
    log_request(job.id, "completions", job.prompt_tokens(), 0, 0, job.channels[0]->arrival(), "", result);
    return;
  }
  std::string body, finish;
  int64_t completion = 0, cached = 0;
  if (!result.failure.empty()) {
    body = dump(ApiError(500, result.failure, "server_error").to_json());
  } else {
    const TokenBytes bytes = [&](int32_t id) { return ctx.engine.token_text(id); };
    Json choices = Json::array();
    const size_t n = static_cast<size_t>(job.request.params.n);
    for (size_t p = 0; p < job.channels.size(); ++p) {
      const RequestOutput& out = job.channels[p]->output();
      cached += out.num_cached_tokens;
      for (const CompletionOutput& c : out.outputs) {
        completion += static_cast<int64_t>(c.token_ids.size());
        finish = c.finish_reason;
        const std::string prefix = job.request.echo ? job.prompt_texts[p] : "";
        Json lp = job.request.logprobs ? logprobs_for(job, bytes, out.prompt_logprobs, c.logprobs, 0) : Json();
        choices.push_back(choice_json(p * n + c.index, prefix + c.text, std::move(lp), c.finish_reason));
      }
    }
    body = dump(Json{{"id", job.id},
                     {"object", "text_completion"},
                     {"created", job.created},
                     {"model", ctx.model_name},
                     {"choices", std::move(choices)},
                     {"usage", usage_json(job.prompt_tokens(), completion, cached)}});
  }
  sink.write(body.data(), body.size());
  sink.done();
  log_request(job.id, "completions", job.prompt_tokens(), cached, completion, job.channels[0]->arrival(), finish,
              result);
}

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& http_request, httplib::Response& response) {
  auto job = std::make_shared<CompletionJob>();
  job->id = make_response_id("cmpl");
  job->created = static_cast<int64_t>(std::time(nullptr));
  job->request = parse_completion_request(read_json_body(http_request), ctx.engine.vocab_size());
  check_model(ctx, job->request.model);
  for (const Prompt& p : job->request.prompts) {
    if (p.text) {
      if (!ctx.engine.has_tokenizer())
        throw bad_request("this model folder has no tokenizer.json: give the prompt as token ids", "prompt");
      job->prompt_ids.push_back(ctx.engine.encode(*p.text, /*add_bos=*/true));
      job->prompt_texts.push_back(*p.text);
    } else {
      job->prompt_ids.push_back(p.token_ids);
      job->prompt_texts.push_back(ctx.engine.has_tokenizer() ? ctx.engine.decode(p.token_ids, false) : "");
    }
  }
  SamplingParams params = job->request.params;
  int64_t max_tokens = params.max_tokens;
  for (const auto& ids : job->prompt_ids)
    max_tokens = std::min(max_tokens, resolve_max_tokens(ctx, static_cast<int64_t>(ids.size()),
                                                         job->request.max_tokens_given, params.max_tokens, "prompt"));
  params.max_tokens = max_tokens;
  try {
    for (size_t i = 0; i < job->prompt_ids.size(); ++i)
      job->channels.push_back(submit_or_throw(ctx, {job->prompt_ids[i], job->prompt_texts[i], params, std::nullopt}));
  } catch (...) {
    for (const auto& c : job->channels) ctx.engine.abort(c);
    throw;
  }
  const bool stream = job->request.stream.stream;
  response.set_header("Cache-Control", "no-cache");
  auto provider = [&ctx, job, stream](size_t, httplib::DataSink& sink) {
    if (stream) stream_completions(ctx, *job, sink);
    else respond_completions(ctx, *job, sink);
    return true;
  };
  auto releaser = [&ctx, job](bool) {
    for (const auto& c : job->channels) ctx.engine.abort(c);
  };
  response.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider, releaser);
}

}  // namespace deepinfer::serve
