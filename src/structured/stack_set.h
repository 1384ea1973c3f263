#pragma once
// Parser stacks of the pushdown automaton, hash-consed: a node is (automaton state, parent node)
// and equal stacks share one id, so a set of stacks is a small vector of ids and rolling back
// is just restoring an older vector. The parent of a node is the return point of the rule the
// node's state lives in.
#include <cstdint>
#include <span>
#include <vector>

#include "structured/compiled_grammar.h"

namespace deepinfer::structured {

class NodePool {
 public:
  static constexpr uint32_t kRoot = 0xFFFFFFFFu;      // below the root rule: grammar may end
  static constexpr uint32_t kBoundary = 0xFFFFFFFEu;  // unknown context (mask precomputation)
  struct Node {
    uint32_t state, parent;
  };
  uint32_t get(uint32_t state, uint32_t parent);
  const Node& operator[](uint32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }

 private:
  // Open addressing keyed by (state, parent); values are node ids.
  void grow();
  std::vector<Node> nodes_;
  std::vector<uint32_t> table_;
  size_t mask_ = 0;
};

// Set operations over stacks of one grammar. Not thread-safe (owns scratch marks).
//
// The stacks are a plain set, not a graph-structured stack: an ambiguous recursive grammar (a rule
// that calls itself after optional items, say) can hold a number of distinct stacks that grows
// exponentially with the bytes read. Past kMaxStacks at once, closure and step throw
// GrammarError(kUnsupported, "ambiguity") instead of using gigabytes and minutes (the ebnf fuzz
// campaign's 110 s / 2.1 GB input; docs/hardening.md). Unambiguous grammars hold a handful.
class StackEngine {
 public:
  static constexpr size_t kMaxStacks = size_t{1} << 16;
  explicit StackEngine(const CompiledGrammar& grammar) : grammar_(&grammar) {}
  const CompiledGrammar& grammar() const { return *grammar_; }
  NodePool& pool() { return pool_; }

  struct ClosureFlags {
    bool can_end = false;  // a stack emptied completely: the grammar may end here
    bool exited = false;   // a stack popped past a kBoundary parent
  };
  // Expands `origins` by entering called rules and leaving finished ones; `expanded` receives
  // every node (deduplicated) that may read the next byte.
  ClosureFlags closure(std::span<const uint32_t> origins, std::vector<uint32_t>& expanded);
  // Nodes after reading `byte` from an expanded set (deduplicated). Returns false when empty.
  bool step(std::span<const uint32_t> expanded, uint8_t byte, std::vector<uint32_t>& next);

 private:
  bool mark(uint32_t node);
  void new_epoch();
  const CompiledGrammar* grammar_;
  NodePool pool_;
  std::vector<uint32_t> marks_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> work_;
};

// A simple byte-at-a-time parser over the engine (reference checks, tests, the CLI).
class StackSet {
 public:
  explicit StackSet(const CompiledGrammar& grammar) : engine_(grammar) {}
  void reset();
  bool advance(uint8_t byte);  // false (and empty) when the byte is not allowed
  bool can_end();

 private:
  StackEngine engine_;
  std::vector<uint32_t> origins_, expanded_;
};

}  // namespace deepinfer::structured
