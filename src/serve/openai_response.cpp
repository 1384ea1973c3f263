#include "serve/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <random>

namespace deepinfer::serve {

using encoding::Json;

namespace {

Json bytes_json(const std::string& b) {
  Json out = Json::array();
  for (unsigned char c : b) out.push_back(static_cast<int>(c));
  return out;
}

// JSON has no -inf: a masked token's logprob is reported as OpenAI does for impossible tokens.
double finite(float lp) { return std::isfinite(lp) ? lp : -9999.0; }

Json tool_call_json(const ChatToolCall& call, std::optional<size_t> index) {
  Json out = Json::object();
  if (index) out["index"] = *index;
  out["id"] = call.id;
  out["type"] = "function";
  out["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return out;
}

}  // namespace

std::string chat_finish_reason(const CompletionOutput& output) {
  if (output.finish_reason == "stop" && output.message && !output.message->tool_calls.empty()) return "tool_calls";
  return output.finish_reason;
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

Json chat_logprobs_json(const std::vector<TokenLogprob>& logprobs, const TokenBytes& bytes) {
  Json content = Json::array();
  for (const TokenLogprob& t : logprobs) {
    Json top = Json::array();
    for (const Logprob& l : t.top) {
      const std::string b = bytes(l.token_id);
      top.push_back({{"token", b}, {"logprob", finite(l.logprob)}, {"bytes", bytes_json(b)}});
    }
    const std::string b = bytes(t.token_id);
    content.push_back({{"token", b}, {"logprob", finite(t.logprob)}, {"bytes", bytes_json(b)}, {"top_logprobs", top}});
  }
  return {{"content", std::move(content)}};
}

Json completion_logprobs_json(const std::vector<std::optional<TokenLogprob>>& logprobs, const TokenBytes& bytes,
                              size_t offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
  for (const auto& t : logprobs) {
    offsets.push_back(offset);
    if (!t) {  // the first prompt token: nothing predicts it
      tokens.push_back(nullptr);
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    const std::string b = bytes(t->token_id);
    tokens.push_back(b);
    token_logprobs.push_back(finite(t->logprob));
    Json top = Json::object();
    for (const Logprob& l : t->top) top[bytes(l.token_id)] = finite(l.logprob);
    top_logprobs.push_back(std::move(top));
    offset += b.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

Json chat_message_json(const CompletionOutput& output) {
  Json m = {{"role", "assistant"}};
  const AssistantMessage empty;
  const AssistantMessage& msg = output.message ? *output.message : empty;
  const std::string& content = output.message ? msg.content : output.text;
  // OpenAI: content is null when the reply is only tool calls.
  m["content"] = content.empty() && !msg.tool_calls.empty() ? Json() : Json(content);
  if (!msg.reasoning_content.empty()) m["reasoning_content"] = msg.reasoning_content;
  if (!msg.tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& call : msg.tool_calls) calls.push_back(tool_call_json(call, std::nullopt));
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

Json chat_delta_json(const AssistantMessage& delta, size_t first_call) {
  Json d = Json::object();
  if (!delta.reasoning_content.empty()) d["reasoning_content"] = delta.reasoning_content;
  if (!delta.content.empty()) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < delta.tool_calls.size(); ++i) calls.push_back(tool_call_json(delta.tool_calls[i], first_call + i));
    d["tool_calls"] = std::move(calls);
  }
  return d;
}

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string make_response_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return fmt::format("{}-{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(counter.fetch_add(1)));
}

}  // namespace deepinfer::serve
