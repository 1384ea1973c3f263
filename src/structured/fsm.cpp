#include "structured/fsm.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace deepinfer::structured {
namespace {

// A repeated body is minimised first when its automaton stays below this size.
constexpr size_t kMaxRepeatedBodyStates = 4096;

bool has_refs(const Expr& e) {
  if (e.kind == Expr::Kind::kRef) return true;
  if (e.kind == Expr::Kind::kAutomaton) return e.automaton->has_refs();
  for (auto& c : e.children) {
    if (has_refs(*c)) return true;
  }
  return false;
}

// Thompson automaton with epsilon edges; only used while building.
struct EpsNfa {
  struct State {
    std::vector<FsmEdge> edges;
    std::vector<FsmRefEdge> refs;
    std::vector<int32_t> eps;
    bool final = false;
  };
  std::vector<State> states;
  size_t max_states;

  int32_t add() {
    if (states.size() >= max_states) {
      throw_unsupported("size", fmt::format("grammar needs more than {} automaton states", max_states));
    }
    states.emplace_back();
    return static_cast<int32_t>(states.size()) - 1;
  }

  struct Fragment {
    int32_t start, end;
  };

  Fragment build(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kEmpty: {
        int32_t s = add();
        return {s, s};
      }
      case Expr::Kind::kNothing: {
        return {add(), add()};
      }
      case Expr::Kind::kBytes: {
        int32_t s = add(), t = add();
        int b = 0;
        while (b < 256) {
          if (!e.bytes.test(static_cast<uint8_t>(b))) {
            ++b;
            continue;
          }
          int lo = b;
          while (b + 1 < 256 && e.bytes.test(static_cast<uint8_t>(b + 1))) ++b;
          states[s].edges.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(b), t});
          ++b;
        }
        return {s, t};
      }
      case Expr::Kind::kSeq: {
        Fragment whole = build(*e.children[0]);
        for (size_t i = 1; i < e.children.size(); ++i) {
          Fragment next = build(*e.children[i]);
          states[whole.end].eps.push_back(next.start);
          whole.end = next.end;
        }
        return whole;
      }
      case Expr::Kind::kAlt: {
        int32_t s = add(), t = add();
        for (auto& child : e.children) {
          Fragment f = build(*child);
          states[s].eps.push_back(f.start);
          states[f.end].eps.push_back(t);
        }
        return {s, t};
      }
      case Expr::Kind::kRepeat: {
        // Copies of a byte-only body are made from its minimal automaton: a JSON string
        // character, {0,300} times, is then 300 x 14 states instead of 300 x 205.
        Expr minimal;
        const Expr* body = e.children[0].get();
        uint64_t copies = e.max == kUnbounded ? uint64_t{e.min} + 1 : e.max;
        if (copies >= 3 && body->kind != Expr::Kind::kAutomaton && !has_refs(*body)) {
          try {
            minimal.kind = Expr::Kind::kAutomaton;
            minimal.automaton = std::make_shared<const Fsm>(compile_dfa(*body, kMaxRepeatedBodyStates));
            body = &minimal;
          } catch (const GrammarError&) {
            // Too big to determinise on its own: copy the expression as it is.
          }
        }
        const Expr& inner = *body;
        int32_t s = add();
        int32_t cur = s;
        for (uint32_t i = 0; i < e.min; ++i) {
          Fragment f = build(inner);
          states[cur].eps.push_back(f.start);
          cur = f.end;
        }
        if (e.max == kUnbounded) {
          Fragment f = build(inner);
          int32_t t = add();
          states[cur].eps.push_back(f.start);
          states[cur].eps.push_back(t);
          states[f.end].eps.push_back(f.start);
          states[f.end].eps.push_back(t);
          return {s, t};
        }
        int32_t t = add();
        states[cur].eps.push_back(t);
        for (uint32_t i = e.min; i < e.max; ++i) {
          Fragment f = build(inner);
          states[cur].eps.push_back(f.start);
          states[f.end].eps.push_back(t);
          cur = f.end;
        }
        return {s, t};
      }
      case Expr::Kind::kRef: {
        int32_t s = add(), t = add();
        states[s].refs.push_back({e.rule, t});
        return {s, t};
      }
      case Expr::Kind::kAutomaton: {
        const Fsm& a = *e.automaton;
        int32_t base = static_cast<int32_t>(states.size());
        for (size_t i = 0; i < a.states.size(); ++i) add();
        int32_t t = add();
        for (size_t i = 0; i < a.states.size(); ++i) {
          auto& st = states[base + i];
          for (auto edge : a.states[i].edges) {
            edge.target += base;
            st.edges.push_back(edge);
          }
          for (auto ref : a.states[i].refs) {
            ref.target += base;
            st.refs.push_back(ref);
          }
          if (a.states[i].final) st.eps.push_back(t);
        }
        return {base + a.start, t};
      }
    }
    return {add(), add()};
  }
};

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    size_t h = v.size();
    for (int32_t x : v) h = h * 1000003u ^ static_cast<size_t>(x);
    return h;
  }
};

