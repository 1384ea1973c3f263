#pragma once
// Building blocks of the JSON Schema converter: whitespace policy, literals, numbers, formats
// and schema merging (allOf).
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "structured/fsm.h"
#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace deepinfer::structured::json_internal {

using json = nlohmann::ordered_json;

struct JsonSyntax {
  ExprPtr ws;     // optional whitespace (empty when compact)
  ExprPtr comma;  // ws "," ws
  ExprPtr colon;  // ws ":" ws
  ExprPtr open_object, close_object, open_array, close_array;  // with inner ws
};
JsonSyntax make_syntax(const JsonSchemaOptions& options);

// The value written exactly (objects with sorted keys, as nlohmann::json stores them).
ExprPtr literal_value_expr(const json& value, const JsonSyntax& syntax);
ExprPtr quoted_string_literal(const std::string& text);

ExprPtr any_number_expr();
ExprPtr any_integer_expr();
// Integers in [lo, hi] (either side open when absent), exact digit by digit.
ExprPtr integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi);
struct Bound {
  int64_t value;
  bool exclusive;
};
// Decimal numbers (no exponent) within integer-valued bounds.
ExprPtr bounded_number_expr(std::optional<Bound> lo, std::optional<Bound> hi);

// multipleOf's step as an exact decimal: m * 10^-d. Throws invalid (not > 0) or unsupported.
struct DecimalStep {
  uint64_t m;
  uint32_t d;
};
DecimalStep parse_decimal_step(const json& value);
// allOf of two multipleOf keywords: their least common multiple (unsupported when out of range).
json common_multiple_of(const json& a, const json& b);
// Number texts (no exponent, at most d fraction digits) whose value is a multiple of the step;
// intersected with the other number keywords. Throws unsupported when the automaton is too big.
Fsm multiple_of_filter(DecimalStep step);

// Arrays of distinct values drawn from `values` (each a complete value expression), with
// min/max item counts. Throws unsupported above kMaxUniqueItemValues values.
inline constexpr size_t kMaxUniqueItemValues = 8;
ExprPtr unique_items_array_expr(Grammar& grammar, const std::vector<ExprPtr>& values, uint32_t min_items,
                                uint32_t max_items, const JsonSyntax& syntax);

// String content (between the quotes) for a `format`; throws unsupported for unknown formats.
ExprPtr format_content_expr(const std::string& format);

// Resolves a "$ref" against the root document; throws unsupported for remote references.
using RefResolver = std::function<const json&(const std::string& ref)>;
// allOf of two schemas as one schema, or throws unsupported when that cannot be done exactly.
// `a` is the outer schema (its unevaluated* keywords see b's annotations); `b` is an in-place
// child and may not carry unevaluated* keywords (they could not see a's annotations).
json merge_schemas(const json& a, const json& b, const RefResolver& resolve, int depth = 0);
// dependentRequired / dependentSchemas present (non-empty), and the schema rewritten without them:
// one allOf entry per trigger, anyOf [member absent, member present and the dependency holds].
bool has_dependencies(const json& schema);
json dependencies_as_all_of(const json& schema);
// Throws unsupported when an in-place applicator child uses unevaluatedProperties/Items.
void check_no_unevaluated(const json& schema, const RefResolver& resolve, int depth = 0);

// true, {} or only annotation keywords (title, $comment, $defs, ...).
bool is_trivially_true(const json& schema);
bool has_validation_keywords(const json& schema);
// JSON pointer token: percent-decoding, then ~1 -> '/', ~0 -> '~'.
std::string unescape_pointer_token(std::string token);
// The JSON types ("number" covers integers) a schema can match; all six when unsure.
std::set<std::string> possible_types(const json& schema);

// A schema that is only a "$ref" (plus annotations), followed to its target.
const json& follow_refs(const json& schema, const RefResolver& resolve);
// Whether two oneOf branches can share a value: kDisjoint (proven), kCompareTexts (values have one
// text each, so disjoint automata prove it), kUnknown (objects may be involved: no proof).
enum class BranchOverlap { kDisjoint, kCompareTexts, kUnknown };
BranchOverlap branch_overlap(const json& a, const json& b, const RefResolver& resolve);

}  // namespace deepinfer::structured::json_internal
