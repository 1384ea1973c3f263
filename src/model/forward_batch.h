#pragma once
// One step of the model as plain data: every scheduled token of every sequence, concatenated, with
// each sequence's slice (its positions, state slot and block table) and the rows that need logits.
// Prefill chunks and decodes mix freely; a single-sequence call is a batch of one.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/state.h"

namespace deepinfer::model {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [T]
  std::vector<int64_t> positions;     // [T]
  std::vector<backend::SeqSlice> seqs;
  std::vector<int64_t> logit_rows;    // token indices whose logits are returned, in this order

  // Appends a sequence whose state holds `start` tokens. `blocks` must stay valid until the forward
  // returns and cover start + tokens.size() positions. Logits: every new token's row when
  // all_logits, else only the last one's (none when want_logits is false).
  void add(int32_t slot, std::span<const int32_t> blocks, int64_t start, std::span<const int32_t> new_tokens,
           bool want_logits = true, bool all_logits = false);
  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  void clear();
};

}  // namespace deepinfer::model
