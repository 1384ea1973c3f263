#include "structured/regex.h"

#include <fmt/format.h>

namespace deepinfer::structured {
namespace {

constexpr uint32_t kMaxRepeat = 1000;
constexpr int kMaxGroupDepth = 100;

CodepointSet digit_set() { return CodepointSet::range('0', '9'); }
CodepointSet word_set() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CodepointSet space_set() {
  CodepointSet s;
  for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu,
                     0x205Fu, 0x3000u, 0xFEFFu}) {
    s.add(c, c);
  }
  s.add(0x2000, 0x200A);
  return s;
}
CodepointSet dot_set() {
  CodepointSet line_ends;
  for (uint32_t c : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) line_ends.add(c, c);
  return CodepointSet::all().minus(line_ends);
}

class RegexParser {
 public:
  RegexParser(std::string_view src, const RegexOptions& options) : src_(src), options_(options) {}

  ExprPtr parse() {
    ExprPtr e = parse_alternation(/*top=*/true);
    if (pos_ < src_.size()) invalid(src_[pos_] == ')' ? "unmatched ')'" : "unexpected character");
    return e;
  }

 private:
  [[noreturn]] void invalid(const std::string& what) {
    throw_invalid(options_.keyword, fmt::format("{} at offset {} in /{}/", what, pos_, src_));
  }
  [[noreturn]] void unsupported(const std::string& what) {
    throw_unsupported(options_.keyword, fmt::format("{} at offset {} in /{}/", what, pos_, src_));
  }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek_byte() const { return at_end() ? '\0' : src_[pos_]; }
  uint32_t next_char() {
    uint32_t c;
    if (!decode_utf8(src_, pos_, c)) invalid("malformed UTF-8");
    return c;
  }

  ExprPtr any_char() { return options_.encoder(CodepointSet::all()); }

  ExprPtr parse_alternation(bool top) {
    std::vector<ExprPtr> options;
    while (true) {
      options.push_back(parse_sequence(top));
      if (peek_byte() != '|') break;
      ++pos_;
    }
    return make_alt(std::move(options));
  }

  ExprPtr parse_sequence(bool top) {
    bool anchored_start = false, anchored_end = false;
    if (peek_byte() == '^') {
      if (!top) unsupported("'^' anchor inside a group");
      anchored_start = true;
      ++pos_;
    }
    std::vector<ExprPtr> parts;
    while (!at_end() && peek_byte() != '|' && peek_byte() != ')') {
      if (peek_byte() == '$') {
        ++pos_;
        if (!top || !(at_end() || peek_byte() == '|')) unsupported("'$' anchor not at the end");
        anchored_end = true;
        break;
      }
      if (peek_byte() == '^') unsupported("'^' anchor not at the start");
      parts.push_back(parse_quantified());
    }
    if (top && options_.anchoring == RegexOptions::Anchoring::kSearch) {
      if (!anchored_start) parts.insert(parts.begin(), make_star(any_char()));
      if (!anchored_end) parts.push_back(make_star(any_char()));
    }
    return make_seq(std::move(parts));
  }

