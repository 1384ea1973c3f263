#include <gtest/gtest.h>

#include "structured/compiled_grammar.h"
#include "structured/json_schema.h"

namespace deepinfer::structured {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& schema, bool compact = true) {
  JsonSchemaOptions options;
  if (compact) options.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  return CompiledGrammar::compile(json_schema_grammar(schema, options));
}

TEST(JsonSchema, ObjectMembersFollowDeclarationOrderWithOptionalOnes) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                       "required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(g->accepts(R"({"b":"x"})"));
  EXPECT_TRUE(g->accepts(R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(g->accepts(R"({"b":"x","c":false})"));
  EXPECT_FALSE(g->accepts(R"({"a":1})"));
  EXPECT_FALSE(g->accepts(R"({"b":"x","d":1})"));
  EXPECT_FALSE(g->accepts(R"({"b":"x",})"));
}

TEST(JsonSchema, AdditionalPropertiesCannotReuseDeclaredNames) {
  auto g = compile(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})");
  EXPECT_TRUE(g->accepts(R"({"a":1,"b":"x","ab":"y"})"));
  EXPECT_FALSE(g->accepts(R"({"a":1,"a":"x"})"));
  EXPECT_FALSE(g->accepts(R"({"b":1})"));
}

TEST(JsonSchema, IntegerRangesAreExact) {
  auto g = compile(R"({"type":"integer","minimum":-15,"exclusiveMaximum":1234})");
  for (int v = -40; v < 1400; ++v) {
    EXPECT_EQ(g->accepts(std::to_string(v)), v >= -15 && v < 1234) << v;
  }
  EXPECT_FALSE(g->accepts("007"));
  EXPECT_FALSE(g->accepts("-0"));
}

TEST(JsonSchema, NumberBoundsWithFractions) {
  auto g = compile(R"({"type":"number","exclusiveMinimum":-2,"maximum":3})");
  EXPECT_TRUE(g->accepts("-1.99"));
  EXPECT_TRUE(g->accepts("3"));
  EXPECT_TRUE(g->accepts("3.000"));
  EXPECT_TRUE(g->accepts("0.5"));
  EXPECT_FALSE(g->accepts("3.01"));
  EXPECT_FALSE(g->accepts("-2"));
  EXPECT_FALSE(g->accepts("-2.0"));
  EXPECT_FALSE(g->accepts("-2.0001"));
  EXPECT_TRUE(g->accepts("-1.0001"));
}

