#pragma once
// EBNF in llama.cpp's GBNF dialect: `name ::= body` rules (start rule `root`), alternation `|`,
// grouping, `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`, "string literals" with escapes, [character
// classes] with ranges and `^` negation, `.` (any character) and `#` comments.
#include <string_view>

#include "structured/grammar.h"

namespace deepinfer::structured {

// Throws GrammarError(kInvalid) on syntax errors and undefined rules (keyword "ebnf").
Grammar parse_ebnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace deepinfer::structured
