#include "serve/async_llm.h"

#include <algorithm>

#include "core/error.h"
#include "llm/llm_impl.h"

namespace deepinfer::serve {

// ---- RequestChannel -----------------------------------------------------------------------------

RequestChannel::State RequestChannel::wait_admitted() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return state_ != State::kQueued; });
  return state_;
}

RequestChannel::State RequestChannel::next(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !events_.empty() || state_ != State::kRunning; });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return state_;
}

std::string RequestChannel::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void RequestChannel::admit() {
  std::lock_guard lock(mutex_);
  state_ = State::kRunning;
  changed_.notify_all();
}

void RequestChannel::reject(std::string message) {
  std::lock_guard lock(mutex_);
  state_ = State::kRejected;
  error_ = std::move(message);
  changed_.notify_all();
}

void RequestChannel::push(StreamEvent event) {
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
  changed_.notify_all();
}

void RequestChannel::finish(RequestOutput output) {
  std::lock_guard lock(mutex_);
  output_ = std::move(output);
  state_ = State::kFinished;
  changed_.notify_all();
}

void RequestChannel::end(State state, std::string message) {
  std::lock_guard lock(mutex_);
  state_ = state;
  error_ = std::move(message);
  changed_.notify_all();
}

// ---- AsyncLLM -----------------------------------------------------------------------------------

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

AsyncLLM::AsyncLLM(LLM& llm, Metrics& metrics)
    : llm_(llm), metrics_(metrics), vocab_size_(llm.vocab_size()), context_limit_(llm.context_limit()) {
  thread_ = std::thread([this] { loop(); });
}

AsyncLLM::~AsyncLLM() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestChannel> AsyncLLM::submit(Submission submission) {
  std::lock_guard lock(mutex_);
  auto channel = std::make_shared<RequestChannel>(next_id_++);
  if (draining_ || stopping_) {
    channel->reject("the server is shutting down");
    return channel;
  }
  ++in_flight_;
  pending_.emplace_back(channel, std::move(submission));
  wake_.notify_all();
  return channel;
}

void AsyncLLM::abort(const std::shared_ptr<RequestChannel>& channel) {
  std::lock_guard lock(mutex_);
  aborts_.push_back(channel);
  wake_.notify_all();
}

int64_t AsyncLLM::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

AsyncLLM::ChatPrompt AsyncLLM::render_chat(const Conversation& conversation, const ChatOptions& options) {
  std::lock_guard lock(render_mutex_);
  auto p = LLMInternals::impl(llm_).chat_prompt(conversation, options);
  return {std::move(p.text), std::move(p.ids), {p.format, p.thinking}};
}

bool AsyncLLM::has_tokenizer() const { return llm_.has_tokenizer(); }

std::vector<int32_t> AsyncLLM::encode(const std::string& text, bool add_bos) const {
  const Tokenizer& tok = LLMInternals::impl(llm_).need_tokenizer();
  return add_bos ? tok.encode_with_bos(text) : tok.encode(text);
}

std::string AsyncLLM::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return llm_.decode(ids, skip_special_tokens);
}

std::string AsyncLLM::token_text(int32_t id) const {
  return LLMInternals::impl(llm_).need_tokenizer().token_bytes(id);
}

void AsyncLLM::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