// Boundaries of the coarsest byte partition compatible with every edge.
std::vector<int> byte_class_starts(const Fsm& fsm) {
  std::vector<char> is_start(257, 0);
  is_start[0] = 1;
  for (auto& s : fsm.states) {
    for (auto& e : s.edges) {
      is_start[e.lo] = 1;
      is_start[e.hi + 1] = 1;
    }
  }
  std::vector<int> starts;
  for (int b = 0; b < 256; ++b) {
    if (is_start[b]) starts.push_back(b);
  }
  return starts;
}

}  // namespace

bool Fsm::has_refs() const {
  for (auto& s : states) {
    if (!s.refs.empty()) return true;
  }
  return false;
}

bool Fsm::is_deterministic() const {
  for (auto& s : states) {
    if (!s.refs.empty()) return false;
    std::vector<FsmEdge> edges = s.edges;
    std::sort(edges.begin(), edges.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
    for (size_t i = 1; i < edges.size(); ++i) {
      if (edges[i].lo <= edges[i - 1].hi) return false;
    }
  }
  return true;
}

bool Fsm::accepts(std::string_view bytes) const {
  std::vector<char> current(states.size(), 0), next(states.size(), 0);
  current[start] = 1;
  for (char c : bytes) {
    auto b = static_cast<uint8_t>(c);
    std::fill(next.begin(), next.end(), 0);
    bool any = false;
    for (size_t s = 0; s < states.size(); ++s) {
      if (!current[s]) continue;
      for (auto& e : states[s].edges) {
        if (e.lo <= b && b <= e.hi) next[e.target] = 1, any = true;
      }
    }
    if (!any) return false;
    current.swap(next);
  }
  for (size_t s = 0; s < states.size(); ++s) {
    if (current[s] && states[s].final) return true;
  }
  return false;
}

namespace {

// Strongly connected components of the epsilon graph (iterative Tarjan): comp[s] for every state,
// numbered so that a component's epsilon successors come before it (reverse topological order).
std::vector<int32_t> epsilon_components(const EpsNfa& eps, int32_t& count) {
  const auto n = static_cast<int32_t>(eps.states.size());
  std::vector<int32_t> comp(static_cast<size_t>(n), -1), index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0);
  std::vector<char> on_stack(static_cast<size_t>(n), 0);
  std::vector<int32_t> stack;
  std::vector<std::pair<int32_t, size_t>> call;  // (state, next epsilon edge to look at)
  int32_t next_index = 0;
  count = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[static_cast<size_t>(root)] >= 0) continue;
    call.push_back({root, 0});
    while (!call.empty()) {
      auto& [u, i] = call.back();
      const auto uu = static_cast<size_t>(u);
      if (i == 0) {
        index[uu] = low[uu] = next_index++;
        stack.push_back(u);
        on_stack[uu] = 1;
      }
      const auto& out = eps.states[uu].eps;
      if (i < out.size()) {
        const int32_t v = out[i++];
        const auto vv = static_cast<size_t>(v);
        if (index[vv] < 0) call.push_back({v, 0});
        else if (on_stack[vv]) low[uu] = std::min(low[uu], index[vv]);
        continue;
      }
      if (low[uu] == index[uu]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = 0;
          comp[static_cast<size_t>(w)] = count;
        } while (w != u);
        ++count;
      }
      const int32_t done = u;
      call.pop_back();
      if (!call.empty()) {
        const auto parent = static_cast<size_t>(call.back().first);
        low[parent] = std::min(low[parent], low[static_cast<size_t>(done)]);
      }
    }
  }
  return comp;
}

}  // namespace