  bool parse_number(uint32_t& value) {
    size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = std::min<uint64_t>(v * 10 + (src_[pos_] - '0'), 1u << 30);
      ++pos_;
    }
    value = static_cast<uint32_t>(v);
    return pos_ > start;
  }

  // Parses {m}, {m,} or {m,n} at pos_; leaves pos_ unchanged and returns false if it is not one
  // (then '{' is a literal, as in ECMAScript's Annex B).
  bool parse_braces(uint32_t& min, uint32_t& max) {
    size_t save = pos_;
    ++pos_;
    if (!parse_number(min)) return pos_ = save, false;
    max = min;
    if (peek_byte() == ',') {
      ++pos_;
      if (!parse_number(max)) max = kUnbounded;
    }
    if (peek_byte() != '}') return pos_ = save, false;
    ++pos_;
    return true;
  }

  ExprPtr parse_quantified() {
    ExprPtr atom = parse_atom();
    while (!at_end()) {
      char c = peek_byte();
      uint32_t min, max;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && parse_braces(min, max)) {
        if (max != kUnbounded && max < min) invalid("numbers out of order in {m,n} quantifier");
        if (min > kMaxRepeat || (max != kUnbounded && max > kMaxRepeat)) {
          unsupported(fmt::format("repetition count above {}", kMaxRepeat));
        }
      } else {
        break;
      }
      if (peek_byte() == '?') ++pos_;  // lazy: same language
      atom = make_repeat(atom, min, max);
    }
    return atom;
  }

  ExprPtr parse_atom() {
    char c = peek_byte();
    switch (c) {
      case '(': {
        ++pos_;
        if (++group_depth_ > kMaxGroupDepth) unsupported("groups nested too deeply");
        if (peek_byte() == '?') {
          ++pos_;
          char kind = peek_byte();
          if (kind == ':') {
            ++pos_;
          } else if (kind == '=' || kind == '!') {
            unsupported("lookahead");
          } else if (kind == '<' && pos_ + 1 < src_.size() && (src_[pos_ + 1] == '=' || src_[pos_ + 1] == '!')) {
            unsupported("lookbehind");
          } else if (kind == '<') {
            size_t close = src_.find('>', pos_);
            if (close == std::string_view::npos) invalid("unterminated group name");
            pos_ = close + 1;
          } else {
            unsupported("group modifier");
          }
        }
        ExprPtr inner = parse_alternation(false);
        if (peek_byte() != ')') invalid("missing ')'");
        ++pos_;
        --group_depth_;
        return inner;
      }
      case '[': return options_.encoder(parse_class());
      case '.': ++pos_; return options_.encoder(dot_set());
      case '\\': {
        ++pos_;
        CodepointSet set;
        parse_escape(set, /*in_class=*/false);
        return options_.encoder(set);
      }
      case '*':
      case '+':
      case '?': invalid("quantifier without a preceding atom");
      case '{': {
        uint32_t a, b;
        if (parse_braces(a, b)) invalid("quantifier without a preceding atom");
        ++pos_;
        return options_.encoder(CodepointSet::single('{'));
      }
      case ']':
      case '}': ++pos_; return options_.encoder(CodepointSet::single(static_cast<uint8_t>(c)));
      default: return options_.encoder(CodepointSet::single(next_char()));
    }
  }

  uint32_t parse_hex(size_t digits) {
    if (pos_ + digits > src_.size()) invalid("truncated hex escape");
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      char h = src_[pos_++];
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) invalid("bad hex digit");
      v = v * 16 + d;
    }
    return v;
  }

  uint32_t parse_unicode_escape() {
    if (peek_byte() == '{') {
      ++pos_;
      size_t close = src_.find('}', pos_);
      if (close == std::string_view::npos || close == pos_ || close - pos_ > 6) invalid("bad \\u{...} escape");
      uint32_t v = parse_hex(close - pos_);
      ++pos_;
      if (v > kMaxCodepoint) invalid("code point out of range");
      return v;
    }
    uint32_t v = parse_hex(4);
    if (v >= 0xD800 && v <= 0xDBFF && pos_ + 6 <= src_.size() && src_[pos_] == '\\' && src_[pos_ + 1] == 'u') {
      size_t save = pos_;
      pos_ += 2;
      uint32_t low = parse_hex(4);
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
      pos_ = save;
    }
    if (v >= 0xD800 && v <= 0xDFFF) unsupported("lone surrogate escape");
    return v;
  }

  // After a backslash: adds the escaped character or class to `set`. Returns true when the
  // escape is a single character (usable as a range end).
  bool parse_escape(CodepointSet& set, bool in_class) {
    if (at_end()) invalid("trailing backslash");
    char c = src_[pos_++];
    switch (c) {
      case 'd': set.add(digit_set()); return false;
      case 'D': set.add(digit_set().complement()); return false;
      case 'w': set.add(word_set()); return false;
      case 'W': set.add(word_set().complement()); return false;
      case 's': set.add(space_set()); return false;
      case 'S': set.add(space_set().complement()); return false;
      case 'b':
        if (in_class) return set.add(8, 8), true;
        unsupported("word boundary \\b");
      case 'B': unsupported("word boundary \\B");
      case 'n': return set.add('\n', '\n'), true;
      case 'r': return set.add('\r', '\r'), true;
      case 't': return set.add('\t', '\t'), true;
      case 'f': return set.add('\f', '\f'), true;
      case 'v': return set.add('\v', '\v'), true;
      case '0':
        if (!at_end() && src_[pos_] >= '0' && src_[pos_] <= '9') unsupported("octal escape");
        return set.add(0, 0), true;
      case 'x': {
        uint32_t v = parse_hex(2);
        return set.add(v, v), true;
      }
      case 'u': {
        uint32_t v = parse_unicode_escape();
        return set.add(v, v), true;
      }
      case 'c': {
        char letter = peek_byte();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z'))) invalid("bad \\c escape");
        ++pos_;
        uint32_t v = static_cast<uint32_t>(letter) % 32;
        return set.add(v, v), true;
      }
      case 'p':
      case 'P': unsupported("Unicode property escape");
      case 'k': unsupported("named backreference");
      default:
        if (c >= '1' && c <= '9') unsupported("backreference");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) invalid(fmt::format("unknown escape \\{}", c));
        --pos_;
        {
          uint32_t v = next_char();
          set.add(v, v);
        }
        return true;
    }
  }

  CodepointSet parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek_byte() == '^') negated = true, ++pos_;
    CodepointSet set;
    while (true) {
      if (at_end()) invalid("unterminated character class");
      if (peek_byte() == ']') {
        ++pos_;
        break;
      }
      CodepointSet item;
      bool single = parse_class_atom(item);
      if (single && peek_byte() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        CodepointSet upper;
        if (!parse_class_atom(upper)) invalid("character class range with a class escape");
        uint32_t lo = item.ranges()[0].first, hi = upper.ranges()[0].first;
        if (lo > hi) invalid("character class range out of order");
        set.add(lo, hi);
      } else {
        set.add(item);
      }
    }
    return negated ? set.complement() : set;
  }

  bool parse_class_atom(CodepointSet& item) {
    if (peek_byte() == '\\') {
      ++pos_;
      return parse_escape(item, /*in_class=*/true);
    }
    uint32_t c = next_char();
    item.add(c, c);
    return true;
  }

  std::string_view src_;
  const RegexOptions& options_;
  size_t pos_ = 0;
  int group_depth_ = 0;
};

}  // namespace

ExprPtr parse_regex(std::string_view pattern, const RegexOptions& options) {
  return RegexParser(pattern, options).parse();
}

Grammar regex_grammar(std::string_view pattern) { return single_rule_grammar(parse_regex(pattern)); }

}  // namespace deepinfer::structured