// Every text with up to three fraction digits in [-30, 30], against exact integer arithmetic:
// a text N * 10^-f is accepted when it is in range and, for f <= d, N * 10^(d-f) is a multiple of
// m (a step of m * 10^-d); longer fractions (e.g. 4.50 for step 0.5) are not written.
TEST(JsonSchema, MultipleOfIsExactForIntegerAndDecimalSteps) {
  struct Step {
    const char* text;
    int64_t m;
    int d;
  };
  for (Step step : {Step{"3", 3, 0}, Step{"7", 7, 0}, Step{"0.5", 5, 1}, Step{"0.25", 25, 2}, Step{"1.5", 15, 1},
                    Step{"0.01", 1, 2}, Step{"0.3", 3, 1}, Step{"2.0", 2, 0}}) {
    for (bool integer : {false, true}) {
      for (bool bounded : {false, true}) {
        std::string schema = std::string(R"({"type":")") + (integer ? "integer" : "number") + R"(","multipleOf":)" +
                             step.text + (bounded ? R"(,"minimum":-12,"exclusiveMaximum":20})" : "}");
        SCOPED_TRACE(schema);
        auto g = compile(schema);
        for (int f = 0; f <= 3; ++f) {
          int64_t scale = f == 0 ? 1 : f == 1 ? 10 : f == 2 ? 100 : 1000;
          for (int64_t n = -30 * scale; n <= 30 * scale; ++n) {
            std::string magnitude = std::to_string(n < 0 ? -n : n);
            if (f > 0) {
              if (magnitude.size() <= static_cast<size_t>(f)) magnitude.insert(0, f + 1 - magnitude.size(), '0');
              magnitude.insert(magnitude.size() - f, ".");
            }
            std::string text = (n < 0 ? "-" : "") + magnitude;
            bool in_range = !bounded || (n >= -12 * scale && n < 20 * scale);
            bool multiple = f <= step.d;
            if (multiple) {
              int64_t scaled = n;
              for (int k = f; k < step.d; ++k) scaled *= 10;
              multiple = scaled % step.m == 0;
            }
            bool expected = in_range && multiple && (!integer || f == 0);
            ASSERT_EQ(g->accepts(text), expected) << text;
          }
        }
        EXPECT_FALSE(g->accepts("6e0"));
        EXPECT_FALSE(g->accepts("06"));
      }
    }
  }
}

TEST(JsonSchema, AllOfMultipleOfIsTheLeastCommonMultiple) {
  auto g = compile(R"({"type":"integer","allOf":[{"multipleOf":4},{"multipleOf":6}]})");
  for (int v = -50; v <= 50; ++v) EXPECT_EQ(g->accepts(std::to_string(v)), v % 12 == 0) << v;
  auto d = compile(R"({"type":"number","allOf":[{"multipleOf":0.5},{"multipleOf":0.3}]})");
  for (const char* yes : {"0", "1.5", "3", "4.5", "-1.5"}) EXPECT_TRUE(d->accepts(yes)) << yes;
  for (const char* no : {"0.5", "0.3", "1", "2", "0.15"}) EXPECT_FALSE(d->accepts(no)) << no;
}

TEST(JsonSchema, DependentRequiredNeedsTheDependentsWhenTheTriggerIsPresent) {
  for (bool compact : {true, false}) {
    auto g = compile(R"({"type":"object","properties":{"name":{"type":"string"},"card":{"type":"string"},
                         "billing":{"type":"string"}},"dependentRequired":{"card":["billing"]}})",
                     compact);
    EXPECT_TRUE(g->accepts(R"({"name":"x"})"));
    EXPECT_TRUE(g->accepts(R"({"billing":"a"})"));
    EXPECT_TRUE(g->accepts(R"({"card":"1","billing":"a"})"));
    EXPECT_TRUE(g->accepts(R"({"name":"x","card":"1","billing":"a","extra":3})"));
    EXPECT_FALSE(g->accepts(R"({"card":"1"})"));
    EXPECT_FALSE(g->accepts(R"({"name":"x","card":"1"})"));
    EXPECT_FALSE(g->accepts(R"({"card":"1","extra":"billing"})"));
  }
  // Undeclared trigger and dependent, additional members allowed.
  auto g = compile(R"({"dependentRequired":{"a":["b","c"]}})");
  EXPECT_TRUE(g->accepts(R"({"b":1})"));
  EXPECT_TRUE(g->accepts(R"({"a":1,"b":2,"c":3})"));
  EXPECT_TRUE(g->accepts(R"([1,2])"));  // only objects are constrained
  EXPECT_FALSE(g->accepts(R"({"a":1,"b":2})"));
  EXPECT_FALSE(g->accepts(R"({"a":1})"));
}

TEST(JsonSchema, DependentSchemasApplyWhenTheTriggerIsPresent) {
  auto g = compile(R"({"type":"object","properties":{"kind":{"type":"string"},"n":{}},"additionalProperties":false,
                       "dependentSchemas":{"kind":{"properties":{"n":{"type":"integer"}},"required":["n"]}}})");
  EXPECT_TRUE(g->accepts(R"({"n":"s"})"));
  EXPECT_TRUE(g->accepts(R"({})"));
  EXPECT_TRUE(g->accepts(R"({"kind":"a","n":3})"));
  EXPECT_FALSE(g->accepts(R"({"kind":"a","n":"s"})"));
  EXPECT_FALSE(g->accepts(R"({"kind":"a"})"));
  auto never = compile(R"({"type":"object","dependentSchemas":{"x":false}})");
  EXPECT_TRUE(never->accepts(R"({"y":1})"));
  EXPECT_FALSE(never->accepts(R"({"x":1})"));
}

