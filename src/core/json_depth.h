#pragma once
// The nesting depth of JSON text, scanned without parsing (strings skipped). Request readers
// refuse deep documents before any recursive JSON code (nlohmann's dump) sees them: a 100,000-deep
// array would otherwise overflow the stack.
#include <algorithm>
#include <cstddef>
#include <string_view>

namespace deepinfer {

inline size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

}  // namespace deepinfer
