// Keyword classification helpers of the JSON Schema converter.
#include <set>
#include <string>

#include "structured/json_schema_internal.h"

namespace deepinfer::structured::json_internal {
namespace {

// Keywords that only annotate or hold subschemas for references.
const std::set<std::string> kAnnotations = {
    "$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary", "$dynamicAnchor", "title",
    "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "contentMediaType",
    "contentEncoding", "contentSchema"};

}  // namespace

bool is_trivially_true(const json& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (auto& [k, v] : s.items()) {
    if (!kAnnotations.count(k)) return false;
  }
  return true;
}

bool has_validation_keywords(const json& s) {
  for (auto& [k, v] : s.items()) {
    if (!kAnnotations.count(k)) return true;
  }
  return false;
}

std::string unescape_pointer_token(std::string token) {
  std::string out;
  // Percent-decoding first (URI fragment), then ~1 -> '/', ~0 -> '~'.
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '%' && i + 2 < token.size()) {
      out += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += token[i];
    }
  }
  std::string result;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '~' && i + 1 < out.size() && (out[i + 1] == '0' || out[i + 1] == '1')) {
      result += out[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      result += out[i];
    }
  }
  return result;
}

// The set of JSON types a schema can possibly match (conservative: all when unsure).
std::set<std::string> possible_types(const json& s) {
  std::set<std::string> all = {"null", "boolean", "object", "array", "number", "string"};
  if (s.is_boolean()) return s.get<bool>() ? all : std::set<std::string>{};
  if (!s.is_object()) return all;
  std::set<std::string> out;
  auto add_value_type = [&](const json& v) {
    if (v.is_null()) out.insert("null");
    else if (v.is_boolean()) out.insert("boolean");
    else if (v.is_object()) out.insert("object");
    else if (v.is_array()) out.insert("array");
    else if (v.is_number()) out.insert("number");
    else out.insert("string");
  };
  if (s.contains("const")) {
    add_value_type(s["const"]);
    return out;
  }
  if (s.contains("enum") && s["enum"].is_array()) {
    for (auto& v : s["enum"]) add_value_type(v);
    return out;
  }
  if (s.contains("type")) {
    const json& t = s["type"];
    std::vector<std::string> names;
    if (t.is_string()) names.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (auto& x : t) names.push_back(x.get<std::string>());
    }
    for (auto& n : names) out.insert(n == "integer" ? "number" : n);
    return out;
  }
  return all;
}

}  // namespace deepinfer::structured::json_internal
