#include "engine/model_runner.h"

#include "core/error.h"

namespace deepinfer::engine {

bool returns_all_rows(const StepPlan::Entry& e) {
  return e.seq->all_prompt_logits && e.start < e.seq->num_prompt_tokens - 1;
}

int64_t logit_rows(const StepPlan::Entry& e) { return returns_all_rows(e) ? e.num_tokens : e.sample ? 1 : 0; }

ModelRunner::ModelRunner(const model::CausalLM& model, kv::StatePool& pool)
    : model_(model), pool_(pool), vocab_(model.vocab_size()) {
  DEEPINFER_CHECK(vocab_ > 0, "model reports vocab_size {}", vocab_);
}

void ModelRunner::build_batch(const StepPlan& plan) {
  batch_.clear();
  for (const auto& e : plan.entries) {
    const Sequence& s = *e.seq;
    DEEPINFER_CHECK(s.slot.has_value() && e.start == s.num_computed && e.start + e.num_tokens <= s.num_tokens(),
                    "step plan entry for request {} is stale (start {}, {} tokens, {} computed of {})", s.id, e.start,
                    e.num_tokens, s.num_computed, s.num_tokens());
    const auto tokens = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(e.start),
                                                                   static_cast<size_t>(e.num_tokens));
    const bool all_rows = returns_all_rows(e);
    batch_.add(*s.slot, s.blocks, e.start, tokens, /*want_logits=*/e.sample || all_rows, all_rows);
    batch_.seqs.back().window_floor = s.window_floor;  // prefix-cache hit bounds (bounded replay)
    batch_.seqs.back().cached_until = s.cached_until;
    batch_.seqs.back().prompt_end = s.num_prompt_tokens;  // V4.1 decoder bounded replay
    batch_.seqs.back().prior_tokens = std::span<const int32_t>(s.tokens).first(static_cast<size_t>(e.start));
  }
}

std::span<const float> ModelRunner::execute(const StepPlan& plan) {
  logits_.clear();
  build_batch(plan);
  if (plan.empty()) return {};
  model_.forward(batch_, pool_, logits_);
  const size_t rows = batch_.logit_rows.size();
  DEEPINFER_CHECK(logits_.size() == rows * static_cast<size_t>(vocab_),
                  "model returned {} logits for {} rows of vocab_size {}", logits_.size(), rows, vocab_);
  return logits_;
}

std::span<const int32_t> ModelRunner::execute_sampled(const StepPlan& plan, std::span<const backend::SampleRow> rows) {
  tokens_.clear();
  build_batch(plan);
  if (plan.empty()) return {};
  DEEPINFER_CHECK(rows.size() == batch_.logit_rows.size(), "internal error: {} sample rows for a step of {} logits rows",
                  rows.size(), batch_.logit_rows.size());
  model_.forward_sampled(batch_, pool_, rows, tokens_);
  DEEPINFER_CHECK(tokens_.size() == rows.size(), "model returned {} tokens for {} rows", tokens_.size(), rows.size());
  return tokens_;
}

}  // namespace deepinfer::engine
