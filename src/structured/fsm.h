#pragma once
// Finite automata over bytes, optionally with rule-reference edges (a recursive transition
// network: a reference edge means "match rule R, then go to target"). Rule bodies compile to
// these; JSON Schema uses the byte-only operations (intersection, complement) to express
// pattern + length limits and "any key except the declared ones".
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "structured/grammar.h"

namespace deepinfer::structured {

struct FsmEdge {
  uint8_t lo = 0, hi = 0;  // inclusive byte range
  int32_t target = 0;
};

struct FsmRefEdge {
  int32_t rule = 0;
  int32_t target = 0;
};

struct Fsm {
  struct State {
    std::vector<FsmEdge> edges;
    std::vector<FsmRefEdge> refs;
    bool final = false;
  };
  std::vector<State> states;
  int32_t start = 0;

  bool has_refs() const;
  bool is_deterministic() const;  // no reference edges and no two edges of a state overlap
  // Whether the byte string is accepted (byte-only automata).
  bool accepts(std::string_view bytes) const;
};

// Largest automaton any construction may build; beyond it the grammar is reported unsupported.
inline constexpr size_t kMaxFsmStates = 200000;

// Thompson construction with epsilon removal. Automaton leaves are copied in; reference edges
// are kept. Throws GrammarError(kUnsupported) when the automaton would exceed `max_states`.
Fsm build_nfa(const Expr& expr, size_t max_states = kMaxFsmStates);
// Subset construction (reference edges are treated as symbols). Returns nullopt when the result
// would exceed `max_states`, or its subsets together 64 x `max_states` NFA states (the work bound).
std::optional<Fsm> determinize(const Fsm& nfa, size_t max_states = kMaxFsmStates);
// Partition refinement: states start in one class and are split by their signature (written
// into `sig` from the current classes) until no signature changes or `max_rounds` rounds ran.
// After r rounds, states in one class cannot be told apart by looking r steps ahead. Returns
// dense class ids.
using SignatureFn = std::function<void(size_t state, const std::vector<int32_t>& cls, std::vector<int32_t>& sig)>;
std::vector<int32_t> refine_partition(size_t n, const std::vector<std::vector<int32_t>>& predecessors,
                                      const SignatureFn& signature, size_t max_rounds = SIZE_MAX);
// Merges equivalent states of a deterministic automaton (refine_partition to the fixpoint).
Fsm minimize(const Fsm& dfa);
// Drops states that are unreachable or cannot reach a final state (reference edges are assumed
// productive). The start state is kept even when the language is empty.
Fsm trim(const Fsm& fsm);
bool language_is_empty(const Fsm& fsm);

// Byte-only deterministic automata.
Fsm intersect(const Fsm& a, const Fsm& b, size_t max_states = kMaxFsmStates);
Fsm complement(const Fsm& dfa);  // relative to all byte strings
// Convenience: compile a byte-only expression to a trimmed, minimal DFA.
Fsm compile_dfa(const Expr& expr, size_t max_states = kMaxFsmStates);

}  // namespace deepinfer::structured
