// LLM::chat: conversations -> the model's prompt format -> ids (message text as plain text) ->
// generation with the output parsed into reasoning, content and tool calls.
#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "deepinfer/llm.h"
#include "encoding/protected_prompt.h"
#include "llm/generation_run.h"
#include "llm/llm_impl.h"

namespace deepinfer {

namespace {

using encoding::Json;

Json parse_json_field(const std::string& text, const std::string& field) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail("{} is not valid JSON: {}", field, e.what());
  }
}

Json message_json(const ChatMessage& m) {
  Json out = {{"role", m.role}, {"content", m.content ? Json(*m.content) : Json()}};
  if (m.reasoning_content) out["reasoning_content"] = *m.reasoning_content;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& call : m.tool_calls)
      calls.push_back({{"id", call.id}, {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    out["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) out["tool_call_id"] = *m.tool_call_id;
  return out;
}

// The chat-completions request body the encoders read (encoding::chat_request_from_json).
Json request_body(const Conversation& conversation, const ChatOptions& options) {
  Json body = Json::object();
  if (!conversation.messages_json.empty()) {
    body["messages"] = parse_json_field(conversation.messages_json, "messages_json");
    DEEPINFER_CHECK(body["messages"].is_array(), "messages_json must be a JSON array of messages");
  } else {
    body["messages"] = Json::array();
    for (const auto& m : conversation.messages) body["messages"].push_back(message_json(m));
  }
  DEEPINFER_CHECK(!body["messages"].empty(), "the conversation has no messages");
  DEEPINFER_CHECK(options.tools.empty() || options.tools_json.empty(),
                  "ChatOptions: give tools or tools_json, not both");
  if (!options.tools.empty()) {
    Json tools = Json::array();
    for (size_t i = 0; i < options.tools.size(); ++i) {
      const ChatTool& t = options.tools[i];
      DEEPINFER_CHECK(!t.name.empty(), "tools[{}].name is empty", i);
      Json function = {{"name", t.name}, {"description", t.description},
                       {"parameters", parse_json_field(t.parameters, fmt::format("tools[{}].parameters", i))}};
      tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    body["tools"] = std::move(tools);
  } else if (!options.tools_json.empty()) {
    body["tools"] = parse_json_field(options.tools_json, "tools_json");
  }
  if (!options.response_format_json.empty())
    body["response_format"] = parse_json_field(options.response_format_json, "response_format_json");
  if (options.reasoning_effort) {
    const std::string& e = *options.reasoning_effort;
    // V4.1 takes a budget 1-100 as well as a level name.
    const bool number = !e.empty() && e.size() <= 3 && std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isdigit(c); });
    body["reasoning_effort"] = number ? Json(std::stoi(e)) : Json(e);
  }
  body["thinking"] = options.thinking;
  body["add_generation_prompt"] = options.add_generation_prompt;
  body["drop_thinking"] = options.drop_thinking;
  return body;
}

}  // namespace

encoding::ChatFormat LLM::Impl::chat_format(const ChatOptions& options) {
  if (!options.chat_format.empty()) return encoding::parse_chat_format(options.chat_format);
  if (!default_format) {
    try {
      default_format = encoding::chat_format_from_model_dir(model_dir);
    } catch (const std::exception& e) {
      fail("{}; set ChatOptions::chat_format", e.what());
    }
  }
  return *default_format;
}

LLM::Impl::ChatPrompt LLM::Impl::chat_prompt(const Conversation& conversation, const ChatOptions& options) {
  const Tokenizer& tok = need_tokenizer();
  ChatPrompt out;
  out.format = chat_format(options);
  auto it = encoders.find(out.format);
  if (it == encoders.end())
    it = encoders.emplace(out.format, encoding::ChatEncoder::from_model_dir(model_dir, out.format)).first;
  if (!added_tokens) added_tokens = tok.added_token_contents();

  const encoding::ChatRequest request = encoding::chat_request_from_json(request_body(conversation, options));
  encoding::ProtectedPrompt prompt = encoding::render_protected(it->second, request, *added_tokens);
  DEEPINFER_CHECK(prompt.images.empty(), "the conversation has images: this engine runs text-only models");
  std::vector<Tokenizer::Range> plain;
  plain.reserve(prompt.plain.size());
  for (const auto& [begin, end] : prompt.plain) plain.push_back({begin, end});
  out.ids = tok.encode(prompt.text, plain);
  out.thinking = prompt.text.ends_with(encoding::tokens::kThinkStart);
  out.text = std::move(prompt.text);
  return out;
}

void LLM::Impl::add_chats(GenerationRun& run, const std::vector<Conversation>& conversations,
                          const std::vector<SamplingParams>& params, const ChatOptions& options) {
  DEEPINFER_CHECK(params.size() == 1 || params.size() == conversations.size(),
                  "give one SamplingParams for all conversations or one per conversation: {} conversations, {} "
                  "SamplingParams",
                  conversations.size(), params.size());
  for (size_t i = 0; i < conversations.size(); ++i) {
    try {
      ChatPrompt prompt = chat_prompt(conversations[i], options);
      run.add(std::move(prompt.ids), std::move(prompt.text), params.size() == 1 ? params[0] : params[i],
              GenerationRun::ChatParse{prompt.format, prompt.thinking});
    } catch (const std::exception& e) {
      fail("conversation {}: {}", i, e.what());
    }
  }
}

std::vector<RequestOutput> LLM::chat(const Conversation& conversation, const SamplingParams& params,
                                     const ChatOptions& options, const StreamCallback& on_event) {
  return chat(std::vector<Conversation>{conversation}, std::vector<SamplingParams>{params}, options, on_event);
}

std::vector<RequestOutput> LLM::chat(const std::vector<Conversation>& conversations, const SamplingParams& params,
                                     const ChatOptions& options, const StreamCallback& on_event) {
  return chat(conversations, std::vector<SamplingParams>{params}, options, on_event);
}

std::vector<RequestOutput> LLM::chat(const std::vector<Conversation>& conversations,
                                     const std::vector<SamplingParams>& params, const ChatOptions& options,
                                     const StreamCallback& on_event) {
  GenerationRun run(*impl_->engine, &impl_->need_tokenizer(), impl_->busy);
  impl_->add_chats(run, conversations, params, options);
  return run.run(on_event);
}

GenerationStream LLM::chat_stream(const std::vector<Conversation>& conversations, const SamplingParams& params,
                                  const ChatOptions& options) {
  return chat_stream(conversations, std::vector<SamplingParams>{params}, options);
}

GenerationStream LLM::chat_stream(const std::vector<Conversation>& conversations,
                                  const std::vector<SamplingParams>& params, const ChatOptions& options) {
  auto run = std::make_unique<GenerationRun>(*impl_->engine, &impl_->need_tokenizer(), impl_->busy);
  impl_->add_chats(*run, conversations, params, options);
  return GenerationStream(std::move(run));
}

std::string LLM::render_chat(const Conversation& conversation, const ChatOptions& options) {
  return impl_->chat_prompt(conversation, options).text;
}

std::vector<int32_t> LLM::chat_prompt_ids(const Conversation& conversation, const ChatOptions& options) {
  return impl_->chat_prompt(conversation, options).ids;
}

std::string LLM::chat_format(const ChatOptions& options) {
  return std::string(encoding::chat_format_name(impl_->chat_format(options)));
}

}  // namespace deepinfer
