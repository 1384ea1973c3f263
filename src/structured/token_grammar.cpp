#include "structured/token_grammar.h"

#include <algorithm>
#include <atomic>
#include <thread>

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

// Computes the masks of one state at a time; one per thread (owns its stacks and scratch).
class StateMaskBuilder {
 public:
  StateMaskBuilder(const CompiledGrammar& grammar, const TokenizerIndex& vocab)
      : g(grammar), vocab(vocab), engine(grammar), expanded(vocab.max_token_length() + 2),
        exited(vocab.max_token_length() + 2, 0), unsure(vocab.max_token_length() + 2, 0) {}

  void build(uint32_t s, StateTokenMasks& out) {
    const auto& states = g.states();
    const auto& trie = vocab.trie();
    const auto& order = vocab.token_order();
    out.computed = true;
    if (states[s].edges_begin == states[s].edges_end && states[s].calls_begin == states[s].calls_end) return;
    const ByteSet& follow = g.rule_follow(states[s].rule);
    uint32_t origin = engine.pool().get(s, NodePool::kBoundary);
    engine.closure({&origin, 1}, expanded[0]);
    exited[0] = 0;  // leaving the rule before any byte is the caller's business
    unsure[0] = 0;
    std::vector<int32_t> uncertain;
    size_t i = 0;
    const size_t n = vocab.trie_size();
    while (i < n) {
      const auto& node = trie[i];
      const size_t d = node.depth;
      bool maybe = unsure[d - 1] || (exited[d - 1] && follow.test(node.byte));
      // Fast path: one stack whose state has a single edge for this byte and whose target
      // neither calls nor ends a rule (the common case inside strings and literals).
      if (expanded[d - 1].size() == 1) {
        const auto current = engine.pool()[expanded[d - 1][0]];
        const auto& st = states[current.state];
        uint32_t target = UINT32_MAX;
        int matches = 0;
        for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
          if (g.edges()[e].lo <= node.byte && node.byte <= g.edges()[e].hi) target = g.edges()[e].target, ++matches;
        }
        if (matches == 0) {
          if (maybe) {
            for (uint32_t t = node.tokens_begin; t < trie[node.subtree_end].tokens_begin; ++t) uncertain.push_back(order[t]);
          }
          i = node.subtree_end;
          continue;
        }
        const auto& next = states[target];
        if (matches == 1 && next.calls_begin == next.calls_end && !next.final) {
          expanded[d].assign(1, engine.pool().get(target, current.parent));
          exited[d] = 0;
          unsure[d] = maybe;
          for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) out.accepted_ids.push_back(order[t]);
          ++i;
          continue;
        }
      }
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
    accepted_total += out.accepted_ids.size();
    uncertain_total += uncertain.size();
    if (out.accepted_ids.size() > kDenseThreshold) {
      out.accepted_bits.assign(vocab.mask_words(), 0);
      for (int32_t id : out.accepted_ids) out.accepted_bits[id >> 5] |= 1u << (id & 31);
      out.accepted_ids.clear();
      out.accepted_ids.shrink_to_fit();
    }
    out.uncertain_lcp.reserve(uncertain.size());
    for (size_t k = 0; k < uncertain.size(); ++k) {
      size_t lcp = k == 0 ? 0 : common_prefix(vocab.token(uncertain[k - 1]), vocab.token(uncertain[k]));
      out.uncertain_lcp.push_back(static_cast<uint16_t>(lcp));
    }
    out.uncertain = std::move(uncertain);
  }

  const CompiledGrammar& g;
  const TokenizerIndex& vocab;
  StackEngine engine;
  std::vector<std::vector<uint32_t>> expanded;
  std::vector<char> exited, unsure;
  std::vector<uint32_t> origins;
  size_t accepted_total = 0, uncertain_total = 0;
};

}  // namespace

TokenGrammar::TokenGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenizerIndex> vocab,
                           size_t threads)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  const auto& g = *grammar_;
  const auto& states = g.states();
  // States a stack top can rest in: after a byte, at a return point, or the root start.
  std::vector<char> needed(states.size(), 0);
  needed[g.root_start()] = 1;
  for (auto& e : g.edges()) needed[e.target] = 1;
  for (auto& c : g.calls()) needed[c.target] = 1;
  masks_.resize(states.size());
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < states.size(); ++s) {
    if (needed[s]) work.push_back(s);
  }
  stats_.states_cached = work.size();
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<size_t>({threads, size_t{16}, std::max<size_t>(1, work.size() / 4)});
  std::atomic<size_t> next{0};
  std::vector<std::unique_ptr<StateMaskBuilder>> builders;
  for (size_t t = 0; t < threads; ++t) builders.push_back(std::make_unique<StateMaskBuilder>(g, *vocab_));
  auto run = [&](StateMaskBuilder& builder) {
    for (size_t k; (k = next.fetch_add(1)) < work.size();) builder.build(work[k], masks_[work[k]]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(run, std::ref(*builders[t]));
  run(*builders[0]);
  for (auto& thread : pool) thread.join();
  for (auto& b : builders) {
    stats_.accepted += b->accepted_total;
    stats_.uncertain += b->uncertain_total;
  }
}

}  // namespace deepinfer::structured