// Every array of up to 4 items over the domain plus one outsider, against a direct check.
TEST(JsonSchema, UniqueItemsOverAnEnumIsExact) {
  const std::vector<std::string> values = {R"("red")", R"("green")", R"("blue")", R"("pink")"};  // pink is outside
  for (const char* bounds : {"", R"(,"minItems":1,"maxItems":2)"}) {
    auto g = compile(std::string(R"({"type":"array","items":{"enum":["red","green","blue","red"]},"uniqueItems":true)") +
                     bounds + "}");
    size_t min_items = *bounds ? 1 : 0, max_items = *bounds ? 2 : 4;
    std::vector<std::vector<int>> arrays = {{}};
    for (size_t len = 1; len <= 4; ++len) {
      std::vector<int> idx(len, 0);
      while (true) {
        arrays.push_back(idx);
        size_t k = 0;
        while (k < len && ++idx[k] == 4) idx[k++] = 0;
        if (k == len) break;
      }
    }
    for (auto& a : arrays) {
      std::string text = "[";
      bool distinct = true, inside = true;
      for (size_t i = 0; i < a.size(); ++i) {
        text += (i ? "," : "") + values[a[i]];
        inside = inside && a[i] < 3;
        for (size_t j = 0; j < i; ++j) distinct = distinct && a[j] != a[i];
      }
      text += "]";
      bool expected = distinct && inside && a.size() >= min_items && a.size() <= max_items;
      EXPECT_EQ(g->accepts(text), expected) << bounds << " " << text;
    }
  }
  auto pretty = compile(R"({"type":"array","items":{"enum":["a","b"]},"uniqueItems":true})", false);
  EXPECT_TRUE(pretty->accepts("[\n  \"b\",\n  \"a\"\n]"));
  EXPECT_FALSE(pretty->accepts("[\"a\", \"a\"]"));
}

TEST(JsonSchema, UniqueItemsUsesJsonEqualityAndOtherDomains) {
  auto numbers = compile(R"({"type":"array","items":{"enum":[1,1.0,2,{"a":1,"b":2},{"b":2,"a":1}]},"uniqueItems":true})");
  EXPECT_TRUE(numbers->accepts("[2,1]"));
  EXPECT_TRUE(numbers->accepts(R"([{"a":1,"b":2},1])"));
  EXPECT_FALSE(numbers->accepts("[1,1]"));
  EXPECT_FALSE(numbers->accepts(R"([{"a":1,"b":2},{"a":1,"b":2}])"));
  auto flags = compile(R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true})");
  EXPECT_TRUE(flags->accepts("[true,false]"));
  EXPECT_TRUE(flags->accepts("[false]"));
  EXPECT_FALSE(flags->accepts("[true,true]"));
  EXPECT_FALSE(flags->accepts("[null]"));
  auto typed = compile(R"({"type":"array","items":{"type":"string","enum":["a",1,"b"]},"uniqueItems":true})");
  EXPECT_TRUE(typed->accepts(R"(["b","a"])"));
  EXPECT_FALSE(typed->accepts("[1]"));
}

TEST(JsonSchema, MultipleOfFiltersEnumValues) {
  auto g = compile(R"({"enum":[1,2,3,4.5,6,"x"],"multipleOf":1.5})");
  EXPECT_TRUE(g->accepts("3"));
  EXPECT_TRUE(g->accepts("4.5"));
  EXPECT_TRUE(g->accepts("6"));
  EXPECT_TRUE(g->accepts(R"("x")"));  // multipleOf only constrains numbers
  EXPECT_FALSE(g->accepts("1"));
  EXPECT_FALSE(g->accepts("2"));
}