Fsm build_nfa(const Expr& expr, size_t max_states) {
  EpsNfa eps;
  eps.max_states = max_states;
  auto fragment = eps.build(expr);
  eps.states[fragment.end].final = true;
  // Epsilon removal. States of one epsilon cycle reach the same states without input, so each
  // strongly connected component becomes one state first (nested quantifiers such as (x?)+ put
  // whole copies of a body on one cycle); each component then takes the byte and reference edges
  // of the components its epsilon edges reach, deduplicated. Closures are built bottom-up over the
  // component DAG, and their total size is bounded so no input can make this quadratic blow-up run
  // for minutes.
  int32_t count = 0;
  const std::vector<int32_t> comp = epsilon_components(eps, count);
  const auto nc = static_cast<size_t>(count);
  std::vector<Fsm::State> own(nc);             // each component's own edges (targets as components)
  std::vector<std::vector<int32_t>> succ(nc);  // epsilon edges between components
  for (size_t s = 0; s < eps.states.size(); ++s) {
    const auto c = static_cast<size_t>(comp[s]);
    const auto& st = eps.states[s];
    for (FsmEdge e : st.edges) own[c].edges.push_back({e.lo, e.hi, comp[static_cast<size_t>(e.target)]});
    for (FsmRefEdge r : st.refs) own[c].refs.push_back({r.rule, comp[static_cast<size_t>(r.target)]});
    own[c].final = own[c].final || st.final;
    for (int32_t v : st.eps)
      if (comp[static_cast<size_t>(v)] != comp[s]) succ[c].push_back(comp[static_cast<size_t>(v)]);
  }
  const size_t budget = std::max<size_t>(max_states, 1) * 64;  // closure entries, all components together
  size_t work = 0;
  auto dedupe = [](Fsm::State& st) {
    std::sort(st.edges.begin(), st.edges.end(), [](const FsmEdge& a, const FsmEdge& b) {
      return std::tie(a.lo, a.hi, a.target) < std::tie(b.lo, b.hi, b.target);
    });
    st.edges.erase(std::unique(st.edges.begin(), st.edges.end(),
                               [](const FsmEdge& a, const FsmEdge& b) {
                                 return a.lo == b.lo && a.hi == b.hi && a.target == b.target;
                               }),
                   st.edges.end());
    std::sort(st.refs.begin(), st.refs.end(),
              [](const FsmRefEdge& a, const FsmRefEdge& b) { return std::tie(a.rule, a.target) < std::tie(b.rule, b.target); });
    st.refs.erase(std::unique(st.refs.begin(), st.refs.end(),
                              [](const FsmRefEdge& a, const FsmRefEdge& b) { return a.rule == b.rule && a.target == b.target; }),
                  st.refs.end());
  };
  // Components are numbered successors first, so one pass in increasing order sees every
  // successor's closure complete.
  Fsm out;
  out.states.resize(nc);
  for (size_t c = 0; c < nc; ++c) {
    Fsm::State& target = out.states[c];
    target = own[c];
    for (int32_t d : succ[c]) {
      const Fsm::State& sd = out.states[static_cast<size_t>(d)];
      target.edges.insert(target.edges.end(), sd.edges.begin(), sd.edges.end());
      target.refs.insert(target.refs.end(), sd.refs.begin(), sd.refs.end());
      target.final = target.final || sd.final;
    }
    dedupe(target);
    work += target.edges.size() + target.refs.size();
    if (work > budget)
      throw_unsupported("size", fmt::format("grammar's automaton has more than {} transitions", budget));
  }
  out.start = comp[static_cast<size_t>(fragment.start)];
  return trim(out);
}