void AsyncLLM::drain(Clock::time_point deadline) {
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
  }
  while (in_flight() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AsyncLLM::admit(std::shared_ptr<RequestChannel> channel, Submission s) {
  if (!run_) {
    auto& impl = LLMInternals::impl(llm_);
    run_ = std::make_unique<GenerationRun>(*impl.engine, impl.tokenizer ? &*impl.tokenizer : nullptr, impl.busy);
    by_index_.clear();
  }
  const size_t index = run_->outputs().size();
  const int64_t prompt_tokens = static_cast<int64_t>(s.prompt_ids.size());
  try {
    run_->add(std::move(s.prompt_ids), std::move(s.prompt_text), s.params, s.chat);
  } catch (const std::exception& e) {
    channel->reject(e.what());
    std::lock_guard lock(mutex_);
    --in_flight_;
    return;
  }
  channel->run_index = index;
  by_index_.resize(index + 1);
  by_index_[index] = channel;
  metrics_.prompt_tokens(prompt_tokens);
  channel->admit();
}

void AsyncLLM::loop() {
  record_engine_gauges();  // pool sizes are known before the first request
  std::vector<StreamEvent> events;
  for (;;) {
    std::deque<std::pair<std::shared_ptr<RequestChannel>, Submission>> pending;
    std::vector<std::shared_ptr<RequestChannel>> aborts;
    bool stop = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !pending_.empty() || !aborts_.empty() || (run_ && !run_->done()); });
      pending.swap(pending_);
      aborts.swap(aborts_);
      stop = stopping_;
    }
    for (auto& [channel, submission] : pending) admit(std::move(channel), std::move(submission));
    for (const auto& channel : aborts) {
      const size_t i = channel->run_index;
      if (i >= by_index_.size() || by_index_[i] != channel) continue;  // already ended (or never admitted)
      run_->abort(i);
      by_index_[i] = nullptr;
      channel->end(RequestChannel::State::kAborted, "aborted");
      metrics_.request_finished("abort", static_cast<int64_t>(run_->outputs()[i].prompt_token_ids.size()),
                                channel->generated, seconds_between(channel->arrival(), Clock::now()));
      run_->outputs()[i] = RequestOutput{};  // free what it accumulated
      std::lock_guard lock(mutex_);
      --in_flight_;
    }
    if (!aborts.empty()) record_engine_gauges();
    if (stop) break;
    if (run_ && !run_->done()) {
      events.clear();
      try {
        run_->step(events);
        record_engine_gauges();  // before any client hears its request ended: /metrics is never behind it
        dispatch(events);
      } catch (const std::exception& e) {
        // A failed step leaves no request in a known state: end them all, visibly.
        run_->abort_all();
        for (auto& channel : by_index_) {
          if (!channel) continue;
          channel->end(RequestChannel::State::kFailed, std::string("engine step failed: ") + e.what());
          channel = nullptr;
          std::lock_guard lock(mutex_);
          --in_flight_;
        }
      }
    }
    record_engine_gauges();
    // A finished run is replaced so its outputs (one entry per request ever served) do not grow.
    if (run_ && run_->done() && std::none_of(by_index_.begin(), by_index_.end(), [](auto& c) { return c != nullptr; })) {
      run_.reset();
      by_index_.clear();
    }
  }
  // Stopping: whatever is still queued or running ends as aborted.
  std::deque<std::pair<std::shared_ptr<RequestChannel>, Submission>> pending;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
  }
  for (auto& [channel, submission] : pending) channel->end(RequestChannel::State::kAborted, "the server is shutting down");
  if (run_) run_->abort_all();
  for (auto& channel : by_index_)
    if (channel) channel->end(RequestChannel::State::kAborted, "the server is shutting down");
  by_index_.clear();
  run_.reset();
  record_engine_gauges();
  std::lock_guard lock(mutex_);
  in_flight_ = 0;
}

void AsyncLLM::dispatch(std::vector<StreamEvent>& events) {
  const Clock::time_point now = Clock::now();
  for (StreamEvent& event : events) {
    if (event.index >= by_index_.size() || !by_index_[event.index]) continue;
    const std::shared_ptr<RequestChannel> channel = by_index_[event.index];
    const auto n = static_cast<int64_t>(event.new_token_ids.size());
    if (n > 0) {
      if (channel->generated == 0) metrics_.time_to_first_token(seconds_between(channel->arrival(), now));
      else metrics_.inter_token_latency(seconds_between(channel->last_token, now) / static_cast<double>(n));
      channel->generated += n;
      channel->last_token = now;
      metrics_.generation_tokens(n);
    }
    const bool request_finished = event.request_finished;
    channel->push(std::move(event));
    if (!request_finished) continue;
    RequestOutput& out = run_->outputs()[channel->run_index];
    // The request's reason is its first completion's (each completion reports its own).
    const std::string reason = out.outputs.empty() ? "stop" : out.outputs[0].finish_reason;
    metrics_.request_finished(reason, static_cast<int64_t>(out.prompt_token_ids.size()), channel->generated,
                              seconds_between(channel->arrival(), now));
    channel->finish(std::move(out));
    out = RequestOutput{};
    by_index_[channel->run_index] = nullptr;
    std::lock_guard lock(mutex_);
    --in_flight_;
  }
}

void AsyncLLM::record_engine_gauges() {
  const engine::RequestEngine& engine = *LLMInternals::impl(llm_).engine;
  metrics_.set_engine({engine.usage(), engine.stats().preemptions});
}

}  // namespace deepinfer::serve
