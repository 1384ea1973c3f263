#pragma once
// Compiles grammars once per (grammar text, tokenizer) and caches the result: front end parse,
// automaton construction and the per-state token mask cache are all done here.
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "structured/json_schema.h"
#include "structured/token_grammar.h"

namespace deepinfer::structured {

enum class GrammarKind { kRegex, kEbnf, kJsonSchema, kAnyJson };

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kAnyJson;
  std::string text;  // pattern, EBNF source or schema JSON (unused for kAnyJson)
  JsonSchemaOptions json_options;
  std::string cache_key() const;
};

// Front end only (no tokenizer): parse and lower to the pushdown automaton. Throws GrammarError.
std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarSpec& spec);

class GrammarCompiler {
 public:
  // compile_threads: workers for the token mask precomputation (0 = one per hardware thread).
  explicit GrammarCompiler(std::shared_ptr<const TokenizerIndex> vocab, size_t compile_threads = 0)
      : vocab_(std::move(vocab)), compile_threads_(compile_threads) {}

  // Thread-safe; concurrent requests for the same grammar compile it once.
  std::shared_ptr<const TokenGrammar> compile(const GrammarSpec& spec);
  std::shared_ptr<const TokenGrammar> compile_regex(std::string pattern);
  std::shared_ptr<const TokenGrammar> compile_ebnf(std::string text);
  std::shared_ptr<const TokenGrammar> compile_json_schema(std::string schema, JsonSchemaOptions options = {});
  std::shared_ptr<const TokenGrammar> compile_any_json(JsonSchemaOptions options = {});

  size_t cache_hits() const;
  size_t cache_size() const;
  void clear_cache();
  const TokenizerIndex& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const TokenizerIndex> vocab_;
  size_t compile_threads_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const TokenGrammar>>> cache_;
  size_t hits_ = 0;
};

}  // namespace deepinfer::structured
