#include "structured/json_schema.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "structured/compiled_grammar.h"
#include "structured/fsm.h"
#include "structured/json_schema_internal.h"
#include "structured/regex.h"
#include "structured/unicode.h"

namespace deepinfer::structured {

std::string JsonSchemaOptions::cache_key() const {
  return fmt::format("{}:{}:{}", whitespace == Whitespace::kCompact ? "compact" : "flexible", max_whitespace,
                     assert_formats ? "formats" : "no-formats");
}

namespace {

using json_internal::json;
using json_internal::JsonSyntax;
using json_internal::has_validation_keywords;
using json_internal::is_trivially_true;
using json_internal::possible_types;
using json_internal::unescape_pointer_token;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxOneOfDfaStates = 5000;
// Objects with more declared members than this share member tails as rules (see object_expr).
constexpr size_t kInlineMemberLimit = 8;

const std::set<std::string> kTypeNames = {"null", "boolean", "object", "array", "number", "string", "integer"};

bool contains_ref(const Expr& e) {
  if (e.kind == Expr::Kind::kRef) return true;
  for (auto& c : e.children) {
    if (contains_ref(*c)) return true;
  }
  return false;
}

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options), syntax_(json_internal::make_syntax(options)) {
    index_ids(root_, 0);
  }

  Grammar build() {
    int root_rule = grammar_.add_rule("root");
    grammar_.set_root(root_rule);
    grammar_.set_body(root_rule, convert(root_, 0));
    return std::move(grammar_);
  }

  Grammar build_any(bool object_only) {
    int root_rule = grammar_.add_rule("root");
    grammar_.set_root(root_rule);
    grammar_.set_body(root_rule, object_only ? any_object() : any_value());
    return std::move(grammar_);
  }

 private:
  // Remembers subschemas with $id / $anchor so references can find them.
  void index_ids(const json& s, int depth) {
    if (depth > 200) return;
    if (s.is_object()) {
      if (s.contains("$id") && s["$id"].is_string()) ids_[s["$id"].get<std::string>()] = &s;
      if (s.contains("$anchor") && s["$anchor"].is_string()) {
        std::string name = "#" + s["$anchor"].get<std::string>();
        if (anchors_.count(name)) ambiguous_anchors_.insert(name);
        anchors_[name] = &s;
      }
      for (auto& [k, v] : s.items()) {
        if (k != "enum" && k != "const" && k != "default" && k != "examples") index_ids(v, depth + 1);
      }
    } else if (s.is_array()) {
      for (auto& v : s) index_ids(v, depth + 1);
    }
  }

  const json& resolve(const std::string& ref) {
    if (ambiguous_anchors_.count(ref)) {
      throw_unsupported("$anchor", fmt::format("anchor '{}' is defined in several resource scopes", ref));
    }
    auto anchor = anchors_.find(ref);
    if (anchor != anchors_.end()) return *anchor->second;
    std::string base, fragment;
    size_t hash = ref.find('#');
    base = ref.substr(0, hash);
    fragment = hash == std::string::npos ? "" : ref.substr(hash + 1);
    const json* doc = &root_;
    if (!base.empty()) {
      auto it = ids_.find(base);
      if (it == ids_.end()) throw_unsupported("$ref", fmt::format("reference '{}' is not a local reference", ref));
      doc = it->second;
    }
    if (fragment.empty()) return *doc;
    if (fragment[0] != '/') throw_unsupported("$ref", fmt::format("reference '{}' not found", ref));
    const json* cur = doc;
    size_t pos = 1;
    while (pos <= fragment.size()) {
      size_t next = fragment.find('/', pos);
      if (next == std::string::npos) next = fragment.size();
      std::string token = unescape_pointer_token(fragment.substr(pos, next - pos));
      if (cur->is_object() && cur->contains(token)) {
        cur = &(*cur)[token];
      } else if (cur->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(token) < cur->size()) {
        cur = &(*cur)[std::stoul(token)];
      } else {
        throw_invalid("$ref", fmt::format("reference '{}' does not resolve", ref));
      }
      pos = next + 1;
    }
    return *cur;
  }

  json_internal::RefResolver resolver() {
    return [this](const std::string& ref) -> const json& { return resolve(ref); };
  }

  ExprPtr any_value() {
    if (any_value_rule_ < 0) {
      any_value_rule_ = grammar_.add_rule("json_value");
      ExprPtr value = make_ref(any_value_rule_);
      ExprPtr member = make_seq({any_string(), syntax_.colon, value});
      ExprPtr object = make_seq({syntax_.open_object, make_optional(make_seq({member, make_star(make_seq({syntax_.comma, member}))})),
                                 syntax_.close_object});
      ExprPtr array = make_seq({syntax_.open_array, make_optional(make_seq({value, make_star(make_seq({syntax_.comma, value}))})),
                                syntax_.close_array});
      grammar_.set_body(any_value_rule_, make_alt({object, array, any_string(), json_internal::any_number_expr(),
                                                   make_literal("true"), make_literal("false"), make_literal("null")}));
    }
    return make_ref(any_value_rule_);
  }

