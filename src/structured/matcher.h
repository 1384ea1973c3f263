#pragma once
// Per-sequence grammar state over tokens: accept a token, roll back, ask whether the text so far
// is complete, and fill the next-token bitmask (int32 words, bit = 1: allowed) for the whole
// vocabulary. Stop tokens are allowed exactly when the grammar can end; other special tokens
// never. Not thread-safe; one matcher per sequence (the compiled grammar is shared).
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/stack_set.h"
#include "structured/token_grammar.h"

namespace deepinfer::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar);

  // Advances by one token; returns false (state unchanged) when the token is not allowed.
  bool accept_token(int32_t id);
  // Advances by raw bytes (not a token step: rollback does not count it). For tests / prompts.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last `count` accepted tokens (count <= tokens_accepted()).
  void rollback(size_t count);
  void reset();

  size_t tokens_accepted() const { return history_.size() - 1; }
  bool can_end();                                     // the text so far is a complete match
  bool is_terminated() const { return terminated_; }  // a stop token was accepted

  // Writes vocab().mask_words() words. After termination nothing is allowed.
  void fill_next_token_bitmask(std::span<int32_t> mask);
  // Runs fill_next_token_bitmask on a worker thread (to overlap a device step). The matcher and
  // `mask` must stay untouched until the future is ready.
  std::future<void> fill_next_token_bitmask_async(std::span<int32_t> mask);

  const TokenGrammar& token_grammar() const { return *grammar_; }

 private:
  bool advance_bytes(std::string_view bytes, std::vector<uint32_t>& origins);
  void check_uncertain(uint32_t node, const StateTokenMasks& masks, std::span<int32_t> mask);

  std::shared_ptr<const TokenGrammar> grammar_;
  StackEngine engine_;
  // history_[k]: stack tops after k accepted tokens; terminated_at_ marks a stop token.
  std::vector<std::vector<uint32_t>> history_;
  bool terminated_ = false;
  std::vector<std::vector<uint32_t>> depth_sets_;
  std::vector<uint32_t> scratch_, scratch2_;
};

}  // namespace deepinfer::structured
