#include "structured/compiled_grammar.h"

#include <algorithm>
#include <functional>
#include <map>

#include "structured/fsm.h"
#include "structured/stack_set.h"

namespace deepinfer::structured {
namespace {

// Inlining a non-recursive rule larger than this (in expression nodes) keeps it as a call.
constexpr size_t kInlineLimit = 20000;
// A rule whose subset construction stops (too many DFA states, or too much work) is matched as an
// NFA, whose every live state costs each byte of each token: up to this many states. Above it the
// grammar is refused, since matching would stall decoding (([a-z]{0,200}){0,200}, 40,000 states:
// 24 ms a byte).
constexpr size_t kMaxNfaRuleStates = 4096;

size_t expr_size(const Expr& e) {
  size_t n = 1;
  if (e.kind == Expr::Kind::kAutomaton) return e.automaton->states.size();
  size_t child_total = 0;
  for (auto& c : e.children) child_total += expr_size(*c);
  if (e.kind == Expr::Kind::kRepeat) {
    uint64_t copies = e.max == kUnbounded ? e.min + 1 : e.max;
    return n + std::min<uint64_t>(copies * child_total, 1u << 30);
  }
  return n + child_total;
}

void collect_refs(const Expr& e, std::vector<int>& out) {
  if (e.kind == Expr::Kind::kRef) out.push_back(e.rule);
  if (e.kind == Expr::Kind::kAutomaton) {
    for (auto& s : e.automaton->states) {
      for (auto& r : s.refs) out.push_back(r.rule);
    }
  }
  for (auto& c : e.children) collect_refs(*c, out);
}

// Rules on a reference cycle (Tarjan's strongly connected components).
std::vector<char> recursive_rules(const std::vector<std::vector<int>>& graph) {
  const int n = static_cast<int>(graph.size());
  std::vector<int> index(n, -1), low(n, 0), stack;
  std::vector<char> on_stack(n, 0), recursive(n, 0);
  int counter = 0;
  std::function<void(int)> connect = [&](int v) {
    index[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = 1;
    for (int w : graph[v]) {
      if (index[w] < 0) {
        connect(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on_stack[w]) {
        low[v] = std::min(low[v], index[w]);
      }
    }
    if (low[v] == index[v]) {
      std::vector<int> component;
      int w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = 0;
        component.push_back(w);
      } while (w != v);
      bool self_loop = std::find(graph[v].begin(), graph[v].end(), v) != graph[v].end();
      if (component.size() > 1 || self_loop) {
        for (int c : component) recursive[c] = 1;
      }
    }
  };
  for (int v = 0; v < n; ++v) {
    if (index[v] < 0) connect(v);
  }
  return recursive;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(const Grammar& grammar) {
  const auto& rules = grammar.rules();
  const int n = static_cast<int>(rules.size());
  if (grammar.root() < 0 || grammar.root() >= n) throw_invalid("root", "grammar has no root rule");
  std::vector<std::vector<int>> graph(n);
  for (int r = 0; r < n; ++r) {
    if (!rules[r].body) throw_invalid("rule", fmt::format("rule '{}' is referenced but never defined", rules[r].name));
    collect_refs(*rules[r].body, graph[r]);
    for (int target : graph[r]) {
      if (target < 0 || target >= n) throw_invalid("rule", "reference to an unknown rule");
    }
  }
  std::vector<char> recursive = recursive_rules(graph);

  // Inline non-recursive rules bottom-up (memoized), keeping big ones as calls.
  std::vector<ExprPtr> expanded(n);
  std::vector<char> keep_as_call(n, 0);
  std::function<ExprPtr(const ExprPtr&)> expand = [&](const ExprPtr& e) -> ExprPtr {
    switch (e->kind) {
      case Expr::Kind::kRef: {
        int r = e->rule;
        if (recursive[r] || !rules[r].inlinable) return e;
        if (!expanded[r]) {
          expanded[r] = expand(rules[r].body);
          if (expr_size(*expanded[r]) > kInlineLimit) keep_as_call[r] = 1;
        }
        return keep_as_call[r] ? e : expanded[r];
      }
      case Expr::Kind::kSeq:
      case Expr::Kind::kAlt:
      case Expr::Kind::kRepeat: {
        std::vector<ExprPtr> children;
        bool changed = false;
        for (auto& c : e->children) {
          children.push_back(expand(c));
          changed = changed || children.back() != c;
        }
        if (!changed) return e;
        if (e->kind == Expr::Kind::kSeq) return make_seq(std::move(children));
        if (e->kind == Expr::Kind::kAlt) return make_alt(std::move(children));
        return make_repeat(children[0], e->min, e->max);
      }
      default: return e;
    }
  };

  // Rules that survive as automata: the root, recursive rules and big rules, as reached.
  std::vector<int> order;              // old rule index per new rule index
  std::map<int, int> new_index;
  std::vector<ExprPtr> bodies;
  auto ensure = [&](int r) {
    auto it = new_index.find(r);
    if (it != new_index.end()) return it->second;
    int id = static_cast<int>(order.size());
    new_index[r] = id;
    order.push_back(r);
    return id;
  };
  ensure(grammar.root());
  std::vector<Fsm> fsms;
  for (size_t i = 0; i < order.size(); ++i) {
    int r = order[i];
    ExprPtr body = recursive[r] || i == 0 ? expand(rules[r].body) : expanded[r] ? expanded[r] : expand(rules[r].body);
    Fsm nfa = build_nfa(*body);
    for (auto& st : nfa.states) {
      for (auto& ref : st.refs) ref.rule = ensure(ref.rule);
    }
    auto dfa = determinize(nfa, 20000);
    if (!dfa && nfa.states.size() > kMaxNfaRuleStates)
      throw_unsupported("size", fmt::format("a rule needs more than 20000 DFA states and its NFA has {} states "
                                            "(at most {})", nfa.states.size(), kMaxNfaRuleStates));
    fsms.push_back(dfa ? minimize(trim(*dfa)) : std::move(nfa));
  }
  const int m = static_cast<int>(fsms.size());

  // Productive rules (least fixpoint): a rule is productive when its automaton, using only calls
  // to rules already known productive, accepts some string. Calls to the others are dropped.
  std::vector<char> productive(m, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < m; ++r) {
      if (productive[r]) continue;
      Fsm restricted = fsms[r];
      for (auto& st : restricted.states) {
        std::erase_if(st.refs, [&](const FsmRefEdge& e) { return !productive[e.rule]; });
      }
      if (!language_is_empty(restricted)) productive[r] = 1, changed = true;
    }
  }
  for (int r = 0; r < m; ++r) {
    for (auto& st : fsms[r].states) {
      std::erase_if(st.refs, [&](const FsmRefEdge& e) { return !productive[e.rule]; });
    }
    fsms[r] = trim(fsms[r]);
  }
  if (!productive[0]) throw_unsatisfiable("grammar", "the grammar matches no string at all");

  auto out = std::make_shared<CompiledGrammar>();
  for (int r = 0; r < m; ++r) {
    out->rule_start_.push_back(static_cast<uint32_t>(out->states_.size()) + fsms[r].start);
    out->rule_names_.push_back(rules[order[r]].name);
    out->states_.resize(out->states_.size() + fsms[r].states.size());
  }
  for (int r = 0; r < m; ++r) {
    uint32_t base = out->rule_start_[r] - fsms[r].start;
    for (size_t s = 0; s < fsms[r].states.size(); ++s) {
      auto& src = fsms[r].states[s];
      auto& dst = out->states_[base + s];
      dst.rule = r;
      dst.final = src.final;
      dst.edges_begin = static_cast<uint32_t>(out->edges_.size());
      for (auto& e : src.edges) out->edges_.push_back({e.lo, e.hi, base + e.target});
      dst.edges_end = static_cast<uint32_t>(out->edges_.size());
      dst.calls_begin = static_cast<uint32_t>(out->calls_.size());
      for (auto& c : src.refs) out->calls_.push_back({static_cast<uint32_t>(c.rule), base + c.target});
      dst.calls_end = static_cast<uint32_t>(out->calls_.size());
    }
  }
  auto& states = out->states_;
  const size_t total = states.size();
  // can_exit: final, or an empty-matching call leads to a state that can exit.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& st : states) {
      if (st.can_exit) continue;
      bool exit = st.final;
      for (uint32_t c = st.calls_begin; c < st.calls_end && !exit; ++c) {
        auto& call = out->calls_[c];
        exit = states[out->rule_start_[call.rule]].can_exit && states[call.target].can_exit;
      }
      if (exit) st.can_exit = true, changed = true;
    }
  }
  auto nullable = [&](uint32_t rule) { return states[out->rule_start_[rule]].can_exit; };
  // Left recursion: a rule that can call itself (directly or not) before reading a byte.
  std::vector<std::vector<int>> left_calls(m);
  for (int r = 0; r < m; ++r) {
    std::vector<char> seen(total, 0);
    std::vector<uint32_t> stack{out->rule_start_[r]};
    seen[stack[0]] = 1;
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
        auto& call = out->calls_[c];
        left_calls[r].push_back(static_cast<int>(call.rule));
        if (nullable(call.rule) && !seen[call.target]) seen[call.target] = 1, stack.push_back(call.target);
      }
    }
  }
  auto left_recursive = recursive_rules(left_calls);
  for (int r = 0; r < m; ++r) {
    if (left_recursive[r]) {
      throw_unsupported("left-recursion", fmt::format("rule '{}' is left-recursive", out->rule_names_[r]));
    }
  }
  // FIRST bytes per state and FOLLOW bytes per rule, by fixpoint.
  std::vector<ByteSet> first(total);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < total; ++s) {
      ByteSet f = first[s];
      for (uint32_t e = states[s].edges_begin; e < states[s].edges_end; ++e) {
        f.set_range(out->edges_[e].lo, out->edges_[e].hi);
      }
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
        auto& call = out->calls_[c];
        f |= first[out->rule_start_[call.rule]];
        if (nullable(call.rule)) f |= first[call.target];
      }
      if (!(f == first[s])) first[s] = f, changed = true;
    }
  }
  out->rule_follow_.assign(m, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < total; ++s) {
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
        auto& call = out->calls_[c];
        ByteSet f = out->rule_follow_[call.rule];
        f |= first[call.target];
        if (states[call.target].can_exit) f |= out->rule_follow_[states[s].rule];
        if (!(f == out->rule_follow_[call.rule])) out->rule_follow_[call.rule] = f, changed = true;
      }
    }
  }
  return out;
}

bool CompiledGrammar::accepts(std::string_view bytes) const {
  StackSet stacks(*this);
  stacks.reset();
  for (char c : bytes) {
    if (!stacks.advance(static_cast<uint8_t>(c))) return false;
  }
  return stacks.can_end();
}

}  // namespace deepinfer::structured
