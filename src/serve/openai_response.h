#pragma once
// Engine results -> OpenAI response bodies and stream chunks (chat.completion,
// chat.completion.chunk, text_completion), shaped as the official clients parse them.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/llm.h"
#include "encoding/python_json.h"

namespace deepinfer::serve {

using TokenBytes = std::function<std::string(int32_t)>;  // a token's raw bytes

// "stop" with tool calls in the message is OpenAI's "tool_calls".
std::string chat_finish_reason(const CompletionOutput& output);

encoding::Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
encoding::Json chat_logprobs_json(const std::vector<TokenLogprob>& logprobs, const TokenBytes& bytes);
// Completions (legacy) logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
// `offset` is the text offset of the first token, `prompt` entries may be missing (the first).
encoding::Json completion_logprobs_json(const std::vector<std::optional<TokenLogprob>>& logprobs,
                                        const TokenBytes& bytes, size_t offset);

// The assistant message of a finished chat completion.
encoding::Json chat_message_json(const CompletionOutput& output);
// A streamed delta (reasoning / content / newly completed tool calls, numbered from `first_call`).
encoding::Json chat_delta_json(const AssistantMessage& delta, size_t first_call);

// Serialises for the wire: invalid UTF-8 (a token's partial bytes) becomes U+FFFD instead of throwing.
std::string dump(const encoding::Json& value);

// "chatcmpl-<24 hex>" / "cmpl-<24 hex>": random, unique per request.
std::string make_response_id(const char* prefix);

}  // namespace deepinfer::serve
