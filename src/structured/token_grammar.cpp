#include "structured/token_grammar.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>
#include <unordered_map>

#include "structured/fsm.h"
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

// The automaton's byte transitions as a dense table over byte classes, for the walk's fast
// path: most trie nodes are one lookup instead of an edge scan and a stack hash.
struct Transitions {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;   // no edge on this byte
  static constexpr uint32_t kMulti = 0xFFFFFFFEu;  // several (a state left nondeterministic)
  // Above this many table entries the table is not built and the walk scans edges instead.
  static constexpr size_t kMaxEntries = size_t{1} << 24;

  explicit Transitions(const CompiledGrammar& g) : grammar(&g) {
    const auto& states = g.states();
    ByteSet starts;  // first byte of every class
    starts.set(0);
    for (auto& e : g.edges()) {
      starts.set(e.lo);
      if (e.hi < 255) starts.set(static_cast<uint8_t>(e.hi + 1));
    }
    for (int b = 0, c = -1; b < 256; ++b) {
      if (starts.test(static_cast<uint8_t>(b))) ++c;
      byte_class[b] = static_cast<uint8_t>(c);
      classes = static_cast<size_t>(c) + 1;
    }
    simple.resize(states.size());
    loop.resize(states.size());
    loops.resize(states.size());
    for (size_t s = 0; s < states.size(); ++s) {
      simple[s] = states[s].calls_begin == states[s].calls_end && !states[s].final;
    }
    dense = states.size() * classes <= kMaxEntries;
    if (dense) table.assign(states.size() * classes, kNone);
    for (size_t s = 0; s < states.size(); ++s) {
      for (uint32_t e = states[s].edges_begin; e < states[s].edges_end; ++e) {
        const auto& edge = g.edges()[e];
        for (int b = edge.lo; b <= edge.hi; ++b) {
          if (edge.target == s) loop[s].set(static_cast<uint8_t>(b));
          if (!dense) continue;
          uint32_t& slot = table[s * classes + byte_class[b]];
          slot = slot == kNone || slot == edge.target ? edge.target : kMulti;
        }
      }
    }
    // A byte with two targets is not a loop byte even if one of them is the state itself.
    for (size_t s = 0; s < states.size(); ++s) {
      for (int b = 0; b < 256; ++b) {
        if (loop[s].test(static_cast<uint8_t>(b)) && next(static_cast<uint32_t>(s), static_cast<uint8_t>(b)) != s) {
          loop[s] = ByteSet{};
          break;
        }
      }
      loops[s] = !loop[s].empty();
    }
  }

  uint32_t next(uint32_t state, uint8_t byte) const {
    if (dense) return table[state * classes + byte_class[byte]];
    const auto& st = grammar->states()[state];
    uint32_t target = kNone;
    for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
      const auto& edge = grammar->edges()[e];
      if (edge.lo <= byte && byte <= edge.hi) target = target == kNone || target == edge.target ? edge.target : kMulti;
    }
    return target;
  }

  const CompiledGrammar* grammar;
  std::array<uint8_t, 256> byte_class{};
  size_t classes = 0;
  bool dense = false;
  std::vector<uint32_t> table;
  std::vector<char> simple;   // no calls and not final: reading into it needs no stack work
  std::vector<ByteSet> loop;  // bytes that lead back to the state itself (and nowhere else)
  std::vector<char> loops;    // loop is not empty
};

// What the tokens below one trie node do when the walk reaches that node's byte in one simple
// state over an unknown context: the same for every state that reads the byte into it.
struct SubtreeResult {
  std::vector<int32_t> accepted;   // descendants' tokens (the node's own are accepted anyway)
  std::vector<int32_t> uncertain;  // in trie order
};
using SubtreeKey = uint64_t;  // (first-byte trie node, state after it)
inline SubtreeKey subtree_key(size_t node, uint32_t state) { return (uint64_t{node} << 32) | state; }

