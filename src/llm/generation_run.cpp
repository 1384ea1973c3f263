#include "llm/generation_run.h"

#include <algorithm>

#include "core/error.h"
#include "engine/public_params.h"

namespace deepinfer {

namespace {

TokenLogprob to_public(const sampling::TokenLogprob& t) {
  TokenLogprob out{t.token_id, t.logprob, t.rank, {}};
  out.top.reserve(t.top.size());
  for (const auto& l : t.top) out.top.push_back({l.token_id, l.logprob});
  return out;
}

void append(AssistantMessage& to, const encoding::MessageDelta& delta) {
  to.reasoning_content += delta.reasoning_content;
  to.content += delta.content;
  for (const auto& [index, call] : delta.tool_calls) to.tool_calls.push_back({call.id, call.name, call.arguments});
}

AssistantMessage to_public(const encoding::ParsedMessage& m) {
  AssistantMessage out{m.reasoning_content, m.content, {}, m.error};
  for (const auto& call : m.tool_calls) out.tool_calls.push_back({call.id, call.name, call.arguments});
  return out;
}

}  // namespace

GenerationRun::GenerationRun(engine::RequestEngine& engine, const Tokenizer* tokenizer, bool& busy)
    : engine_(engine), tokenizer_(tokenizer), busy_(busy) {
  DEEPINFER_CHECK(!busy_, "this LLM is already generating (one generate()/chat() call or open GenerationStream at a "
                          "time): finish or destroy the other first");
  busy_ = true;
}

GenerationRun::~GenerationRun() {
  abort_all();
  busy_ = false;
}

void GenerationRun::abort_all() {
  for (const auto& [id, index] : index_of_) engine_.abort(id);
  index_of_.clear();
  unfinished_ = 0;
}

bool GenerationRun::abort(size_t index) {
  for (auto it = index_of_.begin(); it != index_of_.end(); ++it) {
    if (it->second != index) continue;
    engine_.abort(it->first);
    index_of_.erase(it);
    --unfinished_;
    return true;
  }
  return false;
}

void GenerationRun::add(std::vector<int32_t> prompt_ids, std::optional<std::string> prompt_text,
                        const SamplingParams& p, std::optional<ChatParse> chat) {
  engine::RequestParams params = to_request_params(p);
  std::vector<std::unique_ptr<ChatState>> states;
  if (chat) {
    DEEPINFER_CHECK(tokenizer_ != nullptr, "chat needs the model folder's tokenizer.json");
    for (int64_t k = 0; k < p.n; ++k) {
      engine::OutputText text(tokenizer_, /*skip_special_tokens=*/false, p.stop, p.include_stop_str_in_output,
                              p.min_tokens);
      encoding::StreamingOutputParser parser({.format = chat->format, .thinking = chat->thinking, .stop = {}});
      states.push_back(std::make_unique<ChatState>(ChatState{std::move(text), std::move(parser)}));
    }
  }
  RequestOutput out;
  out.index = outputs_.size();
  out.finished = false;
  out.prompt = std::move(prompt_text);
  out.prompt_token_ids = std::move(prompt_ids);
  const uint64_t id = engine_.add_request(out.prompt_token_ids, std::move(params));
  out.outputs.resize(static_cast<size_t>(p.n));
  for (size_t k = 0; k < out.outputs.size(); ++k) {
    out.outputs[k].index = k;
    if (p.logprobs) out.outputs[k].cumulative_logprob = 0.0;
    if (chat) out.outputs[k].message.emplace();
  }
  index_of_.emplace(id, out.index);
  open_.push_back(out.outputs.size());
  chat_.push_back(std::move(states));
  outputs_.push_back(std::move(out));
  ++unfinished_;
}

std::vector<RequestOutput> GenerationRun::run(const StreamCallback& on_event) {
  std::vector<StreamEvent> events;
  while (!done()) {
    events.clear();
    step(events);
    if (on_event)
      for (const StreamEvent& event : events) on_event(event);
  }
  return std::move(outputs_);
}

void GenerationRun::step(std::vector<StreamEvent>& events) {
  if (done()) return;
  for (engine::RequestDelta& d : engine_.step()) {
    const auto it = index_of_.find(d.id);
    if (it == index_of_.end()) continue;  // not ours (cannot happen: the engine is held exclusively)
    RequestOutput& out = outputs_[it->second];
    CompletionOutput& c = out.outputs.at(d.index);
    c.seed = d.seed;
    c.token_ids.insert(c.token_ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
    c.text += d.text;
    c.logits.insert(c.logits.end(), d.logits.begin(), d.logits.end());
    std::vector<TokenLogprob> logprobs;
    for (const auto& l : d.logprobs) {
      logprobs.push_back(to_public(l));
      *c.cumulative_logprob += l.logprob;
    }
    c.logprobs.insert(c.logprobs.end(), logprobs.begin(), logprobs.end());
    std::vector<std::optional<TokenLogprob>> prompt_logprobs;
    for (const auto& l : d.prompt_logprobs)
      prompt_logprobs.push_back(l ? std::optional<TokenLogprob>(to_public(*l)) : std::nullopt);
    if (!prompt_logprobs.empty()) out.prompt_logprobs = prompt_logprobs;

    std::optional<AssistantMessage> chat_delta;
    if (!chat_[out.index].empty()) {
      ChatState& chat = *chat_[out.index][d.index];
      for (size_t k = 0; k < d.new_token_ids.size(); ++k) {
        // The engine keeps a final EOS / stop token out of the text: so does the parser's text.
        const bool stop_token = d.finished && d.stop_token && k + 1 == d.new_token_ids.size();
        if (!stop_token) chat.text.push(d.new_token_ids[k]);
      }
      if (d.finished) chat.text.flush();
      chat_delta.emplace();
      append(*chat_delta, chat.parser.push(chat.text.take_delta()));
      if (d.finished) {
        append(*chat_delta, chat.parser.finish());
        c.message = to_public(chat.parser.message());
      }
    }

    bool request_done = false;
    if (d.finished) {
      out.num_cached_tokens = std::max(out.num_cached_tokens, d.num_cached_tokens);
      c.finish_reason = engine::to_string(d.finish_reason);
      c.stop_string = d.stop_string;
      c.stop_token_id = d.stop_token;
      if (--open_[out.index] == 0) {  // the request's metrics are those of its last completion
        out.metrics.time_to_first_token = d.time_to_first_token;
        out.metrics.total_time = d.total_time;
        out.finished = request_done = true;
        index_of_.erase(it);
        --unfinished_;
      }
    }
    StreamEvent& event = events.emplace_back();
    event.index = out.index;
    event.output_index = d.index;
    event.new_token_ids = std::move(d.new_token_ids);
    event.text = std::move(d.text);
    event.logprobs = std::move(logprobs);
    event.prompt_logprobs = std::move(prompt_logprobs);
    event.finished = d.finished;
    if (d.finished) event.finish_reason = c.finish_reason;
    event.request_finished = request_done;
    if (request_done) event.num_cached_tokens = out.num_cached_tokens;
    event.delta = std::move(chat_delta);
  }
}

}  // namespace deepinfer

namespace deepinfer {

GenerationStream::GenerationStream(std::unique_ptr<GenerationRun> run) : run_(std::move(run)) {}
GenerationStream::GenerationStream(GenerationStream&&) noexcept = default;
GenerationStream& GenerationStream::operator=(GenerationStream&&) noexcept = default;
GenerationStream::~GenerationStream() = default;

std::optional<StreamEvent> GenerationStream::next() {
  while (next_ == pending_.size()) {
    if (!run_ || run_->done()) return std::nullopt;
    pending_.clear();
    next_ = 0;
    try {
      run_->step(pending_);
    } catch (...) {
      run_->abort_all();  // nothing more comes from a failed step
      throw;
    }
  }
  return std::move(pending_[next_++]);
}

bool GenerationStream::finished() const { return next_ == pending_.size() && (!run_ || run_->done()); }

const std::vector<RequestOutput>& GenerationStream::outputs() const {
  static const std::vector<RequestOutput> none;
  return run_ ? run_->outputs() : none;
}

}  // namespace deepinfer