  ExprPtr any_object() {
    ExprPtr member = make_seq({any_string(), syntax_.colon, any_value()});
    return make_seq({syntax_.open_object, make_optional(make_seq({member, make_star(make_seq({syntax_.comma, member}))})),
                     syntax_.close_object});
  }

  static ExprPtr any_string_content() { return make_star(json_string_char_expr(CodepointSet::all())); }
  ExprPtr any_string() { return make_seq({make_byte('"'), any_string_content(), make_byte('"')}); }

  ExprPtr ref_expr(const std::string& ref) {
    auto it = ref_rules_.find(ref);
    if (it != ref_rules_.end()) return make_ref(it->second);
    int rule = grammar_.add_rule(ref);
    ref_rules_[ref] = rule;
    grammar_.set_body(rule, convert(resolve(ref), 0));
    return make_ref(rule);
  }

  ExprPtr convert(const json& schema, int depth) {
    if (depth > kMaxDepth) throw_unsupported("$ref", "schema nests too deeply");
    if (schema.is_boolean()) return schema.get<bool>() ? any_value() : make_nothing();
    if (!schema.is_object()) throw_invalid("schema", "a schema must be an object or a boolean");
    if (schema.contains("$schema") && depth == 0 && schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" &&
        schema["$schema"] != "https://json-schema.org/draft/2020-12/schema#") {
      throw_unsupported("$schema", "only the draft 2020-12 meta-schema is supported");
    }
    if (schema.contains("dependencies")) throw_unsupported("dependencies", "the pre-2019 'dependencies' keyword is not supported");
    if (schema.contains("if")) {
      for (auto& key : {"unevaluatedProperties", "unevaluatedItems"}) {
        if (schema.contains(key) && !is_trivially_true(schema[key])) throw_unsupported(key, fmt::format("{} with 'if'", key));
      }
    }
    if (schema.contains("$dynamicRef")) throw_unsupported("$dynamicRef", "dynamic references are not supported");
    if (schema.contains("$recursiveRef")) throw_unsupported("$recursiveRef", "recursive references are not supported");
    if (json_internal::has_dependencies(schema)) return convert(json_internal::dependencies_as_all_of(schema), depth + 1);
    if (schema.contains("allOf")) {
      const json& subs = schema["allOf"];
      if (!subs.is_array() || subs.empty()) throw_invalid("allOf", "allOf must be a non-empty array");
      json merged = schema;
      merged.erase("allOf");
      for (auto& sub : subs) {
        json_internal::check_no_unevaluated(sub, resolver());
        merged = json_internal::merge_schemas(merged, sub, resolver());
      }
      return convert(merged, depth + 1);
    }
    if (schema.contains("$ref")) {
      if (!schema["$ref"].is_string()) throw_invalid("$ref", "$ref must be a string");
      std::string ref = schema["$ref"].get<std::string>();
      json siblings = schema;
      siblings.erase("$ref");
      if (!has_validation_keywords(siblings)) return ref_expr(ref);
      json_internal::check_no_unevaluated(resolve(ref), resolver());
      json merged = json_internal::merge_schemas(siblings, resolve(ref), resolver());
      return convert(merged, depth + 1);
    }
    if (schema.contains("anyOf") || schema.contains("oneOf")) return convert_alternatives(schema, depth);
    return convert_typed(schema, depth);
  }

  ExprPtr convert_alternatives(const json& schema, int depth) {
    for (auto& key : {"unevaluatedProperties", "unevaluatedItems"}) {
      if (schema.contains(key) && !is_trivially_true(schema[key])) {
        throw_unsupported(key, fmt::format("{} together with anyOf/oneOf", key));
      }
    }
    json base = schema;
    base.erase("anyOf");
    base.erase("oneOf");
    std::vector<json> branches{base};
    for (auto& key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const json& subs = schema[key];
      if (!subs.is_array() || subs.empty()) throw_invalid(key, fmt::format("{} must be a non-empty array", key));
      std::vector<json> next;
      for (auto& b : branches) {
        for (auto& sub : subs) next.push_back(json_internal::merge_schemas(b, sub, resolver()));
      }
      if (next.size() > 256) throw_unsupported(key, "too many alternatives");
      branches = std::move(next);
    }
    std::vector<ExprPtr> exprs;
    for (auto& b : branches) {
      try {
        exprs.push_back(convert(b, depth + 1));
      } catch (const GrammarError& e) {
        if (e.kind() != GrammarErrorKind::kUnsatisfiable) throw;
        exprs.push_back(make_nothing());
      }
    }
    if (schema.contains("oneOf")) check_exclusive(branches, exprs);
    return make_alt(std::move(exprs));
  }