// Computes the masks of one state at a time; one per thread (owns its stacks and scratch).
// The walk keeps, per trie depth, the set of parser stacks after that many bytes. Most of the
// time that set is one stack whose top is a "simple" state; it is then kept as (state, parent)
// and only turned into hash-consed stack nodes when the general step needs them.
class StateMaskBuilder {
 public:
  StateMaskBuilder(const CompiledGrammar& grammar, const TokenizerIndex& vocab, const Transitions& transitions,
                   const std::unordered_map<SubtreeKey, SubtreeResult>& shared_subtrees)
      : g(grammar), vocab(vocab), tr(transitions), shared(shared_subtrees), engine(grammar),
        levels(vocab.max_token_length() + 2) {}

  void build(uint32_t s, StateTokenMasks& out) {
    const auto& states = g.states();
    if (states[s].edges_begin == states[s].edges_end && states[s].calls_begin == states[s].calls_end) return;
    uint32_t origin = engine.pool().get(s, NodePool::kBoundary);
    engine.closure({&origin, 1}, levels[0].expanded);
    levels[0].set_expanded(engine.pool());
    levels[0].exited = false;  // leaving the rule before any byte is the caller's business
    levels[0].unsure = false;
    std::vector<int32_t> uncertain;
    walk(0, vocab.trie_size(), g.rule_follow(states[s].rule), out.accepted_ids, uncertain);
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

  // The descendants of first-byte node `node` when its byte led to simple `state`.
  SubtreeResult build_subtree(size_t node, uint32_t state) {
    const auto& trie = vocab.trie();
    levels[1].set_single(state, NodePool::kBoundary);
    levels[1].exited = false;
    levels[1].unsure = false;  // no byte before the first can have left the rule
    SubtreeResult result;
    walk(node + 1, trie[node].subtree_end, g.rule_follow(g.states()[state].rule), result.accepted, result.uncertain);
    return result;
  }

 private:
  // Walks trie nodes [begin, end) in preorder; levels[depth - 1] of the first node is set.
  void walk(size_t begin, size_t end, const ByteSet& follow, std::vector<int32_t>& accepted,
            std::vector<int32_t>& uncertain) {
    const auto& trie = vocab.trie();
    const auto& order = vocab.token_order();
    auto accept = [&](uint32_t first, uint32_t last) {
      accepted.insert(accepted.end(), order.begin() + first, order.begin() + last);
    };
    auto reject_subtree = [&](const TokenizerIndex::TrieNode& node, bool maybe) {
      if (maybe) uncertain.insert(uncertain.end(), order.begin() + node.tokens_begin, order.begin() + trie[node.subtree_end].tokens_begin);
    };
    size_t i = begin;
    while (i < end) {
      const auto& node = trie[i];
      const size_t d = node.depth;
      Level& from = levels[d - 1];
      Level& to = levels[d];
      bool maybe = from.unsure || (from.exited && follow.test(node.byte));
      if (from.single) {
        uint32_t target = tr.next(from.state, node.byte);
        if (target == Transitions::kNone) {
          reject_subtree(node, maybe);
          i = node.subtree_end;
          continue;
        }
        if (target != Transitions::kMulti && tr.simple[target]) {
          to.set_single(target, from.parent);
          to.exited = false;
          to.unsure = maybe;
          accept(node.tokens_begin, node.tokens_end);
          if (node.subtree_end > i + 1) {
            // Every byte below loops on the target: the whole subtree stays in this rule.
            if (tr.loops[target] && vocab.descendant_bytes(i).subset_of(tr.loop[target])) {
              accept(node.tokens_end, trie[node.subtree_end].tokens_begin);
              i = node.subtree_end;
              continue;
            }
            // Another state already led into the target on this first byte: reuse its walk.
            if (d == 1 && !shared.empty()) {
              auto it = shared.find(subtree_key(i, target));
              if (it != shared.end()) {
                accepted.insert(accepted.end(), it->second.accepted.begin(), it->second.accepted.end());
                uncertain.insert(uncertain.end(), it->second.uncertain.begin(), it->second.uncertain.end());
                i = node.subtree_end;
                continue;
              }
            }
          }
          ++i;
          continue;
        }
      }
      if (!engine.step(from.stacks(engine.pool()), node.byte, origins)) {
        reject_subtree(node, maybe);
        i = node.subtree_end;
        continue;
      }
      auto flags = engine.closure(origins, to.expanded);
      to.set_expanded(engine.pool());
      to.exited = flags.exited;
      to.unsure = maybe;
      accept(node.tokens_begin, node.tokens_end);
      ++i;
    }
  }

  // The stacks after some bytes: either one stack kept as (state, parent), or expanded nodes.
  struct Level {
    bool single = false;  // exactly one stack, whose top is `state` over `parent`
    bool have_nodes = false;
    uint32_t state = 0, parent = 0;
    std::vector<uint32_t> expanded;
    bool exited = false, unsure = false;

    void set_single(uint32_t top, uint32_t below) {
      single = true, have_nodes = false, state = top, parent = below;
    }
    void set_expanded(const NodePool& pool) {
      have_nodes = true;
      single = expanded.size() == 1;
      if (single) state = pool[expanded[0]].state, parent = pool[expanded[0]].parent;
    }
    const std::vector<uint32_t>& stacks(NodePool& pool) {
      if (!have_nodes) expanded.assign(1, pool.get(state, parent)), have_nodes = true;
      return expanded;
    }
  };

  const CompiledGrammar& g;
  const TokenizerIndex& vocab;
  const Transitions& tr;
  const std::unordered_map<SubtreeKey, SubtreeResult>& shared;
  StackEngine engine;
  std::vector<Level> levels;
  std::vector<uint32_t> origins;

 public:
  size_t accepted_total = 0, uncertain_total = 0;
};

// Classes of states that no byte string of up to `depth` bytes tells apart: same rule, and
// step by step the same byte edges, final flags and calls (callee, then return point).
std::vector<int32_t> lookahead_classes(const CompiledGrammar& g, size_t depth) {
  const auto& states = g.states();
  std::vector<std::vector<int32_t>> predecessors(states.size());
  for (size_t s = 0; s < states.size(); ++s) {
    for (uint32_t e = states[s].edges_begin; e < states[s].edges_end; ++e) {
      predecessors[g.edges()[e].target].push_back(static_cast<int32_t>(s));
    }
    for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
      predecessors[g.calls()[c].target].push_back(static_cast<int32_t>(s));
    }
  }
  auto signature = [&](size_t s, const std::vector<int32_t>& cls, std::vector<int32_t>& sig) {
    const auto& st = states[s];
    sig.assign({static_cast<int32_t>(st.rule), st.final ? 1 : 0});
    int32_t prev_class = -2, prev_hi = -2;
    for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
      const auto& edge = g.edges()[e];
      int32_t c = cls[edge.target];
      if (c == prev_class && edge.lo == prev_hi + 1) {
        sig.back() = edge.hi;
      } else {
        sig.insert(sig.end(), {-3, c, edge.lo, edge.hi});
      }
      prev_class = c;
      prev_hi = edge.hi;
    }
    for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
      sig.insert(sig.end(), {-4, static_cast<int32_t>(g.calls()[c].rule), cls[g.calls()[c].target]});
    }
  };
  return refine_partition(states.size(), predecessors, signature, depth);
}