std::optional<Fsm> determinize(const Fsm& nfa, size_t max_states) {
  std::vector<int> starts = byte_class_starts(nfa);
  std::vector<int> class_of(256);
  for (size_t c = 0; c < starts.size(); ++c) {
    int end = c + 1 < starts.size() ? starts[c + 1] : 256;
    for (int b = starts[c]; b < end; ++b) class_of[b] = static_cast<int>(c);
  }
  Fsm dfa;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> index;
  std::vector<std::vector<int32_t>> subsets;
  // The subsets' total size is bounded too, not only their count: (x{0,45}){0,45} has ~2,000
  // states whose subsets hold ~1,000 NFA states each, which sorting made a 10-second compile.
  const size_t budget = std::max<size_t>(max_states, 1) * 64;
  size_t work = 0;
  auto intern = [&](std::vector<int32_t> subset) -> std::optional<int32_t> {
    work += subset.size();
    if (work > budget) return std::nullopt;
    std::sort(subset.begin(), subset.end());
    subset.erase(std::unique(subset.begin(), subset.end()), subset.end());
    auto it = index.find(subset);
    if (it != index.end()) return it->second;
    if (subsets.size() >= max_states) return std::nullopt;
    int32_t id = static_cast<int32_t>(subsets.size());
    index.emplace(subset, id);
    subsets.push_back(std::move(subset));
    return id;
  };
  intern({nfa.start});
  std::vector<std::vector<int32_t>> by_class(starts.size());
  for (size_t d = 0; d < subsets.size(); ++d) {
    for (auto& v : by_class) v.clear();
    std::map<int32_t, std::vector<int32_t>> by_rule;
    bool final = false;
    for (int32_t s : subsets[d]) {
      auto& st = nfa.states[s];
      final = final || st.final;
      for (auto& e : st.edges) {
        for (int c = class_of[e.lo]; c <= class_of[e.hi]; ++c) by_class[c].push_back(e.target);
      }
      for (auto& r : st.refs) by_rule[r.rule].push_back(r.target);
    }
    Fsm::State state;
    state.final = final;
    for (size_t c = 0; c < starts.size(); ++c) {
      if (by_class[c].empty()) continue;
      auto target = intern(by_class[c]);
      if (!target) return std::nullopt;
      uint8_t lo = static_cast<uint8_t>(starts[c]);
      uint8_t hi = static_cast<uint8_t>((c + 1 < starts.size() ? starts[c + 1] : 256) - 1);
      if (!state.edges.empty() && state.edges.back().target == *target && state.edges.back().hi + 1 == lo) {
        state.edges.back().hi = hi;
      } else {
        state.edges.push_back({lo, hi, *target});
      }
    }
    for (auto& [rule, targets] : by_rule) {
      auto target = intern(targets);
      if (!target) return std::nullopt;
      state.refs.push_back({rule, *target});
    }
    dfa.states.push_back(std::move(state));
  }
  dfa.start = 0;
  return dfa;
}

std::vector<int32_t> refine_partition(size_t n, const std::vector<std::vector<int32_t>>& predecessors,
                                      const SignatureFn& signature, size_t max_rounds) {
  // Moore's refinement run as a worklist: a state's signature can only change when a successor
  // changed class, so each round re-reads only those states. Every class keeps the signature its
  // members share; a state whose new signature differs moves to the class of that signature. A
  // chain of n states then costs O(n), not the O(n^2) of recomputing every signature per round.
  struct SignatureHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 1469598103934665603ULL;
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::vector<int32_t> cls(n, 0);
  if (n == 0) return cls;
  std::vector<std::vector<int32_t>> class_signature(1);  // empty while not known
  std::vector<size_t> class_size(1, n);
  std::vector<int32_t> dirty(n), next_class(n), changed, sig;
  for (size_t s = 0; s < n; ++s) dirty[s] = static_cast<int32_t>(s);
  std::vector<size_t> seen(n, 0);
  std::unordered_map<std::vector<int32_t>, int32_t, SignatureHash> groups;
  for (size_t round = 1; round <= max_rounds && !dirty.empty(); ++round) {
    std::sort(dirty.begin(), dirty.end(), [&](int32_t a, int32_t b) { return cls[a] != cls[b] ? cls[a] < cls[b] : a < b; });
    // New classes are decided against the current ones, and applied after the whole round.
    for (size_t k = 0; k < dirty.size();) {
      const int32_t c = cls[dirty[k]];
      size_t end = k;
      while (end < dirty.size() && cls[dirty[end]] == c) ++end;
      // Members that are not dirty keep the stored signature and the class id. When every member
      // is dirty, the first signature keeps the id: moving a whole class to a new id would only
      // rename it and make its predecessors dirty again, forever.
      groups.clear();
      if (end - k < class_size[c]) groups.emplace(class_signature[c], c);
      for (; k < end; ++k) {
        const int32_t s = dirty[k];
        signature(static_cast<size_t>(s), cls, sig);
        auto it = groups.find(sig);
        if (it == groups.end()) {
          int32_t id = groups.empty() ? c : static_cast<int32_t>(class_signature.size());
          if (id == c) {
            class_signature[c] = sig;
          } else {
            class_signature.push_back(sig);
          }
          it = groups.emplace(sig, id).first;
        }
        next_class[s] = it->second;
      }
    }
    changed.clear();
    for (int32_t s : dirty) {
      if (next_class[s] != cls[s]) changed.push_back(s);
    }
    class_size.resize(class_signature.size(), 0);
    for (int32_t s : changed) --class_size[cls[s]], ++class_size[next_class[s]], cls[s] = next_class[s];
    dirty.clear();
    for (int32_t s : changed) {
      for (int32_t p : predecessors[s]) {
        if (seen[p] != round) seen[p] = round, dirty.push_back(p);
      }
    }
  }
  // Classes some states left may be empty: number the used ones densely, in state order.
  std::vector<int32_t> dense(class_signature.size(), -1);
  int32_t count = 0;
  for (size_t s = 0; s < n; ++s) {
    if (dense[cls[s]] < 0) dense[cls[s]] = count++;
  }
  for (size_t s = 0; s < n; ++s) cls[s] = dense[cls[s]];
  return cls;
}

