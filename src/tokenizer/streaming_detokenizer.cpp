#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamingDetokenizer::push(int32_t id) {
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->token_bytes(id);
  // Emit complete characters; invalid subparts become U+FFFD at once (more bytes cannot fix
  // them); only a valid-but-unfinished tail is held back for the next token.
  std::string out;
  size_t position = 0;
  while (position < pending_.size()) {
    const utf8::SequenceScan scan = utf8::scan_sequence(pending_, position);
    if (scan.kind == utf8::SequenceScan::Kind::kTruncated) break;
    if (scan.kind == utf8::SequenceScan::Kind::kComplete) {
      out.append(pending_, position, scan.length);
    } else {
      out.append(utf8::kReplacementCharacter);
    }
    position += scan.length;
  }
  pending_.erase(0, position);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = utf8::repair_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer
