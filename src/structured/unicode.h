#pragma once
// Sets of Unicode code points and their byte-level encodings: plain UTF-8 (regexes, GBNF) or
// the characters of a JSON string body as nlohmann::json / JSON.stringify write them (quote,
// backslash and control characters escaped, everything else raw UTF-8).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace deepinfer::structured {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet single(uint32_t c) { return range(c, c); }
  static CodepointSet range(uint32_t lo, uint32_t hi);
  static CodepointSet all();  // every scalar value (surrogates excluded)
  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;  // relative to all()
  CodepointSet minus(const CodepointSet& other) const;
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // sorted, disjoint, inclusive
};

// Encodes one character drawn from a set as bytes.
using CharEncoder = std::function<ExprPtr(const CodepointSet&)>;

ExprPtr utf8_expr(const CodepointSet& set);        // raw UTF-8
ExprPtr json_string_char_expr(const CodepointSet& set);  // one character inside a JSON string
CharEncoder utf8_encoder();
CharEncoder json_string_encoder();

void append_utf8(std::string& out, uint32_t codepoint);
// Decodes one UTF-8 character at `pos` (advancing it); returns false on malformed input.
bool decode_utf8(std::string_view text, size_t& pos, uint32_t& codepoint);

}  // namespace deepinfer::structured
