#pragma once
// A JSON value quoted in an error message, bounded: small values as JSON (elided past `max`
// bytes), large or deep ones by their kind and size. nlohmann's dump() recurses, so a hostile
// 300,000-deep array would overflow the stack if an error message dumped it whole.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace deepinfer {

// Any nlohmann basic_json (json, ordered_json).
template <typename JsonT = nlohmann::json>
std::string json_excerpt(const JsonT& v, size_t max = 80) {
  constexpr size_t kMaxNodes = 64;
  std::vector<const JsonT*> pending{&v};
  size_t nodes = 0;
  while (!pending.empty() && nodes <= kMaxNodes) {
    const JsonT* j = pending.back();
    pending.pop_back();
    ++nodes;
    if (j->is_structured())
      for (const auto& child : *j) pending.push_back(&child);
  }
  if (nodes <= kMaxNodes) return elide(v.dump(), max);
  return fmt::format("{} of {} {}", v.is_array() ? "an array" : "an object", v.size(),
                     v.is_array() ? "elements" : "members");
}

}  // namespace deepinfer
