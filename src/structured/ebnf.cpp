#include "structured/ebnf.h"

#include <fmt/format.h>

#include <map>

#include "structured/unicode.h"

namespace deepinfer::structured {
namespace {

constexpr uint32_t kMaxRepeat = 10000;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view src) : src_(src) {}

  Grammar parse(std::string_view root_rule) {
    skip_space();
    while (!at_end()) {
      std::string name = parse_name();
      skip_space();
      if (src_.substr(pos_, 3) != "::=") invalid(fmt::format("expected '::=' after rule name '{}'", name));
      pos_ += 3;
      int rule = rule_index(name);
      if (defined_[rule]) invalid(fmt::format("rule '{}' defined twice", name));
      defined_[rule] = 1;
      grammar_.set_body(rule, parse_alternation(0));
      skip_space();
    }
    for (auto& [name, index] : index_) {
      if (!defined_[index]) throw_invalid("ebnf", fmt::format("rule '{}' is used but not defined", name));
    }
    int root = grammar_.find(root_rule);
    if (root < 0 || !defined_[root]) throw_invalid("ebnf", fmt::format("grammar has no '{}' rule", root_rule));
    grammar_.set_root(root);
    return std::move(grammar_);
  }

 private:
  [[noreturn]] void invalid(const std::string& what) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n') ++line, column = 1;
      else ++column;
    }
    throw_invalid("ebnf", fmt::format("{} at line {} column {}", what, line, column));
  }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek() const { return at_end() ? '\0' : src_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      char c = src_[pos_];
      if (c == '#') {
        while (!at_end() && src_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  int rule_index(const std::string& name) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    int id = grammar_.add_rule(name);
    index_[name] = id;
    defined_.push_back(0);
    return id;
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(src_[pos_])) ++pos_;
    if (pos_ == start) invalid("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  // True when the upcoming text is `name ::=`, i.e. the next rule starts.
  bool at_rule_start() {
    size_t save = pos_;
    while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
    bool has_name = pos_ > save;
    skip_space();
    bool result = has_name && src_.substr(pos_, 3) == "::=";
    pos_ = save;
    return result;
  }

  ExprPtr parse_alternation(int depth) {
    std::vector<ExprPtr> options{parse_sequence(depth)};
    while (peek() == '|') {
      ++pos_;
      options.push_back(parse_sequence(depth));
    }
    return make_alt(std::move(options));
  }

  ExprPtr parse_sequence(int depth) {
    std::vector<ExprPtr> parts;
    while (true) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')') break;
      if (depth == 0 && at_rule_start()) break;
      parts.push_back(parse_quantified(depth));
    }
    return make_seq(std::move(parts));
  }

  bool parse_number(uint32_t& value) {
    size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && src_[pos_] >= '0' && src_[pos_] <= '9') v = std::min<uint64_t>(v * 10 + (src_[pos_++] - '0'), 1u << 30);
    value = static_cast<uint32_t>(v);
    return pos_ > start;
  }

  ExprPtr parse_quantified(int depth) {
    ExprPtr atom = parse_atom(depth);
    while (true) {
      char c = peek();
      if (c == '*') {
        ++pos_, atom = make_star(atom);
      } else if (c == '+') {
        ++pos_, atom = make_plus(atom);
      } else if (c == '?') {
        ++pos_, atom = make_optional(atom);
      } else if (c == '{') {
        ++pos_;
        skip_space();
        uint32_t min = 0, max;
        bool has_min = parse_number(min);
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
          if (!parse_number(max)) max = kUnbounded;
        } else {
          if (!has_min) invalid("expected a repetition count");
          max = min;
        }
        skip_space();
        if (peek() != '}') invalid("expected '}'");
        ++pos_;
        if (max != kUnbounded && max < min) invalid("repetition bounds out of order");
        if (min > kMaxRepeat || (max != kUnbounded && max > kMaxRepeat)) {
          throw_unsupported("ebnf", fmt::format("repetition count above {}", kMaxRepeat));
        }
        atom = make_repeat(atom, min, max);
      } else {
        break;
      }
    }
    return atom;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) invalid("bad hex escape");
      ++pos_;
      v = v * 16 + d;
    }
    if (v > kMaxCodepoint) invalid("code point out of range");
    return v;
  }

  // One (possibly escaped) character of a literal or class.
  uint32_t parse_char() {
    if (at_end()) invalid("unexpected end of grammar");
    if (peek() != '\\') {
      uint32_t c;
      if (!decode_utf8(src_, pos_, c)) invalid("malformed UTF-8");
      return c;
    }
    ++pos_;
    if (at_end()) invalid("trailing backslash");
    char c = src_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return static_cast<uint8_t>(c);
      default: invalid(fmt::format("unknown escape '\\{}'", c));
    }
  }

  ExprPtr parse_atom(int depth) {
    char c = peek();
    if (c == '"') {
      ++pos_;
      std::string text;
      while (peek() != '"') {
        if (at_end()) invalid("unterminated string literal");
        append_utf8(text, parse_char());
      }
      ++pos_;
      return make_literal(text);
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (peek() == '^') negated = true, ++pos_;
      CodepointSet set;
      while (peek() != ']') {
        if (at_end()) invalid("unterminated character class");
        uint32_t lo = parse_char(), hi = lo;
        if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
          ++pos_;
          hi = parse_char();
          if (hi < lo) invalid("character range out of order");
        }
        set.add(lo, hi);
      }
      ++pos_;
      return utf8_expr(negated ? set.complement() : set);
    }
    if (c == '(') {
      ++pos_;
      if (depth > 100) throw_unsupported("ebnf", "groups nested too deeply");
      ExprPtr inner = parse_alternation(depth + 1);
      skip_space();
      if (peek() != ')') invalid("expected ')'");
      ++pos_;
      return inner;
    }
    if (c == '.') {
      ++pos_;
      return utf8_expr(CodepointSet::all());
    }
    if (c == '<') throw_unsupported("ebnf", "token references <...> are not supported");
    if (is_name_char(c)) return make_ref(rule_index(parse_name()));
    invalid(fmt::format("unexpected character '{}'", c));
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::map<std::string, int> index_;
  std::vector<char> defined_;
};

}  // namespace

Grammar parse_ebnf(std::string_view text, std::string_view root_rule) {
  return EbnfParser(text).parse(root_rule);
}

}  // namespace deepinfer::structured
