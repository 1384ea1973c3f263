// JSON-Schema-Test-Suite (draft 2020-12): every case is either reported unsupported (typed
// error) or its grammar accepts each instance exactly when the instance is valid, both in compact
// form (compact grammar) and pretty-printed (flexible-whitespace grammar). Per-file counts are
// compared with a committed ratchet: correct answers may never drop, wrong answers must be zero.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "structured/compiled_grammar.h"
#include "structured/json_schema.h"

namespace deepinfer::structured {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kSuiteDir = fs::path(DEEPINFER_TEST_DATA_DIR) / "json-schema-test-suite/tests/draft2020-12";
const fs::path kRatchet = fs::path(DEEPINFER_TEST_DATA_DIR) / "structured/schema_suite_ratchet.json";

// An integral number written with digits only: 1.5e+3 -> 1500 (the same JSON number).
std::string integral_text(const ojson& v) {
  double d = v.get<double>();
  if (std::fabs(d) < 1e18) return std::to_string(static_cast<int64_t>(d));
  std::string text = v.dump();  // shortest form, e.g. 1.2345678910111214e+52
  size_t e = text.find_first_of("eE");
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e);
  int exponent = std::stoi(text.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') sign = "-", mantissa.erase(0, 1);
  size_t dot = mantissa.find('.');
  std::string digits = mantissa;
  int frac = 0;
  if (dot != std::string::npos) digits.erase(dot, 1), frac = static_cast<int>(mantissa.size() - dot - 1);
  if (exponent < frac) return text;
  return sign + digits + std::string(static_cast<size_t>(exponent - frac), '0');
}

// JSON text with the grammar's number convention (integral numbers without a fraction).
void write(const ojson& v, bool pretty, int indent, std::string& out) {
  auto newline = [&](int level) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<size_t>(level) * 2, ' ');
  };
  if (v.is_object()) {
    if (v.empty()) return void(out += "{}");
    out += '{';
    bool first = true;
    for (auto& [k, m] : v.items()) {
      if (!first) out += ',';
      first = false;
      newline(indent + 1);
      out += ojson(k).dump();
      out += pretty ? ": " : ":";
      write(m, pretty, indent + 1, out);
    }
    newline(indent);
    out += '}';
  } else if (v.is_array()) {
    if (v.empty()) return void(out += "[]");
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      newline(indent + 1);
      write(v[i], pretty, indent + 1, out);
    }
    newline(indent);
    out += ']';
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>())) {
    out += integral_text(v);
  } else {
    out += v.dump();
  }
}

std::string serialize(const ojson& v, bool pretty) {
  std::string out;
  write(v, pretty, 0, out);
  return out;
}

// Member order: as written, sorted, and following the schema's `properties` declarations.
ojson sorted_keys(const ojson& v) {
  if (v.is_object()) {
    std::map<std::string, ojson> sorted;
    for (auto& [k, m] : v.items()) sorted[k] = sorted_keys(m);
    ojson out = ojson::object();
    for (auto& [k, m] : sorted) out[k] = m;
    return out;
  }
  if (v.is_array()) {
    ojson out = ojson::array();
    for (auto& m : v) out.push_back(sorted_keys(m));
    return out;
  }
  return v;
}

// The grammar's member order: own properties, then $ref targets, then allOf / anyOf / oneOf.
void collect_property_order(const ojson& root, const ojson& schema, std::vector<std::string>& order, int depth) {
  if (depth > 8 || !schema.is_object()) return;
  if (schema.contains("properties") && schema["properties"].is_object()) {
    for (auto& [k, v] : schema["properties"].items()) {
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
    }
  }
  if (schema.contains("$ref") && schema["$ref"].is_string()) {
    std::string ref = schema["$ref"].get<std::string>();
    if (ref.rfind("#/", 0) == 0) {
      try {
        collect_property_order(root, root.at(ojson::json_pointer(ref.substr(1))), order, depth + 1);
      } catch (...) {
      }
    }
  }
  for (auto& key : {"allOf", "anyOf", "oneOf"}) {
    if (schema.contains(key) && schema[key].is_array()) {
      for (auto& sub : schema[key]) collect_property_order(root, sub, order, depth + 1);
    }
  }
  if (schema.contains("required") && schema["required"].is_array()) {
    for (auto& r : schema["required"]) {
      if (r.is_string() && std::find(order.begin(), order.end(), r.get<std::string>()) == order.end()) {
        order.push_back(r.get<std::string>());
      }
    }
  }
}

ojson schema_ordered(const ojson& root, const ojson& schema, const ojson& v) {
  if (v.is_object()) {
    std::vector<std::string> order;
    collect_property_order(root, schema, order, 0);
    ojson out = ojson::object();
    auto sub_schema = [&](const std::string& k) -> ojson {
      if (schema.is_object() && schema.contains("properties") && schema["properties"].contains(k)) return schema["properties"][k];
      if (schema.is_object() && schema.contains("additionalProperties")) return schema["additionalProperties"];
      return true;
    };
    for (auto& k : order) {
      if (v.contains(k)) out[k] = schema_ordered(root, sub_schema(k), v[k]);
    }
    for (auto& [k, m] : v.items()) {
      if (!out.contains(k)) out[k] = schema_ordered(root, sub_schema(k), m);
    }
    return out;
  }
  if (v.is_array()) {
    ojson out = ojson::array();
    for (size_t i = 0; i < v.size(); ++i) {
      ojson item = true;
      if (schema.is_object() && schema.contains("prefixItems") && i < schema["prefixItems"].size()) {
        item = schema["prefixItems"][i];
      } else if (schema.is_object() && schema.contains("items")) {
        item = schema["items"];
      }
      out.push_back(schema_ordered(root, item, v[i]));
    }
    return out;
  }
  return v;
}