Fsm minimize(const Fsm& dfa) {
  const size_t n = dfa.states.size();
  if (n == 0) return dfa;
  std::vector<std::vector<int32_t>> predecessors(n);
  for (size_t s = 0; s < n; ++s) {
    for (auto& e : dfa.states[s].edges) predecessors[e.target].push_back(static_cast<int32_t>(s));
    for (auto& r : dfa.states[s].refs) predecessors[r.target].push_back(static_cast<int32_t>(s));
  }
  // Signature: final flag, then (class, lo, hi) runs and (rule, class) refs.
  auto signature = [&](size_t s, const std::vector<int32_t>& cls, std::vector<int32_t>& sig) {
    sig.assign(1, dfa.states[s].final ? 1 : 0);
    int32_t prev_class = -2, prev_hi = -2;
    for (auto& e : dfa.states[s].edges) {
      int32_t c = cls[e.target];
      if (c == prev_class && e.lo == prev_hi + 1) {
        sig.back() = e.hi;
      } else {
        sig.push_back(-3);
        sig.push_back(c);
        sig.push_back(e.lo);
        sig.push_back(e.hi);
      }
      prev_class = c;
      prev_hi = e.hi;
    }
    for (auto& r : dfa.states[s].refs) {
      sig.push_back(-4);
      sig.push_back(r.rule);
      sig.push_back(cls[r.target]);
    }
  };
  std::vector<int32_t> cls = refine_partition(n, predecessors, signature);
  size_t class_count = 0;
  for (int32_t c : cls) class_count = std::max(class_count, static_cast<size_t>(c) + 1);
  Fsm out;
  out.states.resize(class_count);
  std::vector<char> done(class_count, 0);
  for (size_t s = 0; s < n; ++s) {
    int32_t c = cls[s];
    if (done[c]) continue;
    done[c] = 1;
    auto& st = out.states[c];
    st.final = dfa.states[s].final;
    for (auto e : dfa.states[s].edges) {
      e.target = cls[e.target];
      if (!st.edges.empty() && st.edges.back().target == e.target && st.edges.back().hi + 1 == e.lo) {
        st.edges.back().hi = e.hi;
      } else {
        st.edges.push_back(e);
      }
    }
    for (auto r : dfa.states[s].refs) st.refs.push_back({r.rule, cls[r.target]});
  }
  out.start = cls[dfa.start];
  return out;
}

