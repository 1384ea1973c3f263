#pragma once
// Compiles grammars once per (grammar text, tokenizer) and caches the result: front end parse,
// automaton construction and the per-state token mask cache are all done here. The cache may be
// bounded (least recently used entries are dropped), so a stream of distinct schemas cannot grow
// it without limit.
#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "structured/json_schema.h"
#include "structured/token_grammar.h"

namespace deepinfer::structured {

// kChoice: exactly one of a list of literal strings (vLLM's guided "choice").
enum class GrammarKind { kRegex, kEbnf, kJsonSchema, kAnyJson, kChoice };

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kAnyJson;
  // pattern, EBNF source, schema JSON, or for kChoice a JSON array of strings (unused for kAnyJson)
  std::string text;
  JsonSchemaOptions json_options;
  std::string cache_key() const;
};

// Front end only (no tokenizer): parse and lower to the pushdown automaton. Throws GrammarError.
std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarSpec& spec);
// The alternation of the literal strings (at least one). Throws GrammarError(kInvalid) on an empty list.
Grammar choice_grammar(const std::vector<std::string>& choices);

class GrammarCompiler {
 public:
  // compile_threads: workers for the token mask precomputation (0 = one per hardware thread).
  // max_entries: grammars kept at most (least recently used dropped first); 0 = unbounded.
  explicit GrammarCompiler(std::shared_ptr<const TokenizerIndex> vocab, size_t compile_threads = 0,
                           size_t max_entries = 0)
      : vocab_(std::move(vocab)), compile_threads_(compile_threads), max_entries_(max_entries) {}

  // Thread-safe; concurrent requests for the same grammar compile it once.
  std::shared_ptr<const TokenGrammar> compile(const GrammarSpec& spec);
  std::shared_ptr<const TokenGrammar> compile_regex(std::string pattern);
  std::shared_ptr<const TokenGrammar> compile_ebnf(std::string text);
  std::shared_ptr<const TokenGrammar> compile_json_schema(std::string schema, JsonSchemaOptions options = {});
  std::shared_ptr<const TokenGrammar> compile_any_json(JsonSchemaOptions options = {});

  size_t cache_hits() const;
  size_t cache_size() const;
  size_t cache_evictions() const;
  void clear_cache();
  const TokenizerIndex& vocab() const { return *vocab_; }

 private:
  using Future = std::shared_future<std::shared_ptr<const TokenGrammar>>;
  struct Entry {
    Future grammar;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recently used)
    uint64_t serial;                        // tells a failed compile its own entry from a newer one
  };
  std::shared_ptr<const TokenizerIndex> vocab_;
  size_t compile_threads_;
  size_t max_entries_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> cache_;
  std::list<std::string> lru_;
  size_t hits_ = 0, evictions_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace deepinfer::structured
