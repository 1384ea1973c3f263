#include "engine/output_text.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::engine {

OutputText::OutputText(const Tokenizer* tokenizer, bool skip_special_tokens, std::vector<std::string> stop,
                       bool include_stop_str_in_output, int64_t min_tokens)
    : stop_(std::move(stop)), include_stop_(include_stop_str_in_output), min_tokens_(min_tokens) {
  DEEPINFER_CHECK(tokenizer || stop_.empty(), "stop strings need a tokenizer (the model folder has no tokenizer.json)");
  for (const auto& s : stop_) DEEPINFER_CHECK(!s.empty(), "stop strings must not be empty");
  if (tokenizer) detokenizer_.emplace(*tokenizer, skip_special_tokens);
}

bool OutputText::append(const std::string& piece) {
  if (piece.empty() || stopped()) return stopped();
  if (stop_.empty() || pushed_ <= min_tokens_) {
    text_ += piece;
    return false;
  }
  // A match ends in the new piece, so it starts at most s.size() - 1 bytes before it.
  const size_t old_size = text_.size();
  text_ += piece;
  size_t best = std::string::npos;
  for (const auto& s : stop_) {
    const size_t at = text_.find(s, old_size > s.size() - 1 ? old_size - (s.size() - 1) : 0);
    if (at < best) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) text_.resize(include_stop_ ? best + matched_->size() : best);
  return stopped();
}

bool OutputText::push(int32_t id) {
  if (!detokenizer_ || stopped() || ended_) return stopped();
  ++pushed_;
  return append(detokenizer_->push(id));
}

bool OutputText::flush() {
  if (detokenizer_ && !stopped() && !ended_) append(detokenizer_->flush());
  ended_ = true;
  return stopped();
}

size_t OutputText::held_back() const {
  size_t held = 0;
  if (include_stop_) return 0;  // a stop string that completes stays in the text: nothing to retract
  const size_t open = text_.size() - emitted_;
  for (const auto& s : stop_) {
    for (size_t k = std::min(s.size() - 1, open); k > held; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

std::string OutputText::take_delta() {
  size_t end = text_.size();
  if (!ended_ && !stopped()) {
    end -= held_back();
    // Never split a UTF-8 character (text_ is complete UTF-8, so a boundary is never far).
    while (end > emitted_ && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
  }
  std::string delta = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return delta;
}

}  // namespace deepinfer::engine
