// Literals, whitespace and numbers for the JSON Schema converter.
#include <cmath>
#include <map>
#include <string>

#include "structured/json_schema_internal.h"

namespace deepinfer::structured::json_internal {
namespace {

ExprPtr digit() { return make_bytes(ByteSet::range('0', '9')); }
ExprPtr digit_range(char lo, char hi) {
  return lo > hi ? make_nothing() : make_bytes(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}
ExprPtr digits(size_t n) { return make_repeat(digit(), static_cast<uint32_t>(n), static_cast<uint32_t>(n)); }

// Same-length digit strings >= s / <= s.
ExprPtr at_least(std::string_view s) {
  if (s.empty()) return make_empty();
  return make_alt({make_seq({make_byte(s[0]), at_least(s.substr(1))}), make_seq({digit_range(s[0] + 1, '9'), digits(s.size() - 1)})});
}
ExprPtr at_most(std::string_view s) {
  if (s.empty()) return make_empty();
  return make_alt({make_seq({make_byte(s[0]), at_most(s.substr(1))}), make_seq({digit_range('0', s[0] - 1), digits(s.size() - 1)})});
}
// Same-length digit strings in [a, b].
ExprPtr between(std::string_view a, std::string_view b) {
  if (a.empty()) return make_empty();
  if (a[0] == b[0]) return make_seq({make_byte(a[0]), between(a.substr(1), b.substr(1))});
  return make_alt({make_seq({make_byte(a[0]), at_least(a.substr(1))}),
                   make_seq({digit_range(a[0] + 1, b[0] - 1), digits(a.size() - 1)}),
                   make_seq({make_byte(b[0]), at_most(b.substr(1))})});
}

uint64_t power10(size_t n) {
  uint64_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= 10;
  return p;
}

// Natural numbers in [lo, hi] written without leading zeros.
ExprPtr natural_range(uint64_t lo, std::optional<uint64_t> hi) {
  if (hi && *hi < lo) return make_nothing();
  std::vector<ExprPtr> options;
  size_t lo_len = std::to_string(lo).size();
  size_t hi_len = hi ? std::to_string(*hi).size() : lo_len;
  for (size_t len = lo_len; len <= hi_len; ++len) {
    uint64_t first = len == 1 ? 0 : power10(len - 1);
    uint64_t last = power10(len) - 1;
    uint64_t a = std::max(lo, first);
    uint64_t b = hi ? std::min(*hi, last) : last;
    if (a <= b) options.push_back(between(std::to_string(a), std::to_string(b)));
  }
  if (!hi) options.push_back(make_seq({digit_range('1', '9'), make_repeat(digit(), static_cast<uint32_t>(lo_len), kUnbounded)}));
  return make_alt(std::move(options));
}

ExprPtr frac_any() { return make_optional(make_seq({make_byte('.'), make_plus(digit())})); }
ExprPtr frac_zero() { return make_optional(make_seq({make_byte('.'), make_plus(make_byte('0'))})); }
ExprPtr frac_nonzero() {
  return make_seq({make_byte('.'), make_star(digit()), digit_range('1', '9'), make_star(digit())});
}

// Non-negative magnitudes m = I.F with lo (<, <=) m (<, <=) hi.
ExprPtr magnitude_range(Bound lo, std::optional<Bound> hi) {
  std::vector<ExprPtr> options;
  // Integer parts that admit any fraction.
  int64_t any_lo = lo.exclusive ? lo.value + 1 : lo.value;
  std::optional<uint64_t> any_hi;
  if (hi) any_hi = hi->value - 1 < 0 ? 0 : static_cast<uint64_t>(hi->value - 1);
  if (!hi || hi->value - 1 >= any_lo) {
    options.push_back(make_seq({natural_range(static_cast<uint64_t>(any_lo), any_hi), frac_any()}));
  }
  if (lo.exclusive && (!hi || lo.value < hi->value)) {
    options.push_back(make_seq({natural_range(lo.value, static_cast<uint64_t>(lo.value)), frac_nonzero()}));
  }
  if (hi && !hi->exclusive && (hi->value > lo.value || (hi->value == lo.value && !lo.exclusive))) {
    options.push_back(make_seq({natural_range(hi->value, static_cast<uint64_t>(hi->value)), frac_zero()}));
  }
  return make_alt(std::move(options));
}

}  // namespace

JsonSyntax make_syntax(const JsonSchemaOptions& options) {
  JsonSyntax s;
  if (options.whitespace == JsonSchemaOptions::Whitespace::kCompact) {
    s.ws = make_empty();
  } else {
    ByteSet space;
    for (uint8_t c : {' ', '\t', '\n', '\r'}) space.set(c);
    s.ws = make_repeat(make_bytes(space), 0, options.max_whitespace);
  }
  s.comma = make_seq({s.ws, make_byte(','), s.ws});
  s.colon = make_seq({s.ws, make_byte(':'), s.ws});
  s.open_object = make_seq({make_byte('{'), s.ws});
  s.close_object = make_seq({s.ws, make_byte('}')});
  s.open_array = make_seq({make_byte('['), s.ws});
  s.close_array = make_seq({s.ws, make_byte(']')});
  return s;
}

ExprPtr quoted_string_literal(const std::string& text) { return make_literal(json(text).dump()); }

ExprPtr literal_value_expr(const json& value, const JsonSyntax& syntax) {
  if (value.is_object()) {
    // Members in sorted key order (a canonical order; schema order is unknown for literals).
    std::map<std::string, const json*> sorted;
    for (auto& [key, member] : value.items()) sorted[key] = &member;
    std::vector<ExprPtr> parts{syntax.open_object};
    bool first = true;
    for (auto& [key, member_ptr] : sorted) {
      const json& member = *member_ptr;
      if (!first) parts.push_back(syntax.comma);
      first = false;
      parts.push_back(quoted_string_literal(key));
      parts.push_back(syntax.colon);
      parts.push_back(literal_value_expr(member, syntax));
    }
    parts.push_back(syntax.close_object);
    return make_seq(std::move(parts));
  }
  if (value.is_array()) {
    std::vector<ExprPtr> parts{syntax.open_array};
    for (size_t i = 0; i < value.size(); ++i) {
      if (i) parts.push_back(syntax.comma);
      parts.push_back(literal_value_expr(value[i], syntax));
    }
    parts.push_back(syntax.close_array);
    return make_seq(std::move(parts));
  }
  if (value.is_number_float()) {
    double v = value.get<double>();
    // Integral values are written as integers (1.0 and 1 are the same JSON number).
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) {
      return make_literal(std::to_string(static_cast<int64_t>(v)));
    }
  }
  return make_literal(value.dump());
}

ExprPtr any_integer_expr() {
  return make_seq({make_optional(make_byte('-')), natural_range(0, std::nullopt)});
}

ExprPtr any_number_expr() {
  ByteSet e;
  e.set('e');
  e.set('E');
  ByteSet sign;
  sign.set('+');
  sign.set('-');
  return make_seq({any_integer_expr(), frac_any(),
                   make_optional(make_seq({make_bytes(e), make_optional(make_bytes(sign)), make_plus(digit())}))});
}

ExprPtr integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<ExprPtr> options;
  if (!hi || *hi >= 0) {
    uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    options.push_back(natural_range(from, hi ? std::optional<uint64_t>(*hi) : std::nullopt));
  }
  if (!lo || *lo < 0) {
    // -m for m in [max(1, -hi), -lo]
    uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-*lo);
    options.push_back(make_seq({make_byte('-'), natural_range(from, to)}));
  }
  return make_alt(std::move(options));
}

ExprPtr bounded_number_expr(std::optional<Bound> lo, std::optional<Bound> hi) {
  std::vector<ExprPtr> options;
  // x >= 0 written without a sign.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    Bound mlo = lo && lo->value >= 0 ? *lo : Bound{0, false};
    options.push_back(magnitude_range(mlo, hi));
  }
  // x <= 0 written with a sign: magnitude -x.
  if (!lo || lo->value < 0 || (lo->value == 0 && !lo->exclusive)) {
    Bound mlo = hi && hi->value <= 0 ? Bound{-hi->value, hi->exclusive} : Bound{0, false};
    std::optional<Bound> mhi;
    if (lo) mhi = Bound{-lo->value, lo->exclusive};
    options.push_back(make_seq({make_byte('-'), magnitude_range(mlo, mhi)}));
  }
  return make_alt(std::move(options));
}

}  // namespace deepinfer::structured::json_internal