TEST(JsonSchema, StringsWithLengthPatternAndFormat) {
  auto g = compile(R"({"type":"string","minLength":2,"maxLength":4,"pattern":"^[a-zé]+$"})");
  EXPECT_TRUE(g->accepts(R"("ab")"));
  EXPECT_TRUE(g->accepts(R"("éééé")"));
  EXPECT_FALSE(g->accepts(R"("a")"));
  EXPECT_FALSE(g->accepts(R"("abcde")"));
  EXPECT_FALSE(g->accepts(R"("aB")"));
  auto date = compile(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(date->accepts(R"("2024-02-29")"));
  EXPECT_FALSE(date->accepts(R"("2023-02-29")"));
  EXPECT_FALSE(date->accepts(R"("2023-04-31")"));
  auto escapes = compile(R"({"type":"string","maxLength":2})");
  EXPECT_TRUE(escapes->accepts(R"("\"\n")"));
  EXPECT_TRUE(escapes->accepts(R"("\u001f")"));
  EXPECT_FALSE(escapes->accepts(R"("\"\n\t")"));
}

TEST(JsonSchema, ArraysWithPrefixItemsAndCounts) {
  auto g = compile(R"({"prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"minItems":1,"maxItems":3})");
  EXPECT_TRUE(g->accepts("[1]"));
  EXPECT_TRUE(g->accepts(R"([1,"a",true])"));
  EXPECT_FALSE(g->accepts("[]"));
  EXPECT_FALSE(g->accepts(R"([1,"a",true,false])"));
  EXPECT_FALSE(g->accepts(R"(["a"])"));
}

TEST(JsonSchema, RecursiveRefsAndAnyOf) {
  auto g = compile(R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
                       "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],
                       "additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(g->accepts(R"({"value":1,"children":[{"value":2},{"value":3,"children":[]}]})"));
  EXPECT_FALSE(g->accepts(R"({"value":1,"children":[{"children":[]}]})"));
  auto any = compile(R"({"anyOf":[{"type":"string"},{"type":"integer","minimum":5}]})");
  EXPECT_TRUE(any->accepts(R"("x")"));
  EXPECT_TRUE(any->accepts("7"));
  EXPECT_FALSE(any->accepts("4"));
}

TEST(JsonSchema, FlexibleWhitespaceIsBounded) {
  JsonSchemaOptions options;
  options.max_whitespace = 3;
  auto g = CompiledGrammar::compile(json_schema_grammar(R"({"type":"array","items":{"type":"integer"}})", options));
  EXPECT_TRUE(g->accepts("[ 1 ,\n 2 ]"));
  EXPECT_TRUE(g->accepts("[1,2]"));
  EXPECT_FALSE(g->accepts("[    1]"));
}

void expect_error(const std::string& schema, GrammarErrorKind kind, const std::string& keyword) {
  try {
    compile(schema);
    FAIL() << "no error for " << schema;
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.kind(), kind) << schema << ": " << e.what();
    EXPECT_EQ(e.keyword(), keyword) << schema << ": " << e.what();
  }
}

TEST(JsonSchema, TypedErrorsNameTheKeyword) {
  expect_error(R"({"type":"array","uniqueItems":true})", GrammarErrorKind::kUnsupported, "uniqueItems");
  expect_error(R"({"type":"number","multipleOf":0.123456789})", GrammarErrorKind::kUnsupported, "multipleOf");
  expect_error(R"({"type":"number","multipleOf":0})", GrammarErrorKind::kInvalid, "multipleOf");
  expect_error(R"({"dependentRequired":{"a":"b"}})", GrammarErrorKind::kInvalid, "dependentRequired");
  expect_error(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})", GrammarErrorKind::kUnsupported, "uniqueItems");
  expect_error(R"({"type":"array","prefixItems":[{"enum":[1,2]}],"items":{"enum":[1,2]},"uniqueItems":true})",
               GrammarErrorKind::kUnsupported, "uniqueItems");
  expect_error(R"({"type":"array","items":{"enum":[1,2,3,4,5,6,7,8,9]},"uniqueItems":true})", GrammarErrorKind::kUnsupported,
               "uniqueItems");
  expect_error(R"({"dependentSchemas":{"a":3}})", GrammarErrorKind::kInvalid, "dependentSchemas");
  expect_error(R"({"dependentRequired":{"a":[],"b":[],"c":[],"d":[],"e":[],"f":[],"g":[]}})",
               GrammarErrorKind::kUnsupported, "dependentRequired");
  expect_error(R"({"type":"integer","multipleOf":-2})", GrammarErrorKind::kInvalid, "multipleOf");
  expect_error(R"({"type":"number","multipleOf":"2"})", GrammarErrorKind::kInvalid, "multipleOf");
  expect_error(R"({"type":"integer","minimum":1,"maximum":5,"multipleOf":7})", GrammarErrorKind::kUnsatisfiable, "grammar");
  expect_error(R"({"not":{"type":"string"}})", GrammarErrorKind::kUnsupported, "not");
  expect_error(R"({"type":"string","pattern":"(a)\\1"})", GrammarErrorKind::kUnsupported, "pattern");
  expect_error(R"({"type":"string","format":"hostname-ish"})", GrammarErrorKind::kUnsupported, "format");
  expect_error(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})", GrammarErrorKind::kUnsupported, "oneOf");
  expect_error(R"({"type":"strin"})", GrammarErrorKind::kInvalid, "type");
  expect_error(R"({"$ref":"#/$defs/missing"})", GrammarErrorKind::kInvalid, "$ref");
  expect_error(R"({"type":"object","required":["a"],"properties":{"a":false}})", GrammarErrorKind::kUnsatisfiable, "grammar");
  expect_error(R"({"type":"integer","minimum":5,"maximum":4})", GrammarErrorKind::kUnsatisfiable, "grammar");
  expect_error("{not json", GrammarErrorKind::kInvalid, "schema");
}

TEST(JsonSchema, OneOfWithDisjointBranchesIsSupported) {
  auto g = compile(R"({"oneOf":[{"type":"integer","maximum":3},{"type":"integer","minimum":10}]})");
  EXPECT_TRUE(g->accepts("2"));
  EXPECT_TRUE(g->accepts("11"));
  EXPECT_FALSE(g->accepts("5"));
}

// Object members are written in each branch's own order, so disjoint texts do not prove disjoint
// values: {"a":1,"b":2} matches both branches below although no text of it is in both automata.
TEST(JsonSchema, OneOfObjectBranchesNeedAValueLevelProof) {
  expect_error(R"({"oneOf":[
      {"type":"object","properties":{"a":{"const":1}},"required":["a"],"additionalProperties":{"type":"integer"}},
      {"type":"object","properties":{"b":{"const":2}},"required":["b"],"additionalProperties":{"type":"integer"}}]})",
               GrammarErrorKind::kUnsupported, "oneOf");
  // The same objects inside arrays.
  expect_error(R"({"oneOf":[
      {"type":"array","items":{"type":"object","properties":{"a":{"const":1}},"required":["a"],"additionalProperties":{"type":"integer"}}},
      {"type":"array","items":{"type":"object","properties":{"b":{"const":2}},"required":["b"],"additionalProperties":{"type":"integer"}}}]})",
               GrammarErrorKind::kUnsupported, "oneOf");
  // A discriminator (a required member with different constants) proves it, through $ref too.
  auto g = compile(R"({"$defs":{
      "Cat":{"type":"object","properties":{"kind":{"const":"cat"},"lives":{"type":"integer"}},"required":["kind","lives"]},
      "Dog":{"type":"object","properties":{"kind":{"enum":["dog","wolf"]},"bark":{"type":"string"}},"required":["kind"]}},
    "oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}]})");
  EXPECT_TRUE(g->accepts(R"({"kind":"cat","lives":9})"));
  EXPECT_TRUE(g->accepts(R"({"kind":"wolf","bark":"a"})"));
  EXPECT_FALSE(g->accepts(R"({"kind":"cat","bark":"a"})"));
  // So does a member one branch requires and the other forbids.
  auto h = compile(R"({"oneOf":[
      {"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
      {"type":"object","properties":{"y":{"type":"integer"}},"additionalProperties":false}]})");
  EXPECT_TRUE(h->accepts(R"({"x":1,"y":2})"));
  EXPECT_TRUE(h->accepts(R"({"y":2})"));
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

TEST(JsonSchema, PropertyNamesRestrictEveryMemberName) {
  auto g = compile(R"({"type":"object","properties":{"ab":{"type":"integer"},"toolong":{"type":"integer"}},
                       "propertyNames":{"maxLength":3,"pattern":"^[a-z]+$"}})");
  EXPECT_TRUE(g->accepts(R"({"ab":1,"xyz":null})"));
  EXPECT_FALSE(g->accepts(R"({"toolong":1})"));
  EXPECT_FALSE(g->accepts(R"({"ab":1,"abcd":2})"));
  EXPECT_FALSE(g->accepts(R"({"A":2})"));
  auto none = compile(R"({"type":"object","propertyNames":false})");
  EXPECT_TRUE(none->accepts("{}"));
  EXPECT_FALSE(none->accepts(R"({"a":1})"));
}

}  // namespace
}  // namespace deepinfer::structured
