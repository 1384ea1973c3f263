#include "structured/grammar.h"

#include <fmt/format.h>

namespace deepinfer::structured {

GrammarError::GrammarError(GrammarErrorKind kind, std::string keyword, const std::string& message)
    : Error(fmt::format("{} grammar ({}): {}", to_string(kind), keyword, message)),
      kind_(kind),
      keyword_(std::move(keyword)) {}

const char* to_string(GrammarErrorKind kind) {
  switch (kind) {
    case GrammarErrorKind::kInvalid: return "invalid";
    case GrammarErrorKind::kUnsupported: return "unsupported";
    case GrammarErrorKind::kUnsatisfiable: return "unsatisfiable";
  }
  return "?";
}

void throw_invalid(const std::string& keyword, const std::string& message) {
  throw GrammarError(GrammarErrorKind::kInvalid, keyword, message);
}
void throw_unsupported(const std::string& keyword, const std::string& message) {
  throw GrammarError(GrammarErrorKind::kUnsupported, keyword, message);
}
void throw_unsatisfiable(const std::string& keyword, const std::string& message) {
  throw GrammarError(GrammarErrorKind::kUnsatisfiable, keyword, message);
}

namespace {
ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }
}  // namespace

ExprPtr make_empty() {
  static const ExprPtr empty = make(Expr{});
  return empty;
}

ExprPtr make_nothing() {
  static const ExprPtr nothing = [] {
    Expr e;
    e.kind = Expr::Kind::kNothing;
    return make(std::move(e));
  }();
  return nothing;
}

ExprPtr make_bytes(const ByteSet& set) {
  if (set.empty()) return make_nothing();
  Expr e;
  e.kind = Expr::Kind::kBytes;
  e.bytes = set;
  return make(std::move(e));
}

ExprPtr make_byte(uint8_t b) { return make_bytes(ByteSet::single(b)); }

ExprPtr make_literal(std::string_view text) {
  std::vector<ExprPtr> parts;
  parts.reserve(text.size());
  for (char c : text) parts.push_back(make_byte(static_cast<uint8_t>(c)));
  return make_seq(std::move(parts));
}

ExprPtr make_seq(std::vector<ExprPtr> parts) {
  std::vector<ExprPtr> kept;
  for (auto& p : parts) {
    if (p->kind == Expr::Kind::kNothing) return make_nothing();
    if (p->kind == Expr::Kind::kEmpty) continue;
    if (p->kind == Expr::Kind::kSeq) {
      kept.insert(kept.end(), p->children.begin(), p->children.end());
    } else {
      kept.push_back(std::move(p));
    }
  }
  if (kept.empty()) return make_empty();
  if (kept.size() == 1) return kept[0];
  Expr e;
  e.kind = Expr::Kind::kSeq;
  e.children = std::move(kept);
  return make(std::move(e));
}

ExprPtr make_alt(std::vector<ExprPtr> options) {
  std::vector<ExprPtr> kept;
  for (auto& o : options) {
    if (o->kind == Expr::Kind::kNothing) continue;
    if (o->kind == Expr::Kind::kAlt) {
      kept.insert(kept.end(), o->children.begin(), o->children.end());
    } else {
      kept.push_back(std::move(o));
    }
  }
  if (kept.empty()) return make_nothing();
  if (kept.size() == 1) return kept[0];
  Expr e;
  e.kind = Expr::Kind::kAlt;
  e.children = std::move(kept);
  return make(std::move(e));
}

namespace {
// Folding (x{a,}){c,} into x{ac,} stops here: a larger count copies the body that many times.
constexpr uint64_t kMaxFoldedRepeat = 10000;
}  // namespace

ExprPtr make_repeat(ExprPtr inner, uint32_t min, uint32_t max) {
  if (max < min) return make_nothing();
  if (max == 0) return make_empty();
  if (min == 1 && max == 1) return inner;
  if (inner->kind == Expr::Kind::kEmpty) return inner;
  if (inner->kind == Expr::Kind::kNothing) return min == 0 ? make_empty() : make_nothing();
  if (inner->kind == Expr::Kind::kRepeat) {
    // A quantifier over a quantified body folds into one where the language is the same (counts
    // of the body x): (x?){c,d} = x{0,d}; (x*){c,d} = x* (d >= 1); (x{a,}){c,} = x{ac,} for c >= 1;
    // (x{a,})* and (x{a,})? = x* for a <= 1. Stacked quantifiers such as (x?)++++ would otherwise
    // double the automaton at every level.
    const ExprPtr& x = inner->children[0];
    const uint32_t a = inner->min, b = inner->max;
    if (a == 0 && b == 1) return make_repeat(x, 0, max);
    if (a == 0 && b == kUnbounded) return inner;
    if (b == kUnbounded && max == kUnbounded && min >= 1 && uint64_t{a} * min <= kMaxFoldedRepeat)
      return make_repeat(x, a * min, kUnbounded);
    if (b == kUnbounded && a <= 1 && min == 0) return make_repeat(x, 0, kUnbounded);
    // Bounded on both levels: (x{a,b}){c,d} = x{ca,db} when the counts k copies give, [ka, kb]
    // for k = c .. d, leave no gap: (k+1)a <= kb + 1, tightest at k = c. (x{0,45}){0,45} would
    // otherwise be 45 copies of a body with 45 exits, a 10-second determinisation.
    if (b != kUnbounded && max != kUnbounded && uint64_t{max} * b <= kMaxFoldedRepeat &&
        (min == max || uint64_t{min} * (b - a) + 1 >= a))
      return make_repeat(x, a * min, b * max);
  }
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.children = {std::move(inner)};
  e.min = min;
  e.max = max;
  return make(std::move(e));
}

ExprPtr make_ref(int rule) {
  Expr e;
  e.kind = Expr::Kind::kRef;
  e.rule = rule;
  return make(std::move(e));
}

ExprPtr make_automaton(std::shared_ptr<const Fsm> fsm) {
  Expr e;
  e.kind = Expr::Kind::kAutomaton;
  e.automaton = std::move(fsm);
  return make(std::move(e));
}

int Grammar::add_rule(std::string name, ExprPtr body) {
  rules_.push_back(Rule{std::move(name), std::move(body)});
  return static_cast<int>(rules_.size()) - 1;
}

int Grammar::find(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Grammar single_rule_grammar(ExprPtr body, std::string name) {
  Grammar g;
  g.set_root(g.add_rule(std::move(name), std::move(body)));
  return g;
}

}  // namespace deepinfer::structured
