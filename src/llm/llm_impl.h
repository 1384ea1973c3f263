#pragma once
// LLM's private state, shared by llm.cpp (generate), llm_chat.cpp (chat) and the streams.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "deepinfer/llm.h"
#include "encoding/chat_encoding.h"
#include "engine/request_engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

struct LLM::Impl {
  std::filesystem::path model_dir;
  bool batch_invariant = false;
  int64_t vocab_size = 0;
  std::optional<Tokenizer> tokenizer;
  // The model(s) and their engine: one LLMEngine over `model`, or (data_parallel_size > 1) a
  // dp::DataParallelEngine that owns a model per rank (`model` null).
  std::unique_ptr<model::CausalLM> model;
  std::unique_ptr<engine::RequestEngine> engine;
  // Set while a generate()/chat() call or a GenerationStream owns the engine: its steps would
  // also advance (and swallow the deltas of) any other caller's requests.
  bool busy = false;
  // Chat: the folder's format (read once), encoders by format, the tokenizer's added tokens.
  std::optional<encoding::ChatFormat> default_format;
  std::map<encoding::ChatFormat, encoding::ChatEncoder> encoders;
  std::optional<std::vector<std::string>> added_tokens;

  // Chat (llm_chat.cpp): the rendered prompt, its ids and how to parse what follows it.
  struct ChatPrompt {
    std::string text;
    std::vector<int32_t> ids;
    encoding::ChatFormat format = encoding::ChatFormat::kV4;
    bool thinking = false;  // the prompt ends with <think>
  };
  ChatPrompt chat_prompt(const Conversation& conversation, const ChatOptions& options);
  encoding::ChatFormat chat_format(const ChatOptions& options);
  // Queues every conversation (each checked first; a bad one names its index).
  void add_chats(GenerationRun& run, const std::vector<Conversation>& conversations,
                 const std::vector<SamplingParams>& params, const ChatOptions& options);

  const Tokenizer& need_tokenizer() const {
    DEEPINFER_CHECK(tokenizer.has_value(), "the model folder has no tokenizer.json: give prompts as token ids");
    return *tokenizer;
  }
};

// Internal access for code that drives the engine itself (the server's engine loop).
struct LLMInternals {
  static LLM::Impl& impl(LLM& llm) { return *llm.impl_; }
};

}  // namespace deepinfer
