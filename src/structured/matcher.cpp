#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

namespace deepinfer::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar)
    : grammar_(std::move(grammar)), engine_(grammar_->grammar()) {
  depth_sets_.resize(grammar_->vocab().max_token_length() + 2);
  reset();
}

void GrammarMatcher::reset() {
  history_.assign(1, {engine_.pool().get(grammar_->grammar().root_start(), NodePool::kRoot)});
  terminated_ = false;
}

bool GrammarMatcher::advance_bytes(std::string_view bytes, std::vector<uint32_t>& origins) {
  for (char c : bytes) {
    engine_.closure(origins, scratch_);
    if (!engine_.step(scratch_, static_cast<uint8_t>(c), scratch2_)) return false;
    origins.swap(scratch2_);
  }
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const auto& vocab = grammar_->vocab();
  if (terminated_ || id < 0 || static_cast<size_t>(id) >= vocab.vocab_size()) return false;
  if (vocab.is_stop_token(id)) {
    if (!can_end()) return false;
    history_.push_back(history_.back());
    terminated_ = true;
    return true;
  }
  if (vocab.is_special(id) || vocab.token(id).empty()) return false;
  std::vector<uint32_t> origins = history_.back();
  if (!advance_bytes(vocab.token(id), origins)) return false;
  std::sort(origins.begin(), origins.end());
  history_.push_back(std::move(origins));
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  std::vector<uint32_t> origins = history_.back();
  if (!advance_bytes(bytes, origins)) return false;
  std::sort(origins.begin(), origins.end());
  history_.back() = std::move(origins);
  return true;
}

void GrammarMatcher::rollback(size_t count) {
  DEEPINFER_CHECK(count <= tokens_accepted(), "cannot roll back {} tokens, only {} accepted", count, tokens_accepted());
  if (count == 0) return;
  history_.resize(history_.size() - count);
  terminated_ = false;
}

bool GrammarMatcher::can_end() {
  if (terminated_) return false;
  return engine_.closure(history_.back(), scratch_).can_end;
}

void GrammarMatcher::check_uncertain(uint32_t node, const StateTokenMasks& masks, std::span<int32_t> mask) {
  const auto& vocab = grammar_->vocab();
  auto& sets = depth_sets_;
  engine_.closure({&node, 1}, sets[0]);
  size_t computed = 0;               // sets[0..computed] describe the current prefix
  size_t fail_depth = SIZE_MAX;      // the previous token's prefix of this length is dead
  for (size_t k = 0; k < masks.uncertain.size(); ++k) {
    const int32_t id = masks.uncertain[k];
    const std::string& bytes = vocab.token(id);
    const size_t lcp = masks.uncertain_lcp[k];
    if (fail_depth <= lcp) continue;
    fail_depth = SIZE_MAX;
    size_t d = std::min(lcp, computed);
    for (; d < bytes.size(); ++d) {
      if (!engine_.step(sets[d], static_cast<uint8_t>(bytes[d]), scratch2_)) {
        fail_depth = d + 1;
        break;
      }
      engine_.closure(scratch2_, sets[d + 1]);
    }
    computed = d;
    if (fail_depth == SIZE_MAX) set_mask_bit(mask, id);
  }
}

void GrammarMatcher::fill_next_token_bitmask(std::span<int32_t> mask) {
  const auto& vocab = grammar_->vocab();
  DEEPINFER_CHECK(mask.size() >= vocab.mask_words(), "bitmask has {} words, need {}", mask.size(), vocab.mask_words());
  std::fill(mask.begin(), mask.end(), 0);
  if (terminated_) return;
  const auto& states = grammar_->grammar().states();
  auto& pool = engine_.pool();
  // Stack tops whose cached masks apply: each top, and its caller's return point whenever the
  // top's rule can end before the next byte.
  std::vector<uint32_t> tops;
  bool can_end = false;
  for (uint32_t n : history_.back()) {
    while (true) {
      if (std::find(tops.begin(), tops.end(), n) != tops.end()) break;
      tops.push_back(n);
      if (!states[pool[n].state].can_exit) break;
      uint32_t parent = pool[n].parent;
      if (parent == NodePool::kRoot) {
        can_end = true;
        break;
      }
      n = parent;
    }
  }
  std::vector<uint32_t> seen_states;
  auto* words = reinterpret_cast<uint32_t*>(mask.data());
  for (uint32_t n : tops) {
    uint32_t state = pool[n].state;
    const auto& masks = grammar_->masks(state);
    if (std::find(seen_states.begin(), seen_states.end(), state) == seen_states.end()) {
      seen_states.push_back(state);
      if (!masks.accepted_bits.empty()) {
        const uint32_t* bits = masks.accepted_bits.data();
        for (size_t w = 0; w < vocab.mask_words(); ++w) words[w] |= bits[w];
      } else {
        for (int32_t id : masks.accepted_ids) set_mask_bit(mask, id);
      }
    }
    if (!masks.uncertain.empty()) check_uncertain(n, masks, mask);
  }
  if (can_end) {
    for (int32_t stop : vocab.stop_tokens()) set_mask_bit(mask, stop);
  }
}

std::future<void> GrammarMatcher::fill_next_token_bitmask_async(std::span<int32_t> mask) {
  return std::async(std::launch::async, [this, mask] { fill_next_token_bitmask(mask); });
}

}  // namespace deepinfer::structured
