// libFuzzer: the GBNF parser and grammar compiler never crash; bad input is a typed GrammarError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "structured/compiled_grammar.h"
#include "structured/ebnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace deepinfer::structured;
  try {
    auto grammar = CompiledGrammar::compile(parse_ebnf(text));
    grammar->accepts(text);
    grammar->accepts("a");
  } catch (const GrammarError&) {
  }
  return 0;
}
