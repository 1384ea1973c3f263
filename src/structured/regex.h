#pragma once
// Regular expressions in the ECMAScript-like dialect of JSON Schema `pattern`: classes, ranges,
// escapes (\d \w \s \xHH \uHHHH \u{...}), quantifiers (* + ? {m} {m,} {m,n}, lazy forms), groups,
// alternation, `.`, and ^ / $ at the ends. Backreferences, lookaround, word boundaries and
// Unicode property escapes are rejected with GrammarError(kUnsupported).
#include <string_view>

#include "structured/grammar.h"
#include "structured/unicode.h"

namespace deepinfer::structured {

struct RegexOptions {
  // kFullMatch: the whole text must match (anchors at the ends are allowed and ignored).
  // kSearch: JSON Schema semantics, a match anywhere; unanchored ends admit any characters.
  enum class Anchoring { kFullMatch, kSearch };
  Anchoring anchoring = Anchoring::kFullMatch;
  CharEncoder encoder = utf8_encoder();
  std::string keyword = "regex";  // names the construct in errors (e.g. "pattern")
};

ExprPtr parse_regex(std::string_view pattern, const RegexOptions& options = {});
// A grammar whose only rule is the regex (full-match anchoring, UTF-8).
Grammar regex_grammar(std::string_view pattern);

}  // namespace deepinfer::structured
