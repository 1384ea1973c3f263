// uniqueItems over a finite item domain (an enum, a const, booleans/null): the array is a path
// through the subsets of values already written, so no value can repeat. One grammar rule per
// reachable subset, kept out of line so the 2^n subsets are not expanded into n! sequences.
#include <fmt/format.h>

#include <bit>
#include <map>

#include "structured/json_schema_internal.h"

namespace deepinfer::structured::json_internal {

ExprPtr unique_items_array_expr(Grammar& grammar, const std::vector<ExprPtr>& values, uint32_t min_items,
                                uint32_t max_items, const JsonSyntax& syntax) {
  if (values.size() > kMaxUniqueItemValues) {
    throw_unsupported("uniqueItems", fmt::format("uniqueItems over more than {} distinct item values",
                                                 kMaxUniqueItemValues));
  }
  const uint32_t n = static_cast<uint32_t>(values.size());
  std::map<uint32_t, int> rule_of_subset;
  // after(used): the rest of the array once the values in `used` are written. Subsets only grow,
  // so each rule's larger subsets are made before it and no rule refers back.
  std::function<ExprPtr(uint32_t)> after = [&](uint32_t used) -> ExprPtr {
    auto it = rule_of_subset.find(used);
    if (it != rule_of_subset.end()) return make_ref(it->second);
    const uint32_t count = static_cast<uint32_t>(std::popcount(used));
    std::vector<ExprPtr> options;
    if (count >= min_items) options.push_back(make_empty());
    if (count < max_items) {
      for (uint32_t i = 0; i < n; ++i) {
        if (used & (1u << i)) continue;
        options.push_back(make_seq({count > 0 ? syntax.comma : make_empty(), values[i], after(used | (1u << i))}));
      }
    }
    int rule = grammar.add_rule(fmt::format("unique_items_{:x}", used), make_alt(std::move(options)));
    grammar.set_inlinable(rule, false);
    rule_of_subset[used] = rule;
    return make_ref(rule);
  };
  return make_seq({syntax.open_array, after(0), syntax.close_array});
}

}  // namespace deepinfer::structured::json_internal
