// The Jinja subset against Jinja2: small feature templates (tests/data/encoding/jinja_features.json,
// expected output rendered by python3-jinja2), plus syntax errors and runaway-template limits.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "encoding/jinja/template.h"

namespace deepinfer::jinja {
namespace {

ValueDict context_from(const encoding::Json& json) {
  ValueDict context;
  for (const auto& [key, value] : json.items()) context.emplace_back(key, Value::from_json(value));
  return context;
}

std::string render(const std::string& source, const ValueDict& context = {}) {
  return Template::parse(source).render(context);
}

TEST(Jinja, FeatureTemplatesMatchJinja2) {
  std::ifstream in(std::string(DEEPINFER_TEST_DATA_DIR) + "/encoding/jinja_features.json");
  ASSERT_TRUE(in.good());
  auto golden = encoding::Json::parse(in);
  int checked = 0;
  for (const auto& test_case : golden["cases"]) {
    SCOPED_TRACE(test_case["name"].get<std::string>());
    EXPECT_EQ(render(test_case["template"].get<std::string>(), context_from(test_case["context"])),
              test_case["expected"].get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(Jinja, SyntaxErrorsThrow) {
  for (const char* bad : {"{% if x %}", "{% for x in y %}", "{{ x ", "{{ (1 }}", "{% endif %}", "{% unknown %}",
                          "{{ 'unterminated }}", "{% set %}", "{{ x | }}", "{% if %}{% endif %}"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(Template::parse(bad), Error);
  }
}

TEST(Jinja, RuntimeErrorsThrow) {
  EXPECT_THROW(render("{{ raise_exception('boom') }}"), Error);
  EXPECT_THROW(render("{{ 'a' + missing }}"), Error);
  EXPECT_THROW(render("{{ missing.attr }}"), Error);
  EXPECT_THROW(render("{{ 1 + 'a' }}"), Error);
  EXPECT_THROW(render("{{ 1 // 0 }}"), Error);
  // Floats outside int64 (fuzz_jinja's UBSan find: the cast was undefined behaviour).
  EXPECT_THROW(render("{{ 1e62 | int }}"), Error);
  EXPECT_THROW(render("{{ -1e19 | int }}"), Error);
  EXPECT_EQ(render("{{ 3.7 | int }} {{ -2.5 | int }}"), "3 -2");
  EXPECT_THROW(render("{{ x | nosuchfilter }}"), Error);
  EXPECT_THROW(render("{% set x.y = 1 %}"), Error);
}

TEST(Jinja, LimitsStopRunawayTemplates) {
  EXPECT_THROW(render("{% for i in range(100000000) %}{% endfor %}"), Error);
  EXPECT_THROW(render("{{ 'x' * 1000000000 }}"), Error);
  std::string deep(500, '(');
  EXPECT_THROW(Template::parse("{{ " + deep + "1" + std::string(500, ')') + " }}"), Error);
  std::string nested;
  for (int i = 0; i < 300; ++i) nested += "{% if true %}";
  EXPECT_THROW(Template::parse(nested), Error);
}

TEST(Jinja, NamespaceSurvivesLoopScopes) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}"
                   "{% set local = i %}{% endfor %}{{ ns.n }}{{ local is defined }}"),
            "6False");
}

}  // namespace
}  // namespace deepinfer::jinja
