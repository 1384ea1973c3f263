#pragma once
// JSON Schema (draft 2020-12) to grammar. Every keyword either constrains the grammar exactly or
// raises GrammarError naming it: kUnsupported (cannot be expressed, e.g. uniqueItems, not,
// multipleOf), kInvalid (malformed schema) or kUnsatisfiable (nothing can match).
//
// Serialisation policy of the generated JSON: object members follow the order of `properties`
// (then additional members), strings use the minimal escapes (\" \\ \b \f \n \r \t, \u00XX for
// other control characters, everything else raw UTF-8), numbers are plain JSON numbers; with
// numeric bounds, numbers are written without exponent.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "structured/grammar.h"

namespace deepinfer::structured {

struct JsonSchemaOptions {
  enum class Whitespace { kCompact, kFlexible };
  // kCompact: no whitespace at all (as nlohmann::json::dump()). kFlexible: up to
  // `max_whitespace` of space / tab / newline / CR around structural characters.
  Whitespace whitespace = Whitespace::kFlexible;
  uint32_t max_whitespace = 24;
  // Enforce `format` (date, time, date-time, duration, uuid, email, ipv4, ipv6, uri, uri-reference,
  // iri, iri-reference, uri-template, json-pointer, relative-json-pointer). When false, format is
  // an annotation only (the JSON Schema default for validators).
  bool assert_formats = true;
  std::string cache_key() const;
};

Grammar json_schema_grammar(std::string_view schema_json, const JsonSchemaOptions& options = {});
Grammar json_schema_grammar_from_value(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
// Any JSON value, or (object_only) any JSON object: the `json_object` response format.
Grammar any_json_grammar(const JsonSchemaOptions& options = {}, bool object_only = true);

}  // namespace deepinfer::structured