struct FileCounts {
  int cases = 0, instances = 0, unsupported = 0, correct = 0, wrong = 0;
};

TEST(JsonSchemaSuite, EveryCaseIsUnsupportedOrExact) {
  ASSERT_TRUE(fs::exists(kSuiteDir)) << kSuiteDir;
  std::vector<fs::path> files;
  for (auto& entry : fs::recursive_directory_iterator(kSuiteDir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 40u);
  std::map<std::string, FileCounts> counts;
  std::map<std::string, int> unsupported_keywords;
  JsonSchemaOptions compact{JsonSchemaOptions::Whitespace::kCompact, 0};
  JsonSchemaOptions flexible;
  JsonSchemaOptions compact_no_formats = compact, flexible_no_formats = flexible;
  compact_no_formats.assert_formats = flexible_no_formats.assert_formats = false;
  for (auto& file : files) {
    std::string name = fs::relative(file, kSuiteDir).string();
    auto& c = counts[name];
    // Outside optional/format, `format` is an annotation (the 2020-12 default); the optional
    // format files test the format-assertion vocabulary.
    bool assert_formats = name.rfind("optional/format", 0) == 0;
    std::ifstream in(file);
    ojson cases = ojson::parse(in);
    for (auto& test_case : cases) {
      ++c.cases;
      const ojson& schema = test_case["schema"];
      const ojson& tests = test_case["tests"];
      std::shared_ptr<const CompiledGrammar> compact_grammar, flexible_grammar;
      std::string error;
      bool unsatisfiable = false;
      try {
        compact_grammar = CompiledGrammar::compile(json_schema_grammar_from_value(schema, assert_formats ? compact : compact_no_formats));
        flexible_grammar = CompiledGrammar::compile(json_schema_grammar_from_value(schema, assert_formats ? flexible : flexible_no_formats));
      } catch (const GrammarError& e) {
        if (e.kind() == GrammarErrorKind::kUnsatisfiable) {
          unsatisfiable = true;
        } else {
          ++unsupported_keywords[std::string(to_string(e.kind())) + ":" + e.keyword()];
          c.instances += static_cast<int>(tests.size());
          c.unsupported += static_cast<int>(tests.size());
          continue;
        }
      }
      for (auto& t : tests) {
        ++c.instances;
        bool valid = t["valid"].get<bool>();
        bool accepted_compact = false, accepted_pretty = false;
        if (!unsatisfiable) {
          for (const ojson& variant : {t["data"], sorted_keys(t["data"]), schema_ordered(schema, schema, t["data"])}) {
            accepted_compact = accepted_compact || compact_grammar->accepts(serialize(variant, false));
            accepted_pretty = accepted_pretty || flexible_grammar->accepts(serialize(variant, true));
          }
        }
        if (accepted_compact == valid && accepted_pretty == valid) {
          ++c.correct;
        } else {
          ++c.wrong;
          ADD_FAILURE() << name << ": \"" << test_case["description"].get<std::string>() << "\" / \""
                        << t["description"].get<std::string>() << "\" valid=" << valid
                        << " compact=" << accepted_compact << " pretty=" << accepted_pretty
                        << "\n  schema: " << schema.dump() << "\n  data: " << serialize(t["data"], false);
        }
      }
    }
  }
  FileCounts total;
  ojson report = ojson::object();
  for (auto& [name, c] : counts) {
    total.cases += c.cases;
    total.instances += c.instances;
    total.unsupported += c.unsupported;
    total.correct += c.correct;
    total.wrong += c.wrong;
    report[name] = {{"instances", c.instances}, {"handled", c.instances - c.unsupported},
                    {"unsupported", c.unsupported}, {"correct", c.correct}};
  }
  std::printf("schema suite: %d cases, %d instances, %d handled, %d unsupported, %d correct, %d wrong\n",
              total.cases, total.instances, total.instances - total.unsupported, total.unsupported, total.correct,
              total.wrong);
  for (auto& [kw, n] : unsupported_keywords) std::printf("  %-40s %d cases\n", kw.c_str(), n);
  if (std::getenv("DEEPINFER_UPDATE_RATCHET")) {
    fs::create_directories(kRatchet.parent_path());
    std::ofstream(kRatchet) << report.dump(2) << "\n";
  }
  ASSERT_TRUE(fs::exists(kRatchet)) << "missing " << kRatchet << " (run with DEEPINFER_UPDATE_RATCHET=1)";
  std::ifstream ratchet_in(kRatchet);
  ojson ratchet = ojson::parse(ratchet_in);
  for (auto& [name, expected] : ratchet.items()) {
    ASSERT_TRUE(counts.count(name)) << name << " disappeared from the suite";
    EXPECT_GE(counts[name].correct, expected["correct"].get<int>()) << name << ": fewer correct answers than the ratchet";
  }
  EXPECT_EQ(total.wrong, 0);
}

}  // namespace
}  // namespace deepinfer::structured
