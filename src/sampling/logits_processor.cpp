#include "sampling/logits_processor.h"

#include <limits>

namespace deepinfer::sampling {

GrammarLogitsProcessor::GrammarLogitsProcessor(std::shared_ptr<const structured::TokenGrammar> grammar)
    : matcher_(std::move(grammar)), mask_(matcher_.token_grammar().vocab().mask_words()) {}

void GrammarLogitsProcessor::wait_for_prefetch() {
  if (pending_.valid()) pending_.get();
}

void GrammarLogitsProcessor::prefetch_mask() {
  wait_for_prefetch();
  pending_ = matcher_.fill_next_token_bitmask_async(mask_);
  mask_ready_ = true;
}

void GrammarLogitsProcessor::apply(std::span<float> logits) {
  if (mask_ready_) {
    wait_for_prefetch();
  } else {
    matcher_.fill_next_token_bitmask(mask_);
  }
  mask_ready_ = false;
  const size_t vocab = matcher_.token_grammar().vocab().vocab_size();
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i >= vocab || !structured::test_mask_bit(mask_, static_cast<int32_t>(i))) logits[i] = kMasked;
  }
}

void GrammarLogitsProcessor::allowed_bits(std::span<uint32_t> words) {
  if (mask_ready_) {
    wait_for_prefetch();
  } else {
    matcher_.fill_next_token_bitmask(mask_);
  }
  mask_ready_ = false;
  const size_t vocab = matcher_.token_grammar().vocab().vocab_size();
  for (size_t w = 0; w < words.size(); ++w) {
    uint32_t bits = w < mask_.size() ? static_cast<uint32_t>(mask_[w]) : 0u;
    if ((w + 1) * 32 > vocab) bits &= w * 32 >= vocab ? 0u : (1u << (vocab - w * 32)) - 1u;  // ids past the grammar's vocabulary
    words[w] = bits;
  }
}

bool GrammarLogitsProcessor::accept(int32_t token) {
  wait_for_prefetch();
  mask_ready_ = false;
  return matcher_.accept_token(token);
}

void GrammarLogitsProcessor::rollback(size_t tokens) {
  wait_for_prefetch();
  mask_ready_ = false;
  matcher_.rollback(tokens);
}

bool GrammarLogitsProcessor::is_finished() const { return matcher_.is_terminated(); }

}  // namespace deepinfer::sampling
