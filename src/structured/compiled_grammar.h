#pragma once
// A grammar lowered to a flat pushdown automaton: every rule becomes an automaton over bytes
// whose "call" edges push a return state and enter another rule. Non-recursive rules are
// inlined, so most of a grammar (all of a regex) is one deterministic automaton and stack
// operations happen only at real recursion. Left recursion is rejected (unsupported).
#include <memory>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace deepinfer::structured {

class CompiledGrammar {
 public:
  struct Edge {
    uint8_t lo, hi;
    uint32_t target;
  };
  struct Call {
    uint32_t rule;
    uint32_t target;  // return state in the calling rule
  };
  struct State {
    uint32_t edges_begin = 0, edges_end = 0;
    uint32_t calls_begin = 0, calls_end = 0;
    uint32_t rule = 0;
    bool final = false;     // the rule may end here
    bool can_exit = false;  // the rule may end here without reading a byte (through empty calls)
  };

  // Throws GrammarError: unsupported (left recursion, size), unsatisfiable (empty language),
  // invalid (undefined rule).
  static std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar);

  const std::vector<State>& states() const { return states_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<Call>& calls() const { return calls_; }
  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  const ByteSet& rule_follow(uint32_t rule) const { return rule_follow_[rule]; }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }
  size_t rule_count() const { return rule_start_.size(); }
  uint32_t root_start() const { return rule_start_[0]; }  // rule 0 is the root

  // Whether the whole byte string is in the language (a reference check for tests / the CLI).
  bool accepts(std::string_view bytes) const;

 private:
  std::vector<State> states_;
  std::vector<Edge> edges_;
  std::vector<Call> calls_;
  std::vector<uint32_t> rule_start_;
  std::vector<ByteSet> rule_follow_;
  std::vector<std::string> rule_names_;
};

}  // namespace deepinfer::structured
