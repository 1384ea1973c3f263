// POST /tokenize and /detokenize (vLLM's): text or a chat conversation -> the ids the model would
// see, and ids -> text. A conversation is rendered exactly as /v1/chat/completions renders it.
#include <fmt/format.h>

#include "serve/protocol/field_reader.h"
#include "serve/protocol/openai_request.h"
#include "serve/openai_response.h"
#include "serve/server_context.h"

namespace deepinfer::serve {

using encoding::Json;

void handle_tokenize(ServerContext& ctx, const httplib::Request& request, httplib::Response& response) {
  const Json body = read_json_body(request);
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  if (!ctx.engine.has_tokenizer()) throw bad_request("this model folder has no tokenizer.json");
  std::vector<int32_t> ids;
  bool token_strs = false;
  if (body.contains("messages")) {
    // The chat fields go through the chat parser: the same checks and the same prompt.
    Json chat = Json::object();
    for (const auto& [key, value] : body.items())
      if (key != "return_token_strs" && key != "add_special_tokens") chat[key] = value;
    token_strs = body.value("return_token_strs", false);
    const ChatCompletionRequest r = parse_chat_completion_request(chat, ctx.engine.vocab_size());
    check_model(ctx, r.model);
    try {
      ids = ctx.engine.render_chat(r.conversation, r.options).ids;
    } catch (const std::exception& e) {
      throw bad_request(e.what(), "messages");
    }
  } else {
    FieldReader f(body);
    check_model(ctx, f.string("model").value_or(""));
    const auto prompt = f.string("prompt");
    if (!prompt) throw bad_request("'prompt' (a string) or 'messages' is required", "prompt");
    const bool special = f.boolean("add_special_tokens").value_or(true);
    token_strs = f.boolean("return_token_strs").value_or(false);
    f.finish();
    ids = ctx.engine.encode(*prompt, special);
  }
  Json strs;
  if (token_strs) {
    strs = Json::array();
    for (int32_t id : ids) strs.push_back(ctx.engine.token_text(id));
  }
  response.set_content(dump(Json{{"count", ids.size()},
                                 {"max_model_len", ctx.engine.context_limit()},
                                 {"tokens", ids},
                                 {"token_strs", strs}}),
                       "application/json");
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& request, httplib::Response& response) {
  const Json body = read_json_body(request);
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  if (!ctx.engine.has_tokenizer()) throw bad_request("this model folder has no tokenizer.json");
  FieldReader f(body);
  check_model(ctx, f.string("model").value_or(""));
  const auto ids = f.token_ids("tokens", ctx.engine.vocab_size());
  if (!ids) throw bad_request("'tokens' (an array of token ids) is required", "tokens");
  f.finish();
  response.set_content(dump(Json{{"prompt", ctx.engine.decode(*ids, /*skip_special_tokens=*/false)}}), "application/json");
}

}  // namespace deepinfer::serve
