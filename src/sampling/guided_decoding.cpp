#include "sampling/guided_decoding.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/token_index.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::sampling {

structured::GrammarSpec grammar_spec(const StructuredOutputs& so) {
  DEEPINFER_CHECK(so.kinds_set() == 1, "internal error: grammar_spec needs exactly one guided decoding kind, got {}",
                  so.kinds_set());
  using structured::GrammarKind;
  structured::GrammarSpec spec;
  if (so.disable_any_whitespace) spec.json_options.whitespace = structured::JsonSchemaOptions::Whitespace::kCompact;
  if (so.json) {
    spec.kind = GrammarKind::kJsonSchema;
    spec.text = *so.json;
  } else if (so.regex) {
    spec.kind = GrammarKind::kRegex;
    spec.text = *so.regex;
  } else if (so.choice) {
    spec.kind = GrammarKind::kChoice;
    try {
      spec.text = nlohmann::json(*so.choice).dump();
    } catch (const nlohmann::json::exception&) {
      fail("invalid sampling parameter: structured_outputs.choice: the choices must be valid UTF-8");
    }
  } else if (so.grammar) {
    spec.kind = GrammarKind::kEbnf;
    spec.text = *so.grammar;
  } else {
    spec.kind = GrammarKind::kAnyJson;
  }
  return spec;
}

void check_structured_outputs(const StructuredOutputs& so) {
  if (!so.active()) return;
  const structured::GrammarSpec spec = grammar_spec(so);
  try {
    structured::compile_grammar(spec);
  } catch (const structured::GrammarError& e) {
    fail("invalid sampling parameter: structured_outputs.{}: {}", so.kind_name(), e.what());
  }
}

GrammarCache::GrammarCache(const Tokenizer& tokenizer, size_t capacity)
    : compiler_(structured::TokenizerIndex::from_tokenizer(tokenizer), /*compile_threads=*/0, capacity) {}

std::shared_ptr<const structured::TokenGrammar> GrammarCache::get(const StructuredOutputs& so) {
  const structured::GrammarSpec spec = grammar_spec(so);
  try {
    return compiler_.compile(spec);
  } catch (const structured::GrammarError& e) {
    fail("invalid sampling parameter: structured_outputs.{}: {}", so.kind_name(), e.what());
  }
}

ReasoningTokens ReasoningTokens::of(const Tokenizer& tokenizer) {
  return ReasoningTokens{tokenizer.token_to_id("<think>"), tokenizer.token_to_id("</think>")};
}

bool ReasoningTokens::prompt_in_thinking(std::span<const int32_t> prompt) const {
  if (!end) return false;
  for (size_t i = prompt.size(); i-- > 0;) {
    if (prompt[i] == *end) return false;
    if (start && prompt[i] == *start) return true;
  }
  return false;
}

}  // namespace deepinfer::sampling
