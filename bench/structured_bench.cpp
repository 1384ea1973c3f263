// Structured outputs with the DeepSeek-V3 tokenizer (129K tokens), one thread:
//  - mask fill time per token (p50 / p99 counters) along a realistic output, for a nested JSON
//    schema and for a regex;
//  - grammar + token-mask-cache compile time per schema.
// Run: build-*/bench/bench_structured --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "structured/grammar_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace deepinfer;
using namespace deepinfer::structured;

const Tokenizer& tokenizer() {
  static Tokenizer t = Tokenizer::from_model_dir(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3");
  return t;
}

std::shared_ptr<const TokenizerIndex> vocab() {
  static auto v = TokenizerIndex::from_tokenizer(tokenizer());
  return v;
}

const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0},
    "name": {"type": "string", "maxLength": 64},
    "email": {"type": "string", "format": "email"},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["street", "city"]},
    "orders": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1, "maximum": 1000},
        "price": {"type": "number"}, "tags": {"type": "array", "items": {"enum": ["new", "sale", "gift"]}}},
        "required": ["sku", "quantity"], "additionalProperties": false}},
    "active": {"type": "boolean"}
  },
  "required": ["id", "name", "orders"]
})";

const char* kNestedInstance = R"({"id": 1234, "name": "Ada Lovelace, Countess of Lovelace", "email": "ada@example.org",
 "address": {"street": "12 St James's Square", "city": "London", "zip": "12345"},
 "orders": [{"sku": "AB-1234-XYZ", "quantity": 3, "price": 19.99, "tags": ["new", "gift"]},
            {"sku": "analytical-engine", "quantity": 1, "price": 12500.5, "tags": []}], "active": true})";

const char* kRegex = "([A-Z][a-z]+ ){1,4}[0-9]{3}-[0-9]{4} \\(([a-z0-9._-]+@[a-z]+\\.(com|org|net))\\)";
const char* kRegexInstance = "Grace Brewster Murray Hopper 555-1234 (grace.hopper@navy.org)";

// Times fill_next_token_bitmask at every step of `text`, many rounds; reports p50/p99 in us.
void mask_time(benchmark::State& state, std::shared_ptr<const TokenGrammar> grammar, const std::string& text) {
  std::vector<int32_t> ids = tokenizer().encode(text);
  GrammarMatcher matcher(grammar);
  std::vector<int32_t> mask(grammar->vocab().mask_words());
  std::vector<double> samples;
  for (auto _ : state) {
    matcher.reset();
    for (int32_t id : ids) {
      auto start = std::chrono::steady_clock::now();
      matcher.fill_next_token_bitmask(mask);
      auto end = std::chrono::steady_clock::now();
      samples.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      benchmark::DoNotOptimize(mask.data());
      if (!matcher.accept_token(id)) state.SkipWithError("instance rejected by its own grammar");
    }
  }
  std::sort(samples.begin(), samples.end());
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["p50_us"] = samples[samples.size() / 2];
  state.counters["p99_us"] = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
  state.counters["max_us"] = samples.back();
}

void BM_MaskNestedJsonSchema(benchmark::State& state) {
  GrammarCompiler compiler(vocab());
  mask_time(state, compiler.compile_json_schema(kNestedSchema), kNestedInstance);
}
BENCHMARK(BM_MaskNestedJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(20);

void BM_MaskAnyJson(benchmark::State& state) {
  GrammarCompiler compiler(vocab());
  mask_time(state, compiler.compile_any_json(), kNestedInstance);
}
BENCHMARK(BM_MaskAnyJson)->Unit(benchmark::kMillisecond)->Iterations(20);

void BM_MaskRegex(benchmark::State& state) {
  GrammarCompiler compiler(vocab());
  mask_time(state, compiler.compile_regex(kRegex), kRegexInstance);
}
BENCHMARK(BM_MaskRegex)->Unit(benchmark::kMillisecond)->Iterations(20);

// Full compile (front end + automata + token mask cache), no cache reuse, one thread.
void compile_time(benchmark::State& state, GrammarSpec spec) {
  vocab();
  for (auto _ : state) {
    GrammarCompiler compiler(vocab(), /*compile_threads=*/1);
    benchmark::DoNotOptimize(compiler.compile(spec));
  }
}

void BM_CompileNestedJsonSchema(benchmark::State& state) {
  compile_time(state, {GrammarKind::kJsonSchema, kNestedSchema, {}});
}
BENCHMARK(BM_CompileNestedJsonSchema)->Unit(benchmark::kMillisecond);

void BM_CompileNestedJsonSchemaAllThreads(benchmark::State& state) {
  vocab();
  for (auto _ : state) {
    GrammarCompiler compiler(vocab(), /*compile_threads=*/0);
    benchmark::DoNotOptimize(compiler.compile_json_schema(kNestedSchema));
  }
}
BENCHMARK(BM_CompileNestedJsonSchemaAllThreads)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CompileSimpleJsonSchema(benchmark::State& state) {
  compile_time(state, {GrammarKind::kJsonSchema, R"({"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number"}},"required":["answer"]})", {}});
}
BENCHMARK(BM_CompileSimpleJsonSchema)->Unit(benchmark::kMillisecond);

// A string bound far above the longest token: positions it cannot tell apart share masks.
void BM_CompileLongBoundedString(benchmark::State& state) {
  compile_time(state, {GrammarKind::kJsonSchema,
                       R"({"type":"object","properties":{"summary":{"type":"string","maxLength":1000}},"required":["summary"]})",
                       {}});
}
BENCHMARK(BM_CompileLongBoundedString)->Unit(benchmark::kMillisecond);

void BM_CompileAnyJson(benchmark::State& state) { compile_time(state, {GrammarKind::kAnyJson, "", {}}); }
BENCHMARK(BM_CompileAnyJson)->Unit(benchmark::kMillisecond);

void BM_CompileRegex(benchmark::State& state) { compile_time(state, {GrammarKind::kRegex, kRegex, {}}); }
BENCHMARK(BM_CompileRegex)->Unit(benchmark::kMillisecond);

void BM_CompilerCacheHit(benchmark::State& state) {
  GrammarCompiler compiler(vocab());
  compiler.compile_json_schema(kNestedSchema);
  for (auto _ : state) benchmark::DoNotOptimize(compiler.compile_json_schema(kNestedSchema));
}
BENCHMARK(BM_CompilerCacheHit);

}  // namespace

BENCHMARK_MAIN();
