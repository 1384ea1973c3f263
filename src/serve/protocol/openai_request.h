#pragma once
// OpenAI request bodies -> what the engine runs. Parsing checks every field's type and range and
// throws ApiError (400, naming the parameter) for the first problem, before anything is queued.
// Names follow OpenAI's API, plus vLLM's extra sampling parameters (top_k, min_p,
// repetition_penalty, min_tokens, ignore_eos, stop_token_ids, skip_special_tokens,
// include_stop_str_in_output, structured_outputs, chat_template_kwargs), so clients written for
// vLLM work unchanged.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/llm.h"
#include "encoding/python_json.h"

namespace deepinfer::serve {

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;  // a last chunk with usage (choices: [])
  bool continuous_usage_stats = false;  // vLLM: usage in every chunk
};

struct GenerationRequest {
  std::string model;
  SamplingParams params;
  bool max_tokens_given = false;  // else: the rest of the context (vLLM's default)
  StreamOptions stream;
};

struct ChatCompletionRequest : GenerationRequest {
  Conversation conversation{std::vector<ChatMessage>{}};
  ChatOptions options;
  // tool_choice "required" or a named function: the reply must be a tool call (of `forced_function`
  // when set). Enforced by a grammar over the model's tool-call format (serve/tool_choice.h).
  bool tool_call_required = false;
  std::string forced_function;
  struct Tool {
    std::string name;
    std::vector<std::string> properties;  // parameters.properties' names (keys a call may pass)
    bool any_properties = true;           // no 'properties' given: any key
  };
  std::vector<Tool> tools;
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

struct CompletionRequest : GenerationRequest {
  std::vector<Prompt> prompts;  // text or token ids, one choice group each
  bool echo = false;
  std::optional<int64_t> logprobs;  // top N per token (0..20)
};

ChatCompletionRequest parse_chat_completion_request(const encoding::Json& body, int64_t vocab_size);
CompletionRequest parse_completion_request(const encoding::Json& body, int64_t vocab_size);

}  // namespace deepinfer::serve