  // oneOf equals anyOf only when no value matches two branches. Proven by disjoint type sets, a
  // required member that separates object branches, or, where every value has one text, by an
  // empty automaton intersection; otherwise unsupported.
  void check_exclusive(const std::vector<json>& branches, const std::vector<ExprPtr>& exprs) {
    std::vector<std::optional<Fsm>> dfas(exprs.size());
    auto dfa = [&](size_t i) -> const Fsm* {
      if (!dfas[i]) {
        if (contains_ref(*exprs[i])) return nullptr;
        try {
          dfas[i] = compile_dfa(*exprs[i], kMaxOneOfDfaStates);
        } catch (const GrammarError&) {
          return nullptr;
        }
      }
      return &*dfas[i];
    };
    for (size_t i = 0; i < exprs.size(); ++i) {
      if (exprs[i]->kind == Expr::Kind::kNothing) continue;
      for (size_t j = i + 1; j < exprs.size(); ++j) {
        if (exprs[j]->kind == Expr::Kind::kNothing) continue;
        auto overlap = json_internal::branch_overlap(branches[i], branches[j], resolver());
        if (overlap == json_internal::BranchOverlap::kDisjoint) continue;
        const Fsm* a = overlap == json_internal::BranchOverlap::kCompareTexts ? dfa(i) : nullptr;
        const Fsm* b = a ? dfa(j) : nullptr;
        if (!a || !b) throw_unsupported("oneOf", "cannot prove that the oneOf branches are mutually exclusive");
        if (!language_is_empty(intersect(*a, *b))) {
          throw_unsupported("oneOf", "oneOf branches overlap (a value matching two of them must be rejected)");
        }
      }
    }
  }

  ExprPtr convert_typed(const json& schema, int depth) {
    std::set<std::string> types;
    if (schema.contains("type")) {
      const json& t = schema["type"];
      if (t.is_string()) {
        types.insert(t.get<std::string>());
      } else if (t.is_array()) {
        for (auto& x : t) {
          if (!x.is_string()) throw_invalid("type", "type entries must be strings");
          types.insert(x.get<std::string>());
        }
      } else {
        throw_invalid("type", "type must be a string or an array");
      }
      for (auto& name : types) {
        if (!kTypeNames.count(name)) throw_invalid("type", fmt::format("unknown type '{}'", name));
      }
    } else {
      types = {"null", "boolean", "object", "array", "number", "string"};
    }
    if (schema.contains("not")) {
      const json& n = schema["not"];
      if (is_trivially_true(n)) return make_nothing();
      if (!(n.is_boolean() && !n.get<bool>())) throw_unsupported("not", "'not' is not supported");
    }
    if (schema.contains("if") && (schema.contains("then") || schema.contains("else"))) {
      throw_unsupported("if", "if/then/else is not supported");
    }
    if (schema.contains("const") || schema.contains("enum")) return convert_enum(schema, types);
    std::vector<ExprPtr> options;
    if (types.count("null")) options.push_back(make_literal("null"));
    if (types.count("boolean")) options.push_back(make_alt({make_literal("true"), make_literal("false")}));
    if (types.count("number")) {
      options.push_back(number_expr(schema, false));
    } else if (types.count("integer")) {
      options.push_back(number_expr(schema, true));
    }
    if (types.count("string")) options.push_back(string_expr(schema));
    if (types.count("array")) options.push_back(array_expr(schema, depth));
    if (types.count("object")) options.push_back(object_expr(schema, depth));
    return make_alt(std::move(options));
  }

  static bool value_has_type(const json& v, const std::set<std::string>& types) {
    if (v.is_null()) return types.count("null");
    if (v.is_boolean()) return types.count("boolean");
    if (v.is_object()) return types.count("object");
    if (v.is_array()) return types.count("array");
    if (v.is_string()) return types.count("string");
    if (types.count("number")) return true;
    if (!types.count("integer")) return false;
    if (v.is_number_integer()) return true;
    double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }

  // The schema compiled on its own with compact whitespace, to test literal values against it
  // (written by literal_text); nullptr when nothing can match.
  std::shared_ptr<const CompiledGrammar> compact_checker(const json& schema) {
    JsonSchemaOptions compact;
    compact.whitespace = JsonSchemaOptions::Whitespace::kCompact;
    try {
      SchemaConverter inner(root_, compact);
      return CompiledGrammar::compile(inner.build_for(schema));
    } catch (const GrammarError& e) {
      if (e.kind() != GrammarErrorKind::kUnsatisfiable) throw;
      return nullptr;
    }
  }

