// multipleOf as a finite automaton over number texts. A step q written in decimal is m * 10^-d
// (m, d integers); a number text N (all its digits) with f <= d fraction digits has the value
// N * 10^-f, which is a multiple of q exactly when N * 10^(d-f) is divisible by m. Reading the
// digits left to right keeps N mod m, so m * (d + 2) states decide it. Texts with more than d
// fraction digits (trailing zeros) or an exponent are not written; every multiple keeps its
// shortest decimal form.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>

#include "structured/json_schema_internal.h"

namespace deepinfer::structured::json_internal {
namespace {

// Largest automaton multipleOf may build before intersecting with the other number keywords.
constexpr uint64_t kMaxStepStates = 100000;

}  // namespace

DecimalStep parse_decimal_step(const json& value) {
  if (!value.is_number() || !(value.get<double>() > 0)) {
    throw_invalid("multipleOf", "multipleOf must be a number greater than 0");
  }
  if (value.is_number_unsigned()) return {value.get<uint64_t>(), 0};
  if (value.is_number_integer()) return {static_cast<uint64_t>(value.get<int64_t>()), 0};
  // The shortest text of the double is the decimal the schema author wrote (0.01, 1.5, 1e-08).
  std::string text = value.dump();
  size_t e = text.find_first_of("eE");
  long exponent = e == std::string::npos ? 0 : std::strtol(text.c_str() + e + 1, nullptr, 10);
  std::string mantissa = text.substr(0, e);
  size_t dot = mantissa.find('.');
  long fraction_digits = 0;
  if (dot != std::string::npos) {
    fraction_digits = static_cast<long>(mantissa.size() - dot - 1);
    mantissa.erase(dot, 1);
  }
  mantissa.erase(0, mantissa.find_first_not_of('0'));
  long scale = fraction_digits - exponent;  // value = mantissa * 10^-scale
  while (scale > 0 && mantissa.size() > 1 && mantissa.back() == '0') mantissa.pop_back(), --scale;
  if (scale < 0) mantissa.append(static_cast<size_t>(-scale), '0'), scale = 0;
  if (mantissa.empty() || mantissa.size() > 18 || scale > 300) {
    throw_unsupported("multipleOf", fmt::format("multipleOf {} is out of range", text));
  }
  return {std::stoull(mantissa), static_cast<uint32_t>(scale)};
}

json common_multiple_of(const json& a, const json& b) {
  DecimalStep x = parse_decimal_step(a), y = parse_decimal_step(b);
  // Same scale, then the least common multiple of the integer steps.
  uint32_t d = std::max(x.d, y.d);
  auto rescale = [&](DecimalStep s) {
    for (uint32_t k = s.d; k < d; ++k) {
      if (s.m > UINT64_MAX / 10) throw_unsupported("multipleOf", "allOf of two multipleOf steps is out of range");
      s.m *= 10;
    }
    return s.m;
  };
  uint64_t mx = rescale(x), my = rescale(y);
  uint64_t step = mx / std::gcd(mx, my);
  if (step > UINT64_MAX / my) throw_unsupported("multipleOf", "allOf of two multipleOf steps is out of range");
  step *= my;
  if (d == 0) return json(step);
  // A double whose shortest text is m e-d again (true up to 15 significant digits).
  json out = json(std::strtod(fmt::format("{}e-{}", step, d).c_str(), nullptr));
  DecimalStep back = parse_decimal_step(out);
  uint64_t back_m = back.m;
  for (uint32_t k = back.d; k < d; ++k) back_m *= 10;
  if (back.d > d || back_m != step) throw_unsupported("multipleOf", "allOf of two multipleOf steps is out of range");
  return out;
}

Fsm multiple_of_filter(DecimalStep step) {
  const uint64_t m = step.m;
  const uint32_t d = step.d;
  if (m > kMaxStepStates || m * (d + 2) > kMaxStepStates) {
    std::string text = d == 0 ? std::to_string(m) : fmt::format("{}e-{}", m, d);
    throw_unsupported("multipleOf", fmt::format("multipleOf {} needs more than {} automaton states", text, kMaxStepStates));
  }
  // pow10_mod[k] = 10^k mod m: a text ending after f fraction digits is scaled by 10^(d-f).
  std::vector<uint64_t> pow10_mod(d + 1, 1 % m);
  for (uint32_t k = 1; k <= d; ++k) pow10_mod[k] = pow10_mod[k - 1] * 10 % m;
  Fsm fsm;
  const int32_t start = 0, after_sign = 1, zero = 2;
  fsm.states.resize(3 + m * (d + 2));
  // digits_state(f, r): integer part read (f == 0) or f fraction digits read, N mod m == r;
  // dot_state(r): the '.' just read.
  auto digits_state = [&](uint32_t f, uint64_t r) { return static_cast<int32_t>(3 + f * m + r); };
  auto dot_state = [&](uint64_t r) { return static_cast<int32_t>(3 + (d + 1) * m + r); };
  auto add = [&](int32_t from, uint8_t lo, uint8_t hi, int32_t to) { fsm.states[from].edges.push_back({lo, hi, to}); };
  auto add_digits = [&](int32_t from, uint64_t r, uint32_t f) {
    for (uint8_t c = '0'; c <= '9'; ++c) add(from, c, c, digits_state(f, (r * 10 + (c - '0')) % m));
  };
  fsm.start = start;
  add(start, '-', '-', after_sign);
  for (int32_t s : {start, after_sign}) {
    add(s, '0', '0', zero);
    for (uint8_t c = '1'; c <= '9'; ++c) add(s, c, c, digits_state(0, (c - '0') % m));
  }
  fsm.states[zero].final = true;
  if (d > 0) add(zero, '.', '.', dot_state(0));
  for (uint64_t r = 0; r < m; ++r) {
    for (uint32_t f = 0; f <= d; ++f) {
      int32_t s = digits_state(f, r);
      fsm.states[s].final = r * pow10_mod[d - f] % m == 0;
      if (f == 0) {
        add_digits(s, r, 0);
        if (d > 0) add(s, '.', '.', dot_state(r));
      } else if (f < d) {
        add_digits(s, r, f + 1);
      }
    }
    if (d > 0) add_digits(dot_state(r), r, 1);
  }
  return fsm;
}

}  // namespace deepinfer::structured::json_internal
