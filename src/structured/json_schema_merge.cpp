// allOf as one schema: keyword-wise intersection, exact or refused (unsupported).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "structured/json_schema_internal.h"
#include "structured/fsm.h"
#include "structured/regex.h"

namespace deepinfer::structured::json_internal {
namespace {

constexpr int kMaxMergeDepth = 24;
// dependentRequired/dependentSchemas triggers; each doubles the alternatives (64 at most).
constexpr size_t kMaxDependencyTriggers = 6;

std::set<std::string> type_set(const json& t) {
  std::set<std::string> out;
  if (t.is_string()) out.insert(t.get<std::string>());
  if (t.is_array()) {
    for (auto& x : t) {
      if (x.is_string()) out.insert(x.get<std::string>());
    }
  }
  return out;
}

json intersect_types(const json& a, const json& b) {
  auto ta = type_set(a), tb = type_set(b);
  json out = json::array();
  for (auto& t : ta) {
    if (tb.count(t)) {
      out.push_back(t);
    } else if (t == "integer" && tb.count("number")) {
      out.push_back("integer");
    } else if (t == "number" && tb.count("integer")) {
      out.push_back("integer");
    }
  }
  return out;
}

bool is_object_keyword(const std::string& k) {
  return k == "properties" || k == "additionalProperties" || k == "patternProperties";
}

// The schema `s` imposes on the value of member `key` (patternProperties that match count too).
json member_schema(const json& s, const std::string& key, const RefResolver& resolve, int depth) {
  if (s.contains("properties") && s["properties"].contains(key)) return s["properties"][key];
  json result = true;
  bool matched = false;
  if (s.contains("patternProperties")) {
    for (auto& [pattern, sub] : s["patternProperties"].items()) {
      RegexOptions options;
      options.anchoring = RegexOptions::Anchoring::kSearch;
      options.keyword = "patternProperties";
      Fsm dfa = compile_dfa(*parse_regex(pattern, options));
      if (dfa.accepts(key)) result = merge_schemas(result, sub, resolve, depth + 1), matched = true;
    }
  }
  if (!matched && s.contains("additionalProperties")) return s["additionalProperties"];
  return result;
}

void merge_objects(json& out, const json& a, const json& b, const RefResolver& resolve, int depth) {
  if (a.contains("patternProperties") && b.contains("patternProperties")) {
    throw_unsupported("patternProperties", "allOf of two schemas with patternProperties");
  }
  std::vector<std::string> keys;
  for (const json* s : {&a, &b}) {
    if (!s->contains("properties")) continue;
    for (auto& [k, v] : (*s)["properties"].items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  json properties = json::object();
  for (auto& k : keys) {
    properties[k] = merge_schemas(member_schema(a, k, resolve, depth), member_schema(b, k, resolve, depth), resolve, depth + 1);
  }
  for (auto& k : {"properties", "additionalProperties", "patternProperties"}) out.erase(k);
  if (!keys.empty()) out["properties"] = properties;
  const json& with_patterns = a.contains("patternProperties") ? a : b;
  const json& other = a.contains("patternProperties") ? b : a;
  json other_additional = other.contains("additionalProperties") ? other["additionalProperties"] : json(true);
  if (with_patterns.contains("patternProperties")) {
    json patterns = json::object();
    for (auto& [p, sub] : with_patterns["patternProperties"].items()) {
      patterns[p] = merge_schemas(sub, other_additional, resolve, depth + 1);
    }
    out["patternProperties"] = patterns;
  }
  json add_a = a.contains("additionalProperties") ? a["additionalProperties"] : json(true);
  json add_b = b.contains("additionalProperties") ? b["additionalProperties"] : json(true);
  if (a.contains("additionalProperties") || b.contains("additionalProperties")) {
    out["additionalProperties"] = merge_schemas(add_a, add_b, resolve, depth + 1);
  }
}

json item_schema(const json& s, size_t i) {
  if (s.contains("prefixItems") && i < s["prefixItems"].size()) return s["prefixItems"][i];
  return s.contains("items") ? s["items"] : json(true);
}

void merge_arrays(json& out, const json& a, const json& b, const RefResolver& resolve, int depth) {
  size_t prefix = 0;
  for (const json* s : {&a, &b}) {
    if (s->contains("prefixItems")) prefix = std::max(prefix, (*s)["prefixItems"].size());
  }
  out.erase("prefixItems");
  out.erase("items");
  if (prefix > 0) {
    json items = json::array();
    for (size_t i = 0; i < prefix; ++i) items.push_back(merge_schemas(item_schema(a, i), item_schema(b, i), resolve, depth + 1));
    out["prefixItems"] = items;
  }
  if (a.contains("items") || b.contains("items")) {
    json ia = a.contains("items") ? a["items"] : json(true);
    json ib = b.contains("items") ? b["items"] : json(true);
    out["items"] = merge_schemas(ia, ib, resolve, depth + 1);
  }
}

bool trivially_true(const json& s) {
  if (s.is_boolean()) return s.get<bool>();
  return s.is_object() && s.empty();
}

}  // namespace

void check_no_unevaluated(const json& s, const RefResolver& resolve, int depth) {
  if (!s.is_object() || depth > 16) return;
  for (auto& key : {"unevaluatedProperties", "unevaluatedItems"}) {
    if (s.contains(key) && !trivially_true(s[key])) {
      throw_unsupported(key, fmt::format("{} in a subschema combined with other keywords", key));
    }
  }
  if (s.contains("$ref") && s["$ref"].is_string()) check_no_unevaluated(resolve(s["$ref"].get<std::string>()), resolve, depth + 1);
  for (auto& key : {"allOf", "anyOf", "oneOf"}) {
    if (s.contains(key) && s[key].is_array()) {
      for (auto& sub : s[key]) check_no_unevaluated(sub, resolve, depth + 1);
    }
  }
}

json merge_schemas(const json& a_in, const json& b_in, const RefResolver& resolve, int depth) {
  if (depth > kMaxMergeDepth) throw_unsupported("allOf", "schemas nest too deeply to combine");
  if (a_in.is_boolean()) return a_in.get<bool>() ? b_in : json(false);
  if (b_in.is_boolean()) return b_in.get<bool>() ? a_in : json(false);
  if (!a_in.is_object() || !b_in.is_object()) throw_invalid("allOf", "a schema must be an object or a boolean");
  // References and nested allOf are flattened first.
  for (const json* s : {&a_in, &b_in}) {
    if (s->contains("$ref")) {
      json rest = *s;
      rest.erase("$ref");
      json target = resolve((*s)["$ref"].get<std::string>());
      json flat = merge_schemas(target, rest, resolve, depth + 1);
      return s == &a_in ? merge_schemas(flat, b_in, resolve, depth + 1) : merge_schemas(a_in, flat, resolve, depth + 1);
    }
    if (s->contains("allOf")) {
      json flat = *s;
      flat.erase("allOf");
      for (auto& sub : (*s)["allOf"]) flat = merge_schemas(flat, sub, resolve, depth + 1);
      return s == &a_in ? merge_schemas(flat, b_in, resolve, depth + 1) : merge_schemas(a_in, flat, resolve, depth + 1);
    }
  }
  const json& a = a_in;
  const json& b = b_in;
  check_no_unevaluated(b, resolve);
  if (depth > 0) check_no_unevaluated(a, resolve);
  json out = a;
  bool objects = false, arrays = false;
  for (auto& [key, bv] : b.items()) {
    if (is_object_keyword(key)) {
      objects = true;
      continue;
    }
    if (key == "items" || key == "prefixItems") {
      arrays = true;
      continue;
    }
    if (!a.contains(key)) {
      out[key] = bv;
      continue;
    }
    const json& av = a[key];
    if (av == bv) continue;
    if (key == "type") {
      out[key] = intersect_types(av, bv);
    } else if (key == "required") {
      json req = av;
      for (auto& r : bv) {
        if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
      }
      out[key] = req;
    } else if (key == "minLength" || key == "minItems" || key == "minProperties" || key == "minimum" ||
               key == "exclusiveMinimum" || key == "minContains") {
      out[key] = av.get<double>() >= bv.get<double>() ? av : bv;
    } else if (key == "maxLength" || key == "maxItems" || key == "maxProperties" || key == "maximum" ||
               key == "exclusiveMaximum" || key == "maxContains") {
      out[key] = av.get<double>() <= bv.get<double>() ? av : bv;
    } else if (key == "enum") {
      json values = json::array();
      for (auto& v : av) {
        if (std::find(bv.begin(), bv.end(), v) != bv.end()) values.push_back(v);
      }
      out[key] = values;
    } else if (key == "multipleOf") {
      out[key] = common_multiple_of(av, bv);
    } else if (key == "const") {
      return json(false);
    } else if (key == "pattern") {
      json patterns = av.is_array() ? av : json::array({av});
      if (bv.is_array()) {
        for (auto& p : bv) patterns.push_back(p);
      } else {
        patterns.push_back(bv);
      }
      out[key] = patterns;
    } else if (key == "uniqueItems") {
      out[key] = av.get<bool>() || bv.get<bool>();
    } else if (key == "anyOf") {
      json combos = json::array();
      if (av.size() * bv.size() > 64) throw_unsupported("anyOf", "allOf of two large anyOf lists");
      for (auto& x : av) {
        for (auto& y : bv) combos.push_back(merge_schemas(x, y, resolve, depth + 1));
      }
      out[key] = combos;
    } else if (key == "title" || key == "description" || key == "$comment" || key == "default" || key == "examples" ||
               key == "$defs" || key == "definitions" || key == "$id" || key == "$schema" || key == "$anchor") {
      continue;
    } else {
      throw_unsupported(key, fmt::format("cannot combine two different '{}' keywords (allOf)", key));
    }
  }
  for (auto& [key, av] : a.items()) {
    if (is_object_keyword(key)) objects = true;
    if (key == "items" || key == "prefixItems") arrays = true;
  }
  if (objects) merge_objects(out, a, b, resolve, depth);
  if (arrays) merge_arrays(out, a, b, resolve, depth);
  return out;
}

bool has_dependencies(const json& schema) {
  for (auto& key : {"dependentRequired", "dependentSchemas"}) {
    if (schema.contains(key) && !(schema[key].is_object() && schema[key].empty())) return true;
  }
  return false;
}

// dependentRequired {a: [b, c]} and dependentSchemas {a: S} as allOf entries: for each trigger,
// either the member is absent or it is present and the dependency holds. Only objects are
// constrained; other values pass both branches. k triggers give up to 2^k object grammars.
json dependencies_as_all_of(const json& schema) {
  json out = schema;
  json all_of = schema.contains("allOf") ? schema["allOf"] : json::array();
  if (!all_of.is_array()) throw_invalid("allOf", "allOf must be a non-empty array");
  size_t triggers = 0;
  for (auto& key : {"dependentRequired", "dependentSchemas"}) {
    if (!schema.contains(key)) continue;
    out.erase(key);
    const json& deps = schema[key];
    if (!deps.is_object()) throw_invalid(key, fmt::format("{} must be an object", key));
    for (auto& [trigger, dependency] : deps.items()) {
      json present = json::object();
      if (std::string(key) == "dependentRequired") {
        if (!dependency.is_array()) throw_invalid(key, fmt::format("{} values must be arrays of names", key));
        for (auto& name : dependency) {
          if (!name.is_string()) throw_invalid(key, fmt::format("{} values must be arrays of names", key));
        }
        present["required"] = dependency;
        present["required"].push_back(trigger);
      } else {
        if (!dependency.is_object() && !dependency.is_boolean()) {
          throw_invalid(key, fmt::format("{} values must be schemas", key));
        }
        present["required"] = json::array({trigger});
        present["allOf"] = json::array({dependency});
      }
      json absent = {{"properties", {{trigger, false}}}};
      all_of.push_back({{"anyOf", json::array({absent, present})}});
      if (++triggers > kMaxDependencyTriggers) {
        throw_unsupported(key, fmt::format("more than {} dependency triggers", kMaxDependencyTriggers));
      }
    }
  }
  if (!all_of.empty()) out["allOf"] = all_of;
  return out;
}

}  // namespace deepinfer::structured::json_internal
