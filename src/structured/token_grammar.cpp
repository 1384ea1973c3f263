#include "structured/token_grammar.h"

#include "structured/stack_set.h"

namespace deepinfer::structured {
namespace {

// Above this many accepted tokens a state stores a bitset instead of an id list.
constexpr size_t kDenseThreshold = 2048;

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

TokenGrammar::TokenGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenizerIndex> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  const auto& g = *grammar_;
  const auto& states = g.states();
  // States a stack top can rest in: after a byte, at a return point, or the root start.
  std::vector<char> needed(states.size(), 0);
  needed[g.root_start()] = 1;
  for (auto& e : g.edges()) needed[e.target] = 1;
  for (auto& c : g.calls()) needed[c.target] = 1;
  masks_.resize(states.size());

  StackEngine engine(g);
  const auto& trie = vocab_->trie();
  const auto& order = vocab_->token_order();
  const size_t max_depth = vocab_->max_token_length() + 1;
  std::vector<std::vector<uint32_t>> expanded(max_depth + 1);
  std::vector<char> exited(max_depth + 1, 0), unsure(max_depth + 1, 0);
  std::vector<uint32_t> origins;

  for (uint32_t s = 0; s < states.size(); ++s) {
    if (!needed[s]) continue;
    auto& out = masks_[s];
    out.computed = true;
    ++stats_.states_cached;
    if (states[s].edges_begin == states[s].edges_end && states[s].calls_begin == states[s].calls_end) continue;
    const ByteSet& follow = g.rule_follow(states[s].rule);
    uint32_t origin = engine.pool().get(s, NodePool::kBoundary);
    engine.closure({&origin, 1}, expanded[0]);
    exited[0] = 0;  // leaving the rule before any byte is the caller's business
    unsure[0] = 0;
    std::vector<int32_t> uncertain;
    size_t i = 0;
    const size_t n = vocab_->trie_size();
    while (i < n) {
      const auto& node = trie[i];
      const size_t d = node.depth;
      bool maybe = unsure[d - 1] || (exited[d - 1] && follow.test(node.byte));
      if (!engine.step(expanded[d - 1], node.byte, origins)) {
        if (maybe) {
          for (uint32_t t = node.tokens_begin; t < trie[node.subtree_end].tokens_begin; ++t) uncertain.push_back(order[t]);
        }
        i = node.subtree_end;
        continue;
      }
      auto flags = engine.closure(origins, expanded[d]);
      exited[d] = flags.exited;
      unsure[d] = maybe;
      for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) out.accepted_ids.push_back(order[t]);
      ++i;
    }
    stats_.accepted += out.accepted_ids.size();
    stats_.uncertain += uncertain.size();
    if (out.accepted_ids.size() > kDenseThreshold) {
      out.accepted_bits.assign(vocab_->mask_words(), 0);
      for (int32_t id : out.accepted_ids) out.accepted_bits[id >> 5] |= 1u << (id & 31);
      out.accepted_ids.clear();
      out.accepted_ids.shrink_to_fit();
    }
    out.uncertain_lcp.reserve(uncertain.size());
    for (size_t k = 0; k < uncertain.size(); ++k) {
      size_t lcp = k == 0 ? 0 : common_prefix(vocab_->token(uncertain[k - 1]), vocab_->token(uncertain[k]));
      out.uncertain_lcp.push_back(static_cast<uint16_t>(lcp));
    }
    out.uncertain = std::move(uncertain);
  }
}

}  // namespace deepinfer::structured