  ExprPtr convert_enum(const json& schema, const std::set<std::string>& types) {
    std::vector<json> candidates;
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array()) throw_invalid("enum", "enum must be an array");
      for (auto& v : schema["enum"]) candidates.push_back(v);
    }
    if (schema.contains("const")) {
      const json& c = schema["const"];
      if (schema.contains("enum")) {
        bool found = std::find(candidates.begin(), candidates.end(), c) != candidates.end();
        candidates.clear();
        if (found) candidates.push_back(c);
      } else {
        candidates = {c};
      }
    }
    // Other keywords still apply: keep the candidates the rest of the schema accepts.
    json rest = schema;
    rest.erase("enum");
    rest.erase("const");
    rest.erase("type");
    std::shared_ptr<const CompiledGrammar> checker;
    if (has_validation_keywords(rest)) {
      json sub = schema;
      sub.erase("enum");
      sub.erase("const");
      checker = compact_checker(sub);
      if (!checker) return make_nothing();
    }
    std::vector<ExprPtr> options;
    for (auto& v : candidates) {
      if (!value_has_type(v, types)) continue;
      if (checker) {
        std::string text = literal_text(v);
        if (!checker->accepts(text)) continue;
      }
      options.push_back(json_internal::literal_value_expr(v, syntax_));
    }
    return make_alt(std::move(options));
  }

  static std::string literal_text(const json& v) {
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e18) return std::to_string(static_cast<int64_t>(d));
    }
    if (v.is_object()) {
      std::string out = "{";
      bool first = true;
      for (auto& [k, m] : v.items()) {
        if (!first) out += ",";
        first = false;
        out += json(k).dump() + ":" + literal_text(m);
      }
      return out + "}";
    }
    if (v.is_array()) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + literal_text(v[i]);
      return out + "]";
    }
    return v.dump();
  }

 public:
  Grammar build_for(const json& schema) {
    int root_rule = grammar_.add_rule("root");
    grammar_.set_root(root_rule);
    grammar_.set_body(root_rule, convert(schema, 0));
    return std::move(grammar_);
  }

 private:
  static std::optional<double> number_keyword(const json& schema, const char* key) {
    if (!schema.contains(key)) return std::nullopt;
    if (!schema[key].is_number()) throw_invalid(key, fmt::format("{} must be a number", key));
    double v = schema[key].get<double>();
    if (!std::isfinite(v) || std::fabs(v) > 1e15) throw_unsupported(key, fmt::format("{} is out of range", key));
    return v;
  }

  static uint32_t count_keyword(const json& schema, const char* key, uint32_t fallback) {
    if (!schema.contains(key)) return fallback;
    const json& v = schema[key];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>())) {
      throw_invalid(key, fmt::format("{} must be a non-negative integer", key));
    }
    double d = v.get<double>();
    return d > 1e9 ? 1000000000u : static_cast<uint32_t>(d);
  }

  // Numbers within the bounds, then restricted to multiples of `multipleOf` by intersection.
  ExprPtr number_expr(const json& schema, bool integer) {
    ExprPtr bounded = number_range_expr(schema, integer);
    if (!schema.contains("multipleOf")) return bounded;
    auto step = json_internal::parse_decimal_step(schema["multipleOf"]);
    Fsm multiples = minimize(intersect(compile_dfa(*bounded), json_internal::multiple_of_filter(step)));
    if (language_is_empty(multiples)) return make_nothing();
    return make_automaton(std::make_shared<const Fsm>(std::move(multiples)));
  }

  ExprPtr number_range_expr(const json& schema, bool integer) {
    auto minimum = number_keyword(schema, "minimum");
    auto maximum = number_keyword(schema, "maximum");
    auto ex_min = number_keyword(schema, "exclusiveMinimum");
    auto ex_max = number_keyword(schema, "exclusiveMaximum");
    if (integer) {
      std::optional<int64_t> lo, hi;
      if (minimum) lo = static_cast<int64_t>(std::ceil(*minimum));
      if (ex_min) {
        auto v = static_cast<int64_t>(std::floor(*ex_min)) + 1;
        lo = lo ? std::max(*lo, v) : v;
      }
      if (maximum) hi = static_cast<int64_t>(std::floor(*maximum));
      if (ex_max) {
        auto v = static_cast<int64_t>(std::ceil(*ex_max)) - 1;
        hi = hi ? std::min(*hi, v) : v;
      }
      if (lo && hi && *lo > *hi) return make_nothing();
      if (!lo && !hi) return json_internal::any_integer_expr();
      return json_internal::integer_range_expr(lo, hi);
    }
    if (!minimum && !maximum && !ex_min && !ex_max) return json_internal::any_number_expr();
    auto to_bound = [](double v, bool exclusive, const char* key) {
      if (v != std::floor(v)) throw_unsupported(key, fmt::format("non-integer {} for numbers", key));
      return json_internal::Bound{static_cast<int64_t>(v), exclusive};
    };
    std::optional<json_internal::Bound> lo, hi;
    if (minimum) lo = to_bound(*minimum, false, "minimum");
    if (ex_min) {
      auto b = to_bound(*ex_min, true, "exclusiveMinimum");
      if (!lo || b.value >= lo->value) lo = b;
    }
    if (maximum) hi = to_bound(*maximum, false, "maximum");
    if (ex_max) {
      auto b = to_bound(*ex_max, true, "exclusiveMaximum");
      if (!hi || b.value <= hi->value) hi = b;
    }
    if (lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)))) {
      return make_nothing();
    }
    return json_internal::bounded_number_expr(lo, hi);
  }

  ExprPtr string_expr(const json& schema) {
    uint32_t min_length = count_keyword(schema, "minLength", 0);
    uint32_t max_length = count_keyword(schema, "maxLength", kUnbounded);
    if (max_length != kUnbounded && max_length < min_length) return make_nothing();
    std::vector<ExprPtr> constraints;
    if (schema.contains("pattern")) {
      const json& p = schema["pattern"];
      std::vector<std::string> patterns;
      if (p.is_string()) patterns.push_back(p.get<std::string>());
      else if (p.is_array()) for (auto& x : p) patterns.push_back(x.get<std::string>());
      else throw_invalid("pattern", "pattern must be a string");
      for (auto& pattern : patterns) {
        RegexOptions options;
        options.anchoring = RegexOptions::Anchoring::kSearch;
        options.encoder = json_string_encoder();
        options.keyword = "pattern";
        constraints.push_back(parse_regex(pattern, options));
      }
    }
    if (schema.contains("format") && options_.assert_formats) {
      if (!schema["format"].is_string()) throw_invalid("format", "format must be a string");
      constraints.push_back(json_internal::format_content_expr(schema["format"].get<std::string>()));
    }
    ExprPtr chars = json_string_char_expr(CodepointSet::all());
    ExprPtr content = make_repeat(chars, min_length, max_length);
    if (!constraints.empty()) {
      Fsm dfa = compile_dfa(*constraints[0]);
      for (size_t i = 1; i < constraints.size(); ++i) dfa = minimize(intersect(dfa, compile_dfa(*constraints[i])));
      if (min_length > 0 || max_length != kUnbounded) dfa = minimize(intersect(dfa, compile_dfa(*content)));
      content = make_automaton(std::make_shared<const Fsm>(std::move(dfa)));
    }
    return make_seq({make_byte('"'), content, make_byte('"')});
  }

  ExprPtr array_expr(const json& schema, int depth) {
    if (schema.contains("contains")) return contains_array_expr(schema, depth);
    uint32_t min_items = count_keyword(schema, "minItems", 0);
    uint32_t max_items = count_keyword(schema, "maxItems", kUnbounded);
    if (schema.contains("uniqueItems") && schema["uniqueItems"].is_boolean() && schema["uniqueItems"].get<bool>() &&
        max_items > 1) {
      return unique_array_expr(schema, min_items, max_items);
    }
    std::vector<json> prefix;
    if (schema.contains("prefixItems")) {
      if (!schema["prefixItems"].is_array()) throw_invalid("prefixItems", "prefixItems must be an array");
      for (auto& p : schema["prefixItems"]) prefix.push_back(p);
    }
    json items = schema.contains("items") ? schema["items"] : json(true);
    if (schema.contains("unevaluatedItems") && !is_trivially_true(schema["unevaluatedItems"])) {
      if (schema.contains("items")) {
        // every item is evaluated by `items`: unevaluatedItems never applies
      } else {
        items = schema["unevaluatedItems"];
      }
    }
    if (items.is_boolean() && !items.get<bool>()) max_items = std::min<uint32_t>(max_items, prefix.size());
    if (max_items != kUnbounded && max_items < min_items) return make_nothing();
    if (max_items != kUnbounded && max_items > 10000) throw_unsupported("maxItems", "maxItems above 10000");
    if (min_items > 10000) throw_unsupported("minItems", "minItems above 10000");
    // Element i: prefix[i] or items; the first min_items are required.
    size_t fixed = std::min<size_t>(prefix.size(), max_items);
    ExprPtr tail;
    {
      uint32_t tail_min = min_items > fixed ? min_items - static_cast<uint32_t>(fixed) : 0;
      uint32_t tail_max = max_items == kUnbounded ? kUnbounded : max_items - static_cast<uint32_t>(fixed);
      ExprPtr item = tail_max == 0 ? make_empty() : convert(items, depth + 1);
      if (tail_max == 0) {
        tail = make_empty();
      } else if (fixed > 0) {
        tail = make_repeat(make_seq({syntax_.comma, item}), tail_min, tail_max);
      } else {
        ExprPtr more = make_repeat(make_seq({syntax_.comma, item}), tail_min > 0 ? tail_min - 1 : 0,
                                   tail_max == kUnbounded ? kUnbounded : tail_max - 1);
        tail = make_seq({item, more});
        if (tail_min == 0) tail = make_optional(tail);
      }
    }
    ExprPtr body = tail;
    for (size_t i = fixed; i-- > 0;) {
      ExprPtr element = convert(prefix[i], depth + 1);
      ExprPtr part = make_seq({i > 0 ? syntax_.comma : make_empty(), element, body});
      body = i >= min_items ? make_optional(part) : part;
    }
    return make_seq({syntax_.open_array, body, syntax_.close_array});
  }

  // uniqueItems, exact when every item is one of a few literal values: an enum, a const, or
  // booleans/null. Other item schemas are unsupported (uniqueness is not regular in general).
  ExprPtr unique_array_expr(const json& schema, uint32_t min_items, uint32_t max_items) {
    if (schema.contains("prefixItems") ||
        (schema.contains("unevaluatedItems") && !is_trivially_true(schema["unevaluatedItems"]))) {
      throw_unsupported("uniqueItems", "uniqueItems together with prefixItems or unevaluatedItems");
    }
    json items = schema.contains("items") ? schema["items"] : json(true);
    const json& target = json_internal::follow_refs(items, resolver());
    // Candidates: the enum or const where there is one (possible_types reads those first), else
    // null and booleans; `items` itself decides below which of them it accepts.
    std::vector<json> candidates;
    if (target.is_object() && target.contains("enum") && target["enum"].is_array()) {
      for (auto& v : target["enum"]) candidates.push_back(v);
    } else if (target.is_object() && target.contains("const")) {
      candidates.push_back(target["const"]);
    } else {
      for (auto& type : json_internal::possible_types(target)) {
        if (type != "null" && type != "boolean") {
          throw_unsupported("uniqueItems", "uniqueItems needs items drawn from an enum, a const, booleans or null");
        }
      }
      candidates = {json(nullptr), json(true), json(false)};
    }
    // Keep each value `items` accepts once (JSON equality: 1 == 1.0, member order ignored).
    auto checker = compact_checker(items);
    if (!checker) candidates.clear();
    std::vector<nlohmann::json> kept;
    std::vector<ExprPtr> values;
    for (auto& v : candidates) {
      nlohmann::json plain = nlohmann::json::parse(v.dump());
      if (!checker->accepts(literal_text(v)) || std::find(kept.begin(), kept.end(), plain) != kept.end()) continue;
      kept.push_back(plain);
      values.push_back(json_internal::literal_value_expr(v, syntax_));
    }
    return json_internal::unique_items_array_expr(grammar_, values, min_items, max_items, syntax_);
  }

  // `contains` with minContains = k and no upper limits: item* hit item* ... (k hits), where a
  // hit satisfies both `items` and `contains`. Other combinations are unsupported.
  ExprPtr contains_array_expr(const json& schema, int depth) {
    uint32_t k = count_keyword(schema, "minContains", 1);
    if (schema.contains("maxContains")) throw_unsupported("maxContains", "maxContains is not supported");
    if (schema.contains("unevaluatedItems") && !is_trivially_true(schema["unevaluatedItems"])) {
      throw_unsupported("unevaluatedItems", "unevaluatedItems together with contains");
    }
    if (k == 0) {
      json rest = schema;
      rest.erase("contains");
      rest.erase("minContains");
      return array_expr(rest, depth);
    }
    if (schema.contains("prefixItems") || schema.contains("maxItems") || count_keyword(schema, "minItems", 0) > k ||
        (schema.contains("unevaluatedItems") && !is_trivially_true(schema["unevaluatedItems"])) ||
        (schema.contains("uniqueItems") && schema["uniqueItems"] == true)) {
      throw_unsupported("contains", "contains together with prefixItems / maxItems / minItems / unevaluatedItems");
    }
    if (k > 100) throw_unsupported("minContains", "minContains above 100");
    json items = schema.contains("items") ? schema["items"] : json(true);
    ExprPtr item = convert(items, depth + 1);
    ExprPtr hit = convert(json_internal::merge_schemas(items, schema["contains"], resolver()), depth + 1);
    ExprPtr between = make_seq({syntax_.comma, make_star(make_seq({item, syntax_.comma}))});
    std::vector<ExprPtr> parts{syntax_.open_array, make_star(make_seq({item, syntax_.comma})), hit};
    for (uint32_t i = 1; i < k; ++i) {
      parts.push_back(between);
      parts.push_back(hit);
    }
    parts.push_back(make_star(make_seq({syntax_.comma, item})));
    parts.push_back(syntax_.close_array);
    return make_seq(std::move(parts));
  }

  // The quoted member names a propertyNames schema admits (names are strings, so only its string
  // part matters); schemas that are not regular over strings are unsupported.
  Fsm property_name_filter(const json& names) {
    if (names.is_boolean()) return compile_dfa(*make_nothing());
    if (!names.is_object()) throw_invalid("propertyNames", "propertyNames must be a schema");
    json as_string = names;
    if (names.contains("type")) {
      const json& t = names["type"];
      bool allows_string = t == "string" || (t.is_array() && std::find(t.begin(), t.end(), json("string")) != t.end());
      if (!allows_string) return compile_dfa(*make_nothing());
    }
    as_string["type"] = "string";
    ExprPtr keys = convert(as_string, kMaxDepth - 2);
    if (contains_ref(*keys)) throw_unsupported("propertyNames", "propertyNames with references");
    return compile_dfa(*keys);
  }

  Fsm key_dfa(const ExprPtr& content) {
    return compile_dfa(*make_seq({make_byte('"'), content, make_byte('"')}));
  }

  ExprPtr object_expr(const json& schema, int depth);

  const json& root_;
  JsonSchemaOptions options_;
  JsonSyntax syntax_;
  Grammar grammar_;
  std::map<std::string, int> ref_rules_;
  std::map<std::string, const json*> ids_, anchors_;
  std::set<std::string> ambiguous_anchors_;
  int any_value_rule_ = -1;
};

