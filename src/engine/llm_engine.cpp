#include "engine/llm_engine.h"

#include <algorithm>
#include <limits>
#include <random>

#include "core/error.h"
#include "engine/memory_budget.h"
#include "sampling/random.h"

namespace deepinfer::engine {

namespace {

// The pool for max_num_seqs sequences within the budget, never larger than those sequences can
// use at the model's full context.
kv::StatePool make_pool(const model::CausalLM& model, const EngineOptions& options) {
  options.limits.validate();
  const kv::StateLayout& layout = model.state_layout();
  size_t budget = options.kv_memory_bytes ? options.kv_memory_bytes : default_kv_memory_bytes();
  const int64_t context = model.config().max_position_embeddings;
  if (context > 0) {
    const auto seqs = static_cast<size_t>(options.limits.max_num_seqs);
    const size_t useful = seqs * layout.slot_bytes() +
                          seqs * static_cast<size_t>(layout.blocks_for(context)) * layout.block_bytes();
    budget = std::min(budget, useful);
  }
  return kv::StatePool::from_budget(layout, budget, options.limits.max_num_seqs, model.backend().allocator());
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

LLMEngine::LLMEngine(const model::CausalLM& model, const Tokenizer* tokenizer, EngineOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      pool_(make_pool(model, options_)),
      scheduler_(pool_, make_policy(options_.policy, options_.limits)),
      runner_(model, pool_) {
  for (int64_t id : model_.config().eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_ && tokenizer_->eos_id()) eos_ids_.push_back(*tokenizer_->eos_id());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  const int64_t model_context = model_.config().max_position_embeddings;
  const int64_t pool_positions = pool_.num_blocks() * pool_.layout().block_tokens;
  context_limit_ = model_context > 0 ? std::min(model_context, pool_positions) : pool_positions;
  seed_base_ = options_.seed ? *options_.seed : random_seed();
}

LLMEngine::~LLMEngine() = default;

uint64_t LLMEngine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  params.sampling.validate();
  const int64_t vocab = model_.vocab_size();
  DEEPINFER_CHECK(!prompt.empty(), "the prompt is empty: at least one token id is needed");
  for (size_t i = 0; i < prompt.size(); ++i)
    DEEPINFER_CHECK(prompt[i] >= 0 && prompt[i] < vocab, "prompt token {} (at index {}) is outside the vocabulary [0, {})",
                    prompt[i], i, vocab);
  const auto length = static_cast<int64_t>(prompt.size());
  const int64_t model_context = model_.config().max_position_embeddings;
  if (model_context > 0 && length > model_context)
    fail("the prompt has {} tokens but the model's context is {} positions", length, model_context);
  DEEPINFER_CHECK(length <= context_limit_,
                  "the prompt has {} tokens but the state pool holds at most {} positions per sequence ({} blocks of {} "
                  "tokens): raise the memory budget (--kv-memory)",
                  length, context_limit_, pool_.num_blocks(), pool_.layout().block_tokens);

  const uint64_t id = next_id_++;
  OutputText text(tokenizer_, params.skip_special_tokens, params.stop);  // checks the stop strings
  auto req = std::make_unique<Request>(Request{Sequence{}, std::move(params), std::move(text), Clock::now(), {}});
  // Unseeded requests draw distinct streams: a seed derived from the engine's and the request id.
  req->params.sampling.seed =
      req->params.seed ? *req->params.seed : sampling::mix64(seed_base_ + 0x9E3779B97F4A7C15ull * (id + 1));
  Sequence& seq = req->seq;
  seq.id = id;
  seq.tokens = std::move(prompt);
  seq.num_prompt_tokens = length;
  seq.max_positions = std::min(length + req->params.sampling.max_tokens - 1, context_limit_);
  scheduler_.add(seq);
  stats_.prompt_tokens += length;
  requests_.emplace(id, std::move(req));
  return id;
}

bool LLMEngine::abort(uint64_t id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  scheduler_.abort(it->second->seq);
  requests_.erase(it);
  ++stats_.aborted_requests;
  return true;
}

void LLMEngine::append_token(Request& req, int32_t token, RequestDelta& out) {
  Sequence& seq = req.seq;
  const auto& sp = req.params.sampling;
  if (seq.num_output_tokens() == 0) req.first_token = Clock::now();
  seq.tokens.push_back(token);
  out.new_token_ids.push_back(token);
  ++stats_.generated_tokens;

  // vLLM's order: EOS, stop token ids, stop strings, then the length limits.
  const bool eos = !sp.ignore_eos && std::binary_search(eos_ids_.begin(), eos_ids_.end(), token);
  const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), token) != sp.stop_token_ids.end();
  if (eos || stop_id) {
    out.finished = true;
    out.finish_reason = FinishReason::Stop;
    out.stop_token = token;
  } else if (req.text.push(token)) {
    out.finished = true;
    out.finish_reason = FinishReason::Stop;
  } else if (seq.num_output_tokens() >= sp.max_tokens || seq.num_tokens() > context_limit_) {
    // Feeding the token back would put it at position num_tokens - 1.
    out.finished = true;
    out.finish_reason = FinishReason::Length;
  }
  if (out.finished && req.text.flush()) out.finish_reason = FinishReason::Stop;
  if (req.text.stopped()) out.stop_string = req.text.matched_stop();
  out.text = req.text.take_delta();
}

std::vector<RequestDelta> LLMEngine::step() {
  std::vector<RequestDelta> outputs;
  if (requests_.empty()) return outputs;
  const StepPlan plan = scheduler_.schedule();
  stats_.preemptions = scheduler_.preemptions();
  DEEPINFER_CHECK(!plan.empty(), "internal error: {} unfinished requests but nothing could be scheduled ({} free blocks)",
                  requests_.size(), pool_.free_block_count());
  const std::span<const float> logits = runner_.execute(plan);
  scheduler_.complete(plan);
  ++stats_.steps;
  stats_.scheduled_tokens += plan.num_tokens;

  const auto vocab = static_cast<size_t>(runner_.vocab_size());
  size_t row = 0;
  for (const auto& e : plan.entries) {
    if (!e.sample) continue;
    const auto row_logits = logits.subspan(row++ * vocab, vocab);
    Request& req = *requests_.at(e.seq->id);
    // The RNG is keyed by (request seed, index of the token being generated): batch-independent.
    const int32_t token =
        sampler_.sample(row_logits, req.params.sampling, static_cast<uint64_t>(req.seq.num_output_tokens()));
    RequestDelta& out = outputs.emplace_back();
    out.id = req.seq.id;
    out.seed = req.params.sampling.seed;
    if (req.params.return_logits) out.logits.assign(row_logits.begin(), row_logits.end());
    append_token(req, token, out);
    if (out.finished) {
      const auto now = Clock::now();
      out.time_to_first_token = seconds(req.first_token - req.arrival);
      out.total_time = seconds(now - req.arrival);
      scheduler_.finish(req.seq);
      ++stats_.finished_requests;
      requests_.erase(out.id);
    }
  }
  return outputs;
}

}  // namespace deepinfer::engine
