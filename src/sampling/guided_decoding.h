#pragma once
// Guided decoding requests (StructuredOutputs) -> token grammars for the model's tokenizer. One
// GrammarCache per engine: each (kind, spec) is compiled once and kept in a bounded LRU cache, so
// the repeated schema of an agent loop costs one compile while a stream of distinct schemas
// cannot grow memory without limit.
//
// Reasoning models: when the tokenizer has a `</think>` token and the prompt ends inside a
// thinking section (its last `<think>` is not closed), the grammar starts after the model writes
// `</think>` (vLLM's reasoning-aware structured outputs); before that the output is free.
// Otherwise the grammar applies from the first generated token.
#include <cstddef>
#include <memory>
#include <optional>
#include <span>

#include "sampling/sampling_params.h"
#include "structured/grammar_compiler.h"

namespace deepinfer {
class Tokenizer;
}

namespace deepinfer::sampling {

// The compiler's spec for the kind set (structured_outputs must have exactly one kind set).
structured::GrammarSpec grammar_spec(const StructuredOutputs& so);

// Parses the spec with the grammar front end only (no tokenizer, cheap): a spec that does not
// compile throws the same error GrammarCache::get would. For checks before a model loads.
void check_structured_outputs(const StructuredOutputs& so);

class GrammarCache {
 public:
  static constexpr size_t kDefaultCapacity = 64;
  // The tokenizer's EOS is the grammar's stop token; a tokenizer without one cannot end a grammar.
  explicit GrammarCache(const Tokenizer& tokenizer, size_t capacity = kDefaultCapacity);

  // The compiled grammar for `so` (exactly one kind set). Throws Error naming the field:
  // "invalid sampling parameter: structured_outputs.regex: <the compiler's message>".
  std::shared_ptr<const structured::TokenGrammar> get(const StructuredOutputs& so);
  const structured::GrammarCompiler& compiler() const { return compiler_; }

 private:
  structured::GrammarCompiler compiler_;
};

struct ReasoningTokens {
  std::optional<int32_t> start, end;  // `<think>` and `</think>` when the vocabulary has them
  static ReasoningTokens of(const Tokenizer& tokenizer);
  // The prompt's last `<think>` comes after its last `</think>` (or there is no `</think>`).
  bool prompt_in_thinking(std::span<const int32_t> prompt) const;
};

}  // namespace deepinfer::sampling