// Runs job(builder, k) for k in [0, count) over the builders' threads.
template <typename Job>
void parallel_for(std::vector<std::unique_ptr<StateMaskBuilder>>& builders, size_t count, Job job) {
  std::atomic<size_t> next{0};
  auto run = [&](StateMaskBuilder& builder) {
    for (size_t k; (k = next.fetch_add(1)) < count;) job(builder, k);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < builders.size(); ++t) pool.emplace_back(run, std::ref(*builders[t]));
  run(*builders[0]);
  for (auto& thread : pool) thread.join();
}

}  // namespace

TokenGrammar::TokenGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenizerIndex> vocab,
                           size_t threads)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  const auto& g = *grammar_;
  const auto& states = g.states();
  const auto& trie = vocab_->trie();
  // States a stack top can rest in: after a byte, at a return point, or the root start.
  std::vector<char> needed(states.size(), 0);
  needed[g.root_start()] = 1;
  for (auto& e : g.edges()) needed[e.target] = 1;
  for (auto& c : g.calls()) needed[c.target] = 1;
  // One walk per class of states that behave alike for max_token_length bytes (and two more, so
  // the closure after a token's last byte is covered too).
  std::vector<int32_t> cls = lookahead_classes(g, vocab_->max_token_length() + 2);
  std::vector<int32_t> representative(states.size(), -1);
  std::vector<uint32_t> work;
  mask_of_state_.assign(states.size(), 0);
  for (uint32_t s = 0; s < states.size(); ++s) {
    if (!needed[s]) continue;
    if (representative[cls[s]] < 0) {
      representative[cls[s]] = static_cast<int32_t>(work.size());
      work.push_back(s);
    }
    mask_of_state_[s] = static_cast<uint32_t>(representative[cls[s]]);
  }
  masks_.resize(std::max<size_t>(work.size(), 1));  // entry 0 also serves states never rested in
  stats_.states_cached = work.size();
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<size_t>({threads, size_t{16}, std::max<size_t>(1, work.size() / 4)});
  const Transitions transitions(g);

  // Many states read most first bytes into the same state (every position of a property-name
  // exclusion goes back into the plain string loop, say): walk each such subtree once.
  std::unordered_map<SubtreeKey, SubtreeResult> shared;
  {
    std::vector<size_t> first_bytes;
    for (size_t i = 0; i < vocab_->trie_size(); i = trie[i].subtree_end) {
      if (trie[i].subtree_end > i + 1) first_bytes.push_back(i);
    }
    std::unordered_map<SubtreeKey, uint32_t> uses;
    for (uint32_t s : work) {
      if (states[s].calls_begin != states[s].calls_end) continue;  // its walk does not start single
      for (size_t i : first_bytes) {
        uint32_t target = transitions.next(s, trie[i].byte);
        if (target < Transitions::kMulti && transitions.simple[target]) ++uses[subtree_key(i, target)];
      }
    }
    std::vector<SubtreeKey> keys;
    for (auto& [key, count] : uses) {
      if (count >= 2) keys.push_back(key);
    }
    std::vector<SubtreeResult> results(keys.size());
    std::vector<std::unique_ptr<StateMaskBuilder>> builders;
    static const std::unordered_map<SubtreeKey, SubtreeResult> kNone;
    for (size_t t = 0; t < threads; ++t) builders.push_back(std::make_unique<StateMaskBuilder>(g, *vocab_, transitions, kNone));
    parallel_for(builders, keys.size(), [&](StateMaskBuilder& b, size_t k) {
      results[k] = b.build_subtree(keys[k] >> 32, static_cast<uint32_t>(keys[k]));
    });
    for (size_t k = 0; k < keys.size(); ++k) shared.emplace(keys[k], std::move(results[k]));
  }

  std::vector<std::unique_ptr<StateMaskBuilder>> builders;
  for (size_t t = 0; t < threads; ++t) builders.push_back(std::make_unique<StateMaskBuilder>(g, *vocab_, transitions, shared));
  parallel_for(builders, work.size(), [&](StateMaskBuilder& b, size_t k) { b.build(work[k], masks_[k]); });
  for (auto& b : builders) {
    stats_.accepted += b->accepted_total;
    stats_.uncertain += b->uncertain_total;
  }
}

}  // namespace deepinfer::structured
