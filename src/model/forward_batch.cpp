#include "model/forward_batch.h"

#include "core/error.h"

namespace deepinfer::model {

void ForwardBatch::add(int32_t slot, std::span<const int32_t> blocks, int64_t start,
                       std::span<const int32_t> new_tokens, bool want_logits, bool all_logits) {
  DEEPINFER_CHECK(!new_tokens.empty(), "a sequence in a forward batch needs at least one token");
  backend::SeqSlice s;
  s.begin = num_tokens();
  s.count = static_cast<int64_t>(new_tokens.size());
  s.start = start;
  s.slot = slot;
  s.blocks = blocks;
  for (int64_t i = 0; i < s.count; ++i) {
    tokens.push_back(new_tokens[static_cast<size_t>(i)]);
    positions.push_back(start + i);
    if (want_logits && (all_logits || i + 1 == s.count)) logit_rows.push_back(s.begin + i);
  }
  seqs.push_back(s);
}

void ForwardBatch::clear() {
  tokens.clear();
  positions.clear();
  seqs.clear();
  logit_rows.clear();
}

}  // namespace deepinfer::model
