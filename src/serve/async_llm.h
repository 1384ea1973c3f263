#pragma once
// The server's engine: one thread owns the LLM's engine and steps it while any request is
// unfinished; HTTP threads submit requests and read their events through a RequestChannel, and
// may abort them at any time (a client that went away). The loop takes new requests and aborts
// between steps, so a step never waits for a client and a client never waits for more than a step.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/llm.h"
#include "llm/generation_run.h"
#include "serve/metrics.h"

namespace deepinfer::serve {

// What a handler wants run: a prompt's ids (rendered and tokenized by the handler) and how.
struct Submission {
  std::vector<int32_t> prompt_ids;
  std::optional<std::string> prompt_text;
  SamplingParams params;
  std::optional<GenerationRun::ChatParse> chat;  // set: the output is parsed as an assistant message
};

// One request's events, from the engine thread to the HTTP thread that serves it.
class RequestChannel {
 public:
  enum class State { kQueued, kRunning, kRejected, kFinished, kAborted, kFailed };
  using Clock = std::chrono::steady_clock;

  explicit RequestChannel(uint64_t id) : id_(id), arrival_(Clock::now()) {}
  uint64_t id() const { return id_; }
  Clock::time_point arrival() const { return arrival_; }

  // HTTP side. Blocks until the engine took the request (kRunning) or refused it (kRejected, with
  // error()), or the server stopped (kAborted).
  State wait_admitted();
  // Moves the events that arrived into `out`, waiting up to `timeout` for the first. Returns the
  // state: kRunning while more may come, else the final one (events may still be in `out`).
  State next(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout);
  std::string error() const;
  // The finished request (kFinished): what generate() would have returned for it.
  const RequestOutput& output() const { return output_; }

  // Engine side.
  void admit();
  void reject(std::string message);
  void push(StreamEvent event);
  void finish(RequestOutput output);
  void end(State state, std::string message = {});  // kAborted / kFailed

 private:
  const uint64_t id_;
  const Clock::time_point arrival_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  State state_ = State::kQueued;
  std::deque<StreamEvent> events_;
  std::string error_;
  RequestOutput output_;

 public:
  // Engine thread only: the request's index in the current GenerationRun and its token times.
  size_t run_index = 0;
  int64_t generated = 0;
  Clock::time_point last_token;
};

class AsyncLLM {
 public:
  // Starts the engine thread. `llm` and `metrics` must outlive this object.
  AsyncLLM(LLM& llm, Metrics& metrics);
  ~AsyncLLM();  // aborts what is unfinished and joins the thread
  AsyncLLM(const AsyncLLM&) = delete;
  AsyncLLM& operator=(const AsyncLLM&) = delete;

  // Queues a request; wait_admitted() on the channel tells whether the engine accepted it.
  std::shared_ptr<RequestChannel> submit(Submission submission);
  // Aborts a request (queued or running); its state goes back to the pool before the next step.
  void abort(const std::shared_ptr<RequestChannel>& channel);

  // Thread-safe front-end helpers over the LLM's tokenizer and chat encoders.
  struct ChatPrompt {
    std::string text;
    std::vector<int32_t> ids;
    GenerationRun::ChatParse parse;
  };
  ChatPrompt render_chat(const Conversation& conversation, const ChatOptions& options);
  std::vector<int32_t> encode(const std::string& text, bool add_bos) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  std::string token_text(int32_t id) const;  // one token's raw bytes (a piece of UTF-8 at times)
  bool has_tokenizer() const;
  int64_t vocab_size() const { return vocab_size_; }
  int64_t context_limit() const { return context_limit_; }

  // Requests submitted and not yet ended (queued, waiting or running).
  int64_t in_flight() const;
  // Refuses new requests from now on (submit() rejects them); in-flight ones go on.
  void begin_drain();
  // Stops taking requests (submit() rejects them), waits until `deadline` for in-flight ones to
  // finish, aborts the rest, and stops the engine thread.
  void drain(std::chrono::steady_clock::time_point deadline);

 private:
  void loop();
  void dispatch(std::vector<StreamEvent>& events);
  void admit(std::shared_ptr<RequestChannel> channel, Submission submission);
  void record_engine_gauges();

  LLM& llm_;
  Metrics& metrics_;
  int64_t vocab_size_ = 0, context_limit_ = 0;
  mutable std::mutex render_mutex_;  // the chat encoders are built lazily

  mutable std::mutex mutex_;  // guards the queues below and the flags
  std::condition_variable wake_;
  std::deque<std::pair<std::shared_ptr<RequestChannel>, Submission>> pending_;
  std::vector<std::shared_ptr<RequestChannel>> aborts_;
  bool stopping_ = false, draining_ = false;
  int64_t in_flight_ = 0;
  uint64_t next_id_ = 0;

  // Engine thread only.
  std::unique_ptr<GenerationRun> run_;
  std::vector<std::shared_ptr<RequestChannel>> by_index_;  // run index -> channel (null once ended)
  std::thread thread_;
};

}  // namespace deepinfer::serve
