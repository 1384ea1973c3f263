#include "structured/unicode.h"

#include <algorithm>

namespace deepinfer::structured {

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet CodepointSet::all() {
  CodepointSet s;
  s.add(0, 0xD7FF);
  s.add(0xE000, kMaxCodepoint);
  return s;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCodepoint));
  normalize();
}

void CodepointSet::add(const CodepointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodepointSet CodepointSet::complement() const { return all().minus(*this); }

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  CodepointSet out;
  for (auto [lo, hi] : ranges_) {
    uint32_t cur = lo;
    bool done = false;
    for (auto [olo, ohi] : other.ranges_) {
      if (ohi < cur || olo > hi) continue;
      if (olo > cur) out.ranges_.emplace_back(cur, olo - 1);
      if (ohi >= hi) {
        done = true;
        break;
      }
      cur = ohi + 1;
    }
    if (!done && cur <= hi) out.ranges_.emplace_back(cur, hi);
  }
  out.normalize();
  return out;
}

bool CodepointSet::contains(uint32_t c) const {
  for (auto [lo, hi] : ranges_) {
    if (lo <= c && c <= hi) return true;
  }
  return false;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool decode_utf8(std::string_view text, size_t& pos, uint32_t& c) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  if (pos >= text.size()) return false;
  uint8_t b0 = byte(pos);
  int extra;
  if (b0 < 0x80) {
    c = b0, extra = 0;
  } else if ((b0 & 0xE0) == 0xC0) {
    c = b0 & 0x1F, extra = 1;
  } else if ((b0 & 0xF0) == 0xE0) {
    c = b0 & 0x0F, extra = 2;
  } else if ((b0 & 0xF8) == 0xF0) {
    c = b0 & 0x07, extra = 3;
  } else {
    return false;
  }
  if (pos + extra + 1 > text.size()) return false;
  for (int i = 1; i <= extra; ++i) {
    uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return false;
    c = (c << 6) | (b & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (c < kMin[extra] || c > kMaxCodepoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
  pos += extra + 1;
  return true;
}

namespace {

int utf8_length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// Splits [lo, hi] into byte-range sequences (as in Go's and Rust's UTF-8 range compilers).
void utf8_ranges(uint32_t lo, uint32_t hi, std::vector<ExprPtr>& out) {
  if (lo > hi) return;
  static const uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t end : kLengthEnds) {
    if (lo <= end && hi > end) {
      utf8_ranges(lo, end, out);
      utf8_ranges(end + 1, hi, out);
      return;
    }
  }
  int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_ranges(lo, lo | m, out);
        utf8_ranges((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_ranges(lo, (hi & ~m) - 1, out);
        utf8_ranges(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<ExprPtr> parts;
  for (size_t i = 0; i < a.size(); ++i) {
    parts.push_back(make_bytes(ByteSet::range(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]))));
  }
  out.push_back(make_seq(std::move(parts)));
}

}  // namespace

ExprPtr utf8_expr(const CodepointSet& set) {
  std::vector<ExprPtr> options;
  CodepointSet valid = set.minus(CodepointSet::range(0xD800, 0xDFFF));
  for (auto [lo, hi] : valid.ranges()) utf8_ranges(lo, hi, options);
  return make_alt(std::move(options));
}

ExprPtr json_string_char_expr(const CodepointSet& set) {
  CodepointSet escaped;
  escaped.add(0, 0x1F);
  escaped.add('"', '"');
  escaped.add('\\', '\\');
  std::vector<ExprPtr> options{utf8_expr(set.minus(escaped))};
  static const char kHex[] = "0123456789abcdef";
  for (auto [lo, hi] : set.ranges()) {
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x5C); ++c) {
      if (!escaped.contains(c)) continue;
      switch (c) {
        case '"': options.push_back(make_literal("\\\"")); break;
        case '\\': options.push_back(make_literal("\\\\")); break;
        case '\b': options.push_back(make_literal("\\b")); break;
        case '\f': options.push_back(make_literal("\\f")); break;
        case '\n': options.push_back(make_literal("\\n")); break;
        case '\r': options.push_back(make_literal("\\r")); break;
        case '\t': options.push_back(make_literal("\\t")); break;
        default: {
          std::string esc = "\\u00";
          esc += kHex[c >> 4];
          esc += kHex[c & 15];
          options.push_back(make_literal(esc));
        }
      }
    }
  }
  return make_alt(std::move(options));
}

CharEncoder utf8_encoder() { return [](const CodepointSet& s) { return utf8_expr(s); }; }
CharEncoder json_string_encoder() { return [](const CodepointSet& s) { return json_string_char_expr(s); }; }

}  // namespace deepinfer::structured
