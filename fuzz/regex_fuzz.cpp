// libFuzzer: the regex front end and automaton construction never crash; bad input is a typed
// GrammarError. Accepted grammars must agree with themselves on a probe string.
#include <cstddef>
#include <cstdint>
#include <string>

#include "structured/compiled_grammar.h"
#include "structured/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;
  std::string pattern(reinterpret_cast<const char*>(data), size);
  using namespace deepinfer::structured;
  for (auto anchoring : {RegexOptions::Anchoring::kFullMatch, RegexOptions::Anchoring::kSearch}) {
    try {
      RegexOptions options;
      options.anchoring = anchoring;
      options.encoder = anchoring == RegexOptions::Anchoring::kSearch ? json_string_encoder() : utf8_encoder();
      auto grammar = CompiledGrammar::compile(single_rule_grammar(parse_regex(pattern, options)));
      grammar->accepts(pattern);
      grammar->accepts("abc123");
    } catch (const GrammarError&) {
    }
  }
  return 0;
}
