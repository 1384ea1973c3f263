#pragma once
// Grammar IR shared by every front end (regex, GBNF, JSON Schema): a byte-level context-free
// grammar whose rule bodies are expression trees over byte sets. Rules may reference each other
// (recursion); regular parts are compiled to finite automata by compiled_grammar.h.
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace deepinfer::structured {

enum class GrammarErrorKind { kInvalid, kUnsupported, kUnsatisfiable };

// A typed grammar error: what kind, which keyword / construct, and a readable message.
class GrammarError : public Error {
 public:
  GrammarError(GrammarErrorKind kind, std::string keyword, const std::string& message);
  GrammarErrorKind kind() const { return kind_; }
  const std::string& keyword() const { return keyword_; }

 private:
  GrammarErrorKind kind_;
  std::string keyword_;
};

const char* to_string(GrammarErrorKind kind);
[[noreturn]] void throw_invalid(const std::string& keyword, const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& keyword, const std::string& message);
[[noreturn]] void throw_unsatisfiable(const std::string& keyword, const std::string& message);

// A set of byte values (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> words{};
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool subset_of(const ByteSet& o) const {
    return ((words[0] & ~o.words[0]) | (words[1] & ~o.words[1]) | (words[2] & ~o.words[2]) |
            (words[3] & ~o.words[3])) == 0;
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
    return *this;
  }
  bool operator==(const ByteSet&) const = default;
  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.set_range(lo, hi);
    return s;
  }
};

struct Fsm;
struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

struct Expr {
  enum class Kind { kEmpty, kNothing, kBytes, kSeq, kAlt, kRepeat, kRef, kAutomaton };
  Kind kind = Kind::kEmpty;
  ByteSet bytes;                          // kBytes
  std::vector<ExprPtr> children;          // kSeq, kAlt, kRepeat (one child)
  uint32_t min = 0, max = 0;              // kRepeat; max may be kUnbounded
  int rule = -1;                          // kRef
  std::shared_ptr<const Fsm> automaton;   // kAutomaton: a byte-only automaton built elsewhere
};

// Builders. They simplify trivially (empty sequences, nothing-alternatives) to keep trees small.
ExprPtr make_empty();    // matches the empty string
ExprPtr make_nothing();  // matches nothing
ExprPtr make_bytes(const ByteSet& set);
ExprPtr make_byte(uint8_t b);
ExprPtr make_literal(std::string_view text);
ExprPtr make_seq(std::vector<ExprPtr> parts);
ExprPtr make_alt(std::vector<ExprPtr> options);
ExprPtr make_repeat(ExprPtr e, uint32_t min, uint32_t max);
inline ExprPtr make_star(ExprPtr e) { return make_repeat(std::move(e), 0, kUnbounded); }
inline ExprPtr make_plus(ExprPtr e) { return make_repeat(std::move(e), 1, kUnbounded); }
inline ExprPtr make_optional(ExprPtr e) { return make_repeat(std::move(e), 0, 1); }
ExprPtr make_ref(int rule);
ExprPtr make_automaton(std::shared_ptr<const Fsm> fsm);

class Grammar {
 public:
  struct Rule {
    std::string name;
    ExprPtr body;  // null until defined
    bool inlinable = true;  // false: always kept as a call (shares the body between callers)
  };
  // Adds a rule (body set later for recursion); returns its index. Names need not be unique.
  int add_rule(std::string name, ExprPtr body = nullptr);
  void set_body(int rule, ExprPtr body) { rules_[rule].body = std::move(body); }
  void set_inlinable(int rule, bool inlinable) { rules_[rule].inlinable = inlinable; }
  int find(std::string_view name) const;  // -1 when absent
  const std::vector<Rule>& rules() const { return rules_; }
  int root() const { return root_; }
  void set_root(int rule) { root_ = rule; }

 private:
  std::vector<Rule> rules_;
  int root_ = 0;
};

// A grammar with one rule: `body`.
Grammar single_rule_grammar(ExprPtr body, std::string name = "root");

}  // namespace deepinfer::structured
