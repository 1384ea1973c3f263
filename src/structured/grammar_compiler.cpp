#include "structured/grammar_compiler.h"

#include "structured/ebnf.h"
#include "structured/regex.h"

namespace deepinfer::structured {

std::string GrammarSpec::cache_key() const {
  std::string key = std::to_string(static_cast<int>(kind));
  key += '|';
  key += json_options.cache_key();
  key += '|';
  key += text;
  return key;
}

std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarKind::kRegex: return CompiledGrammar::compile(regex_grammar(spec.text));
    case GrammarKind::kEbnf: return CompiledGrammar::compile(parse_ebnf(spec.text));
    case GrammarKind::kJsonSchema: return CompiledGrammar::compile(json_schema_grammar(spec.text, spec.json_options));
    case GrammarKind::kAnyJson: return CompiledGrammar::compile(any_json_grammar(spec.json_options));
  }
  throw_invalid("grammar", "unknown grammar kind");
}

std::shared_ptr<const TokenGrammar> GrammarCompiler::compile(const GrammarSpec& spec) {
  // The compiler serves one vocabulary; its identity is part of the key all the same.
  std::string key = std::to_string(vocab_->identity()) + "|" + spec.cache_key();
  std::promise<std::shared_ptr<const TokenGrammar>> promise;
  std::shared_future<std::shared_ptr<const TokenGrammar>> existing;
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++hits_;
      existing = it->second;
    } else {
      cache_.emplace(key, promise.get_future().share());
    }
  }
  if (existing.valid()) return existing.get();
  try {
    auto result = std::make_shared<const TokenGrammar>(compile_grammar(spec), vocab_, compile_threads_);
    promise.set_value(result);
    return result;
  } catch (...) {
    // Errors are not cached: drop the entry and hand the error to any waiter.
    promise.set_exception(std::current_exception());
    std::lock_guard lock(mutex_);
    cache_.erase(key);
    throw;
  }
}

std::shared_ptr<const TokenGrammar> GrammarCompiler::compile_regex(std::string pattern) {
  return compile(GrammarSpec{GrammarKind::kRegex, std::move(pattern), {}});
}
std::shared_ptr<const TokenGrammar> GrammarCompiler::compile_ebnf(std::string text) {
  return compile(GrammarSpec{GrammarKind::kEbnf, std::move(text), {}});
}
std::shared_ptr<const TokenGrammar> GrammarCompiler::compile_json_schema(std::string schema, JsonSchemaOptions options) {
  return compile(GrammarSpec{GrammarKind::kJsonSchema, std::move(schema), options});
}
std::shared_ptr<const TokenGrammar> GrammarCompiler::compile_any_json(JsonSchemaOptions options) {
  return compile(GrammarSpec{GrammarKind::kAnyJson, "", options});
}

size_t GrammarCompiler::cache_hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}
size_t GrammarCompiler::cache_size() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}
void GrammarCompiler::clear_cache() {
  std::lock_guard lock(mutex_);
  cache_.clear();
}

}  // namespace deepinfer::structured