Fsm trim(const Fsm& fsm) {
  const size_t n = fsm.states.size();
  std::vector<char> reachable(n, 0), productive(n, 0);
  std::vector<int32_t> stack{fsm.start};
  reachable[fsm.start] = 1;
  std::vector<std::vector<int32_t>> reverse(n);
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    auto visit = [&](int32_t t) {
      reverse[t].push_back(s);
      if (!reachable[t]) reachable[t] = 1, stack.push_back(t);
    };
    for (auto& e : fsm.states[s].edges) visit(e.target);
    for (auto& r : fsm.states[s].refs) visit(r.target);
  }
  for (size_t s = 0; s < n; ++s) {
    if (reachable[s] && fsm.states[s].final) productive[s] = 1, stack.push_back(static_cast<int32_t>(s));
  }
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : reverse[s]) {
      if (!productive[p]) productive[p] = 1, stack.push_back(p);
    }
  }
  std::vector<int32_t> remap(n, -1);
  Fsm out;
  auto keep = [&](size_t s) { return reachable[s] && productive[s]; };
  remap[fsm.start] = 0;
  out.states.emplace_back();
  for (size_t s = 0; s < n; ++s) {
    if (keep(s) && static_cast<int32_t>(s) != fsm.start) {
      remap[s] = static_cast<int32_t>(out.states.size());
      out.states.emplace_back();
    }
  }
  for (size_t s = 0; s < n; ++s) {
    if (remap[s] < 0) continue;
    auto& st = out.states[remap[s]];
    st.final = fsm.states[s].final;
    if (!keep(s)) continue;  // an unproductive start keeps no edges
    for (auto e : fsm.states[s].edges) {
      if (remap[e.target] >= 0 && keep(e.target)) e.target = remap[e.target], st.edges.push_back(e);
    }
    for (auto r : fsm.states[s].refs) {
      if (remap[r.target] >= 0 && keep(r.target)) r.target = remap[r.target], st.refs.push_back(r);
    }
  }
  out.start = 0;
  return out;
}

bool language_is_empty(const Fsm& fsm) {
  Fsm t = trim(fsm);
  return !t.states[t.start].final && t.states[t.start].edges.empty() && t.states[t.start].refs.empty();
}

Fsm intersect(const Fsm& a, const Fsm& b, size_t max_states) {
  std::unordered_map<uint64_t, int32_t> index;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  auto intern = [&](int32_t x, int32_t y) {
    uint64_t key = (static_cast<uint64_t>(x) << 32) | static_cast<uint32_t>(y);
    auto it = index.find(key);
    if (it != index.end()) return it->second;
    if (pairs.size() >= max_states) {
      throw_unsupported("size", fmt::format("automaton intersection exceeds {} states", max_states));
    }
    int32_t id = static_cast<int32_t>(pairs.size());
    index.emplace(key, id);
    pairs.emplace_back(x, y);
    return id;
  };
  intern(a.start, b.start);
  Fsm out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto [x, y] = pairs[i];
    Fsm::State st;
    st.final = a.states[x].final && b.states[y].final;
    for (auto& ea : a.states[x].edges) {
      for (auto& eb : b.states[y].edges) {
        uint8_t lo = std::max(ea.lo, eb.lo), hi = std::min(ea.hi, eb.hi);
        if (lo > hi) continue;
        st.edges.push_back({lo, hi, intern(ea.target, eb.target)});
      }
    }
    std::sort(st.edges.begin(), st.edges.end(), [](auto& p, auto& q) { return p.lo < q.lo; });
    out.states.push_back(std::move(st));
  }
  out.start = 0;
  return trim(out);
}

Fsm complement(const Fsm& dfa) {
  Fsm out = dfa;
  const int32_t sink = static_cast<int32_t>(out.states.size());
  out.states.emplace_back();
  out.states[sink].edges.push_back({0, 255, sink});
  for (int32_t s = 0; s < sink; ++s) {
    auto edges = out.states[s].edges;
    std::sort(edges.begin(), edges.end(), [](auto& p, auto& q) { return p.lo < q.lo; });
    std::vector<FsmEdge> filled;
    int next = 0;
    for (auto& e : edges) {
      if (e.lo > next) filled.push_back({static_cast<uint8_t>(next), static_cast<uint8_t>(e.lo - 1), sink});
      filled.push_back(e);
      next = e.hi + 1;
    }
    if (next <= 255) filled.push_back({static_cast<uint8_t>(next), 255, sink});
    out.states[s].edges = std::move(filled);
  }
  for (auto& st : out.states) st.final = !st.final;
  return out;
}

Fsm compile_dfa(const Expr& expr, size_t max_states) {
  Fsm nfa = build_nfa(expr, max_states);
  auto dfa = determinize(nfa, max_states);
  if (!dfa) throw_unsupported("size", fmt::format("regular expression needs more than {} DFA states", max_states));
  return minimize(trim(*dfa));
}

}  // namespace deepinfer::structured