ExprPtr SchemaConverter::object_expr(const json& schema, int depth) {
  // propertyNames: member names (quoted, as written) must be in this automaton.
  std::optional<Fsm> name_filter;
  if (schema.contains("propertyNames") && !is_trivially_true(schema["propertyNames"])) {
    name_filter = property_name_filter(schema["propertyNames"]);
  }
  // Declared members in order, then required names that are not declared.
  std::vector<std::pair<std::string, json>> members;
  if (schema.contains("properties")) {
    if (!schema["properties"].is_object()) throw_invalid("properties", "properties must be an object");
    for (auto& [k, v] : schema["properties"].items()) members.emplace_back(k, v);
  }
  std::set<std::string> required;
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) throw_invalid("required", "required must be an array");
    for (auto& r : schema["required"]) {
      if (!r.is_string()) throw_invalid("required", "required entries must be strings");
      required.insert(r.get<std::string>());
    }
  }
  json additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : json(true);
  if (!schema.contains("additionalProperties") && schema.contains("unevaluatedProperties")) {
    additional = schema["unevaluatedProperties"];
  }
  struct PatternMember {
    std::string pattern;
    json schema;
    Fsm keys;
  };
  std::vector<PatternMember> patterns;
  if (schema.contains("patternProperties")) {
    if (!schema["patternProperties"].is_object()) throw_invalid("patternProperties", "patternProperties must be an object");
    for (auto& [p, sub] : schema["patternProperties"].items()) {
      RegexOptions options;
      options.anchoring = RegexOptions::Anchoring::kSearch;
      options.encoder = json_string_encoder();
      options.keyword = "patternProperties";
      patterns.push_back({p, sub, key_dfa(parse_regex(p, options))});
    }
  }
  for (auto& name : required) {
    bool declared = false;
    for (auto& m : members) declared = declared || m.first == name;
    if (!declared) members.emplace_back(name, json(true));
  }
  // A member's value obeys its declaration and every pattern its name matches, or else
  // additionalProperties.
  std::string declared_names_regex;
  std::vector<ExprPtr> declared_keys;
  for (auto& [name, sub] : members) {
    std::string quoted = json(name).dump();
    bool declared_in_properties = schema.contains("properties") && schema["properties"].contains(name);
    json effective = declared_in_properties ? sub : json(true);
    bool matched = false;
    for (auto& p : patterns) {
      if (p.keys.accepts(quoted)) {
        effective = json_internal::merge_schemas(effective, p.schema, resolver());
        matched = true;
      }
    }
    if (!declared_in_properties && !matched) effective = additional;
    if (name_filter && !name_filter->accepts(quoted)) effective = false;  // the name itself is invalid
    sub = effective;
    declared_keys.push_back(make_literal(quoted));
  }
  uint32_t min_properties = count_keyword(schema, "minProperties", 0);
  uint32_t max_properties = count_keyword(schema, "maxProperties", kUnbounded);
  // Extra members (not declared): one alternative per pattern, plus additionalProperties.
  std::vector<ExprPtr> extras;
  Fsm any_key = key_dfa(any_string_content());
  if (name_filter) any_key = minimize(intersect(any_key, *name_filter));
  Fsm not_declared = declared_keys.empty() ? any_key : intersect(any_key, complement(compile_dfa(*make_alt(declared_keys))));
  Fsm unmatched = not_declared;
  for (size_t i = 0; i < patterns.size(); ++i) {
    for (size_t j = i + 1; j < patterns.size(); ++j) {
      if (patterns[i].schema != patterns[j].schema &&
          !language_is_empty(intersect(patterns[i].keys, patterns[j].keys))) {
        throw_unsupported("patternProperties", "overlapping patternProperties with different schemas");
      }
    }
    Fsm keys = minimize(intersect(patterns[i].keys, not_declared));
    unmatched = minimize(intersect(unmatched, complement(patterns[i].keys)));
    if (language_is_empty(keys)) continue;
    ExprPtr value = convert(patterns[i].schema, depth + 1);
    extras.push_back(make_seq({make_automaton(std::make_shared<const Fsm>(std::move(keys))), syntax_.colon, value}));
  }
  if (!(additional.is_boolean() && !additional.get<bool>()) && !language_is_empty(unmatched)) {
    ExprPtr value = convert(additional, depth + 1);
    extras.push_back(make_seq({make_automaton(std::make_shared<const Fsm>(minimize(unmatched))), syntax_.colon, value}));
  }
  ExprPtr extra = make_alt(extras);
  bool has_extras = extra->kind != Expr::Kind::kNothing;
  // Count limits are only supported when they cannot bind.
  size_t required_count = 0;
  for (auto& m : members) required_count += required.count(m.first);
  if (min_properties > required_count) throw_unsupported("minProperties", "minProperties is not supported");
  if (max_properties != kUnbounded) {
    if (max_properties == 0 && required_count == 0) return make_seq({syntax_.open_object, syntax_.close_object});
    if (has_extras || members.size() > max_properties) throw_unsupported("maxProperties", "maxProperties is not supported");
  }
  // tail(i, comma): members i.. in order, then extras; `comma` says whether one is needed first.
  // With many members the two tails of each position become shared rules (calls), keeping the
  // automaton linear in the number of members instead of quadratic.
  const bool shared_tails = members.size() > kInlineMemberLimit;
  auto share = [&](ExprPtr body) {
    if (!shared_tails) return body;
    int rule = grammar_.add_rule("members", std::move(body));
    grammar_.set_inlinable(rule, false);
    return make_ref(rule);
  };
  std::vector<ExprPtr> with_comma(members.size() + 1), without_comma(members.size() + 1);
  with_comma[members.size()] = share(has_extras ? make_star(make_seq({syntax_.comma, extra})) : make_empty());
  without_comma[members.size()] =
      share(has_extras ? make_optional(make_seq({extra, make_star(make_seq({syntax_.comma, extra}))})) : make_empty());
  for (size_t i = members.size(); i-- > 0;) {
    auto& [name, sub] = members[i];
    bool is_required = required.count(name) > 0;
    if (sub.is_boolean() && !sub.get<bool>()) {
      if (is_required) return make_nothing();
      with_comma[i] = with_comma[i + 1];
      without_comma[i] = without_comma[i + 1];
      continue;
    }
    ExprPtr member = make_seq({make_literal(json(name).dump()), syntax_.colon, convert(sub, depth + 1)});
    if (is_required) {
      with_comma[i] = share(make_seq({syntax_.comma, member, with_comma[i + 1]}));
      without_comma[i] = share(make_seq({member, with_comma[i + 1]}));
    } else {
      with_comma[i] = share(make_seq({make_optional(make_seq({syntax_.comma, member})), with_comma[i + 1]}));
      without_comma[i] = share(make_alt({make_seq({member, with_comma[i + 1]}), without_comma[i + 1]}));
    }
  }
  return make_seq({syntax_.open_object, without_comma[0], syntax_.close_object});
}

}  // namespace

Grammar json_schema_grammar_from_value(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return SchemaConverter(schema, options).build();
}

Grammar json_schema_grammar(std::string_view schema_json, const JsonSchemaOptions& options) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid("schema", fmt::format("not valid JSON: {}", e.what()));
  }
  return json_schema_grammar_from_value(schema, options);
}

Grammar any_json_grammar(const JsonSchemaOptions& options, bool object_only) {
  static const nlohmann::ordered_json kEmpty = nlohmann::ordered_json::object();
  return SchemaConverter(kEmpty, options).build_any(object_only);
}

}  // namespace deepinfer::structured
