#pragma once
// The requests of one generate() / chat() call or GenerationStream: queued on the engine together,
// stepped until all finish, each step's engine deltas turned into public StreamEvents while the
// RequestOutputs accumulate. Chat requests also run their text through the streaming output
// parser (reasoning / content / tool calls). Holds the LLM's engine exclusively while it lives;
// what has not finished is aborted when it is destroyed.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/llm.h"
#include "encoding/output_parser.h"
#include "engine/llm_engine.h"
#include "engine/output_text.h"

namespace deepinfer {

class GenerationRun {
 public:
  struct ChatParse {
    encoding::ChatFormat format = encoding::ChatFormat::kV4;
    bool thinking = false;  // the prompt ends inside <think>: the output starts as reasoning
  };

  // `busy` is the LLM's flag (throws when already set; cleared again on destruction).
  GenerationRun(engine::RequestEngine& engine, const Tokenizer* tokenizer, bool& busy);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // Queues one request (RequestOutput::index = the number added before it). Throws Error for an
  // invalid request, having queued nothing for it.
  void add(std::vector<int32_t> prompt_ids, std::optional<std::string> prompt_text, const SamplingParams& params,
           std::optional<ChatParse> chat = std::nullopt);
  bool done() const { return unfinished_ == 0; }
  // Runs one engine step; appends one event per completion that produced a token.
  void step(std::vector<StreamEvent>& events);
  std::vector<RequestOutput>& outputs() { return outputs_; }
  const std::vector<RequestOutput>& outputs() const { return outputs_; }
  // Steps until every request finished, passing each event to `on_event`; returns the outputs.
  std::vector<RequestOutput> run(const StreamCallback& on_event);
  void abort_all();
  // Aborts one unfinished request (its blocks go back at once); false when it already finished.
  bool abort(size_t index);

 private:
  // Chat: the same tokens detokenized with special tokens kept (</think> and the tool-call
  // markers may be special) and the stop strings applied alike, fed to the parser.
  struct ChatState {
    engine::OutputText text;
    encoding::StreamingOutputParser parser;
  };

  engine::RequestEngine& engine_;
  const Tokenizer* tokenizer_;
  bool& busy_;
  std::vector<RequestOutput> outputs_;
  std::unordered_map<uint64_t, size_t> index_of_;  // engine request id -> outputs_ index
  std::vector<size_t> open_;                       // completions still running, per request
  std::vector<std::vector<std::unique_ptr<ChatState>>> chat_;  // per request, per completion (chat only)
  size_t unfinished_ = 0;
};

}  // namespace deepinfer
