// Proofs that two oneOf branches share no value.
//
// The grammar writes one text per value for scalars and arrays (canonical numbers, minimal string
// escapes), so for them disjoint text languages mean disjoint values. Objects are different: their
// members are written in each branch's own `properties` order, so one object value can have a text
// in each branch and still no text in common. Object overlap therefore needs a value-level proof.
#include "structured/json_schema_internal.h"

namespace deepinfer::structured::json_internal {
namespace {

constexpr int kMaxDepth = 32;

bool value_holds_object(const json& v) {
  if (v.is_object()) return true;
  if (v.is_array()) {
    for (auto& x : v) {
      if (value_holds_object(x)) return true;
    }
  }
  return false;
}

bool may_hold_object(const json& schema, const RefResolver& resolve, int depth);

// Whether the arrays a schema matches may contain an object at any depth (conservative).
bool arrays_may_hold_object(const json& schema, const RefResolver& resolve, int depth) {
  if (depth > kMaxDepth) return true;
  const json& s = follow_refs(schema, resolve);
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return true;
  for (auto& key : {"anyOf", "oneOf", "allOf"}) {
    if (!s.contains(key)) continue;
    for (auto& sub : s[key]) {
      if (arrays_may_hold_object(sub, resolve, depth + 1)) return true;
    }
  }
  for (auto& key : {"const", "enum"}) {
    if (s.contains(key) && value_holds_object(s[key])) return true;
  }
  if (!possible_types(s).count("array")) return false;
  if (s.contains("prefixItems")) {
    for (auto& sub : s["prefixItems"]) {
      if (may_hold_object(sub, resolve, depth + 1)) return true;
    }
  }
  // Without `items`, elements (after any prefix) are unconstrained.
  return !s.contains("items") || may_hold_object(s["items"], resolve, depth + 1);
}

bool may_hold_object(const json& schema, const RefResolver& resolve, int depth) {
  if (depth > kMaxDepth) return true;
  const json& s = follow_refs(schema, resolve);
  return possible_types(s).count("object") || arrays_may_hold_object(s, resolve, depth + 1);
}

// Scalars only: two const/enum lists with no common value (numbers compare by value).
bool scalar_values_disjoint(const json& a, const json& b) {
  auto values = [](const json& s) -> std::optional<std::vector<json>> {
    if (!s.is_object()) return std::nullopt;
    if (s.contains("const")) return std::vector<json>{s["const"]};
    if (s.contains("enum") && s["enum"].is_array()) return std::vector<json>(s["enum"].begin(), s["enum"].end());
    return std::nullopt;
  };
  auto va = values(a), vb = values(b);
  if (!va || !vb) return false;
  for (auto& x : *va) {
    if (x.is_structured()) return false;
    for (auto& y : *vb) {
      if (y.is_structured() || x == y) return false;
    }
  }
  return true;
}

bool lists_required(const json& s, const std::string& name) {
  if (!s.contains("required") || !s["required"].is_array()) return false;
  for (auto& r : s["required"]) {
    if (r.is_string() && r.get<std::string>() == name) return true;
  }
  return false;
}

// The schema of member `name`, or nullptr when only additional/pattern members could hold it.
const json* member_schema(const json& s, const std::string& name) {
  if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name)) {
    return &s["properties"][name];
  }
  return nullptr;
}

bool forbids_member(const json& s, const std::string& name) {
  if (const json* m = member_schema(s, name)) return m->is_boolean() && !m->get<bool>();
  bool patterns = s.contains("patternProperties") && !s["patternProperties"].empty();
  return !patterns && s.contains("additionalProperties") && s["additionalProperties"] == false;
}

// One branch requires a member the other forbids, or both require it with values that cannot be equal.
bool required_member_separates(const json& a, const json& b, const RefResolver& resolve) {
  if (!a.contains("required") || !a["required"].is_array()) return false;
  for (auto& r : a["required"]) {
    if (!r.is_string()) continue;
    const std::string name = r.get<std::string>();
    if (forbids_member(b, name)) return true;
    if (!lists_required(b, name)) continue;
    const json* ma = member_schema(a, name);
    const json* mb = member_schema(b, name);
    if (!ma || !mb) continue;
    const json& va = follow_refs(*ma, resolve);
    const json& vb = follow_refs(*mb, resolve);
    auto ta = possible_types(va), tb = possible_types(vb);
    bool types_meet = false;
    for (auto& t : ta) types_meet = types_meet || tb.count(t);
    if (!types_meet || scalar_values_disjoint(va, vb)) return true;
  }
  return false;
}

}  // namespace

const json& follow_refs(const json& schema, const RefResolver& resolve) {
  const json* s = &schema;
  for (int hops = 0; hops < kMaxDepth && s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string(); ++hops) {
    json siblings = *s;
    siblings.erase("$ref");
    if (has_validation_keywords(siblings)) break;  // a merged schema, not a plain reference
    s = &resolve((*s)["$ref"].get<std::string>());
  }
  return *s;
}

BranchOverlap branch_overlap(const json& a_schema, const json& b_schema, const RefResolver& resolve) {
  const json& a = follow_refs(a_schema, resolve);
  const json& b = follow_refs(b_schema, resolve);
  auto ta = possible_types(a), tb = possible_types(b);
  std::set<std::string> shared;
  for (auto& t : ta) {
    if (tb.count(t)) shared.insert(t);
  }
  if (shared.empty()) return BranchOverlap::kDisjoint;
  if (shared.count("object")) {
    // Only a value-level proof; mixed type sets are not analysed further.
    if (shared.size() == 1 && a.is_object() && b.is_object() &&
        (required_member_separates(a, b, resolve) || required_member_separates(b, a, resolve))) {
      return BranchOverlap::kDisjoint;
    }
    return BranchOverlap::kUnknown;
  }
  if (shared.count("array") && (arrays_may_hold_object(a, resolve, 0) || arrays_may_hold_object(b, resolve, 0))) {
    return BranchOverlap::kUnknown;
  }
  return BranchOverlap::kCompareTexts;
}

}  // namespace deepinfer::structured::json_internal
