// With the real DeepSeek-V3 tokenizer (129K tokens): random walks over allowed tokens never dead
// end and always finish in strings an independent checker accepts (std::regex for regexes,
// nlohmann::json + a small validator for schemas); rollback restores masks exactly.
#include <gtest/gtest.h>

#include <cmath>

#include <regex>

#include "test_vocab.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::structured {
namespace {

using ojson = nlohmann::ordered_json;

GrammarCompiler& compiler() {
  static GrammarCompiler instance(TokenizerIndex::from_tokenizer(
      Tokenizer::from_model_dir(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3")));
  return instance;
}

// Chooses tokens so that walks finish: often a stop token or a token of punctuation only.
struct Walker {
  std::mt19937 rng;
  std::string run(GrammarMatcher& matcher, size_t max_tokens, bool& ended) {
    const auto& vocab = matcher.token_grammar().vocab();
    std::vector<int32_t> mask(vocab.mask_words());
    std::string text;
    ended = false;
    for (size_t step = 0; step < max_tokens; ++step) {
      matcher.fill_next_token_bitmask(mask);
      auto ids = testing::allowed_ids(mask, vocab.vocab_size());
      EXPECT_FALSE(ids.empty()) << "dead end after: " << text;
      if (ids.empty()) return text;
      std::vector<int32_t> preferred;
      bool pushy = std::uniform_real_distribution<double>(0, 1)(rng) < 0.6;
      for (int32_t id : ids) {
        if (vocab.is_stop_token(id)) {
          preferred = {id};
          break;
        }
        if (!pushy) continue;
        const std::string& t = vocab.token(id);
        bool punctuation = std::all_of(t.begin(), t.end(), [](char c) { return std::ispunct(static_cast<unsigned char>(c)); });
        if (punctuation) preferred.push_back(id);
      }
      auto& pool = preferred.empty() ? ids : preferred;
      int32_t id = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
      EXPECT_TRUE(matcher.accept_token(id));
      if (vocab.is_stop_token(id)) {
        ended = true;
        return text;
      }
      text += vocab.token(id);
    }
    return text;
  }
};

TEST(RealTokenizer, RegexWalksMatchStdRegex) {
  for (std::string pattern : {"[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8})?", "\\d{3}-\\d{4}", "(yes|no|maybe)!?",
                              "[a-f0-9]{8}-[a-f0-9]{4}", "(\\w+@\\w+\\.(com|org)|none)"}) {
    auto grammar = compiler().compile_regex(pattern);
    GrammarMatcher matcher(grammar);
    Walker walker{std::mt19937(42)};
    std::regex reference(pattern, std::regex::ECMAScript);
    int ended_count = 0;
    for (int walk = 0; walk < 8; ++walk) {
      matcher.reset();
      bool ended;
      std::string text = walker.run(matcher, 40, ended);
      if (!ended) continue;
      ++ended_count;
      EXPECT_TRUE(std::regex_match(text, reference)) << pattern << " produced '" << text << "'";
    }
    EXPECT_GT(ended_count, 0) << pattern;
  }
}

// Validates the schema subset used below.
bool valid(const ojson& schema, const ojson& v) {
  if (schema.contains("enum")) return std::find(schema["enum"].begin(), schema["enum"].end(), v) != schema["enum"].end();
  std::string type = schema.value("type", "");
  if (type == "object") {
    if (!v.is_object()) return false;
    for (auto& r : schema["required"]) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    if (schema.contains("dependentRequired")) {
      for (auto& [trigger, names] : schema["dependentRequired"].items()) {
        if (!v.contains(trigger)) continue;
        for (auto& n : names) {
          if (!v.contains(n.get<std::string>())) return false;
        }
      }
    }
    for (auto& [k, m] : v.items()) {
      if (!schema["properties"].contains(k) || !valid(schema["properties"][k], m)) return false;
    }
    return true;
  }
  if (type == "array") {
    if (!v.is_array()) return false;
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return false;
    if (schema.value("uniqueItems", false)) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (v[i] == v[j]) return false;
        }
      }
    }
    for (auto& m : v) {
      if (!valid(schema["items"], m)) return false;
    }
    return true;
  }
  if (type == "string") {
    if (!v.is_string()) return false;
    std::string s = v.get<std::string>();
    size_t chars = 0;
    for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
    if (schema.contains("maxLength") && chars > schema["maxLength"].get<size_t>()) return false;
    if (schema.contains("pattern") && !std::regex_search(s, std::regex(schema["pattern"].get<std::string>()))) return false;
    return true;
  }
  if (type == "integer") {
    if (!v.is_number_integer()) return false;
    int64_t x = v.get<int64_t>();
    return (!schema.contains("minimum") || x >= schema["minimum"].get<int64_t>()) &&
           (!schema.contains("maximum") || x <= schema["maximum"].get<int64_t>());
  }
  if (type == "boolean") return v.is_boolean();
  if (type == "number") {
    if (!v.is_number()) return false;
    double x = v.get<double>();
    if (schema.contains("multipleOf")) {
      double q = x / schema["multipleOf"].get<double>();
      if (q != std::floor(q)) return false;
    }
    return (!schema.contains("minimum") || x >= schema["minimum"].get<double>()) &&
           (!schema.contains("maximum") || x <= schema["maximum"].get<double>());
  }
  return false;
}

TEST(RealTokenizer, SchemaWalksProduceValidJson) {
  const std::string schema_text = R"({"type":"object","properties":{
      "id":{"type":"integer","minimum":1,"maximum":9999},
      "name":{"type":"string","maxLength":12},
      "code":{"type":"string","pattern":"^[A-Z]{2}[0-9]$"},
      "tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":3,"uniqueItems":true},
      "active":{"type":"boolean"},
      "score":{"type":"number"},
      "price":{"type":"number","multipleOf":0.25,"minimum":0,"maximum":100}},
    "required":["id","name","price"],"dependentRequired":{"active":["tags"]},"additionalProperties":false})";
  ojson schema = ojson::parse(schema_text);
  for (auto whitespace : {JsonSchemaOptions::Whitespace::kCompact, JsonSchemaOptions::Whitespace::kFlexible}) {
    JsonSchemaOptions options;
    options.whitespace = whitespace;
    options.max_whitespace = 2;
    auto grammar = compiler().compile_json_schema(schema_text, options);
    GrammarMatcher matcher(grammar);
    Walker walker{std::mt19937(5)};
    int ended_count = 0;
    for (int walk = 0; walk < 10; ++walk) {
      matcher.reset();
      bool ended;
      std::string text = walker.run(matcher, 120, ended);
      if (!ended) continue;
      ++ended_count;
      ojson value;
      ASSERT_NO_THROW(value = ojson::parse(text)) << text;
      EXPECT_TRUE(valid(schema, value)) << text;
    }
    EXPECT_GT(ended_count, 0);
  }
}

