// libFuzzer: JSON Schema conversion never crashes; every failure is a typed GrammarError
// (malformed JSON included, reported as an invalid schema).
#include <cstddef>
#include <cstdint>
#include <string>

#include "structured/compiled_grammar.h"
#include "structured/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2048) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace deepinfer::structured;
  JsonSchemaOptions options;
  options.max_whitespace = 2;
  try {
    auto grammar = CompiledGrammar::compile(json_schema_grammar(text, options));
    grammar->accepts("{}");
    grammar->accepts("[1,\"a\",null]");
  } catch (const GrammarError&) {
  }
  return 0;
}