TEST(RealTokenizer, RollbackRestoresMasks) {
  auto grammar = compiler().compile_any_json();
  GrammarMatcher matcher(grammar);
  const auto& vocab = grammar->vocab();
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> masks;
  std::vector<int32_t> mask(vocab.mask_words());
  for (int step = 0; step < 30; ++step) {
    matcher.fill_next_token_bitmask(mask);
    masks.push_back(mask);
    auto ids = testing::allowed_ids(mask, vocab.vocab_size());
    ASSERT_FALSE(ids.empty());
    int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    if (vocab.is_stop_token(id)) break;
    ASSERT_TRUE(matcher.accept_token(id));
  }
  while (matcher.tokens_accepted() > 0) {
    matcher.rollback(std::min<size_t>(2, matcher.tokens_accepted()));
    matcher.fill_next_token_bitmask(mask);
    ASSERT_EQ(mask, masks[matcher.tokens_accepted()]);
  }
}

TEST(RealTokenizer, EncodedJsonIsAcceptedTokenByToken) {
  auto grammar = compiler().compile_any_json();
  Tokenizer tokenizer = Tokenizer::from_model_dir(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3");
  const std::string text = R"({"name": "Zoë \"Z\" 😀", "list": [1, -2.5e3, true, null, {"x": []}], "ok": false})";
  GrammarMatcher matcher(grammar);
  std::vector<int32_t> mask(grammar->vocab().mask_words());
  for (int32_t id : tokenizer.encode(text)) {
    matcher.fill_next_token_bitmask(mask);
    ASSERT_TRUE(test_mask_bit(mask, id)) << "token " << id << " '" << grammar->vocab().token(id) << "'";
    ASSERT_TRUE(matcher.accept_token(id));
  }
  EXPECT_TRUE(matcher.can_end());
}

// The precomputed masks (whole trie subtrees accepted at once where the automaton loops) must
// equal a token-by-token brute force on the real vocabulary, inside strings with CJK, escapes
// and emoji, in property-name exclusion states and in a UTF-8 regex class.
TEST(RealTokenizer, MasksEqualBruteForceAlongEncodedOutputs) {
  Tokenizer tokenizer = Tokenizer::from_model_dir(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3");
  struct Case {
    GrammarSpec spec;
    std::string text;
  };
  const std::vector<Case> cases = {
      {{GrammarKind::kJsonSchema,
        R"({"type":"object","properties":{"answer":{"type":"string"},"note":{"type":"string","maxLength":12}},"required":["answer"]})",
        {}},
       R"({"answer": "北京是中国的首都 \"quoted\" 😀 done", "annotation": "x"})"},
      {{GrammarKind::kRegex, R"(([^\s,]+, ){1,3}[^.]+\.)", {}}, "naïve, 東京, Zoë42."},
      // maxLength well above the longest token (128 bytes): most positions share a mask entry.
      {{GrammarKind::kJsonSchema, R"({"type":"string","maxLength":300})", {}},
       "\"" + std::string(150, '-') + " Psalms 23:1 The LORD is my shepherd; I shall not want. 北京 " + std::string(40, ' ') + "end\""},
  };
  for (const auto& c : cases) {
    auto grammar = compiler().compile(c.spec);
    GrammarMatcher matcher(grammar);
    std::vector<int32_t> mask(grammar->vocab().mask_words());
    for (int32_t id : tokenizer.encode(c.text)) {
      matcher.fill_next_token_bitmask(mask);
      ASSERT_EQ(mask, testing::brute_force_mask(matcher)) << c.spec.text << " after " << matcher.tokens_accepted() << " tokens";
      ASSERT_TRUE(matcher.accept_token(id)) << "token '" << grammar->vocab().token(id) << "'";
    }
    EXPECT_TRUE(matcher.can_end()) << c.spec.text;
  }
}

}  // namespace
}  // namespace deepinfer::structured
