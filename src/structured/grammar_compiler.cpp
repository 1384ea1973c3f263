#include "structured/grammar_compiler.h"
#include "core/json_excerpt.h"

#include <nlohmann/json.hpp>

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

Grammar choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw_invalid("choice", "the list of choices is empty");
  std::vector<ExprPtr> options;
  options.reserve(choices.size());
  for (const auto& c : choices) options.push_back(make_literal(c));
  return single_rule_grammar(make_alt(std::move(options)));
}

namespace {
std::vector<std::string> parse_choices(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) throw_invalid("choice", "expected a JSON array of strings");
  std::vector<std::string> out;
  for (const auto& item : j) {
    if (!item.is_string()) throw_invalid("choice", "every choice must be a string, found " + json_excerpt(item));
    out.push_back(item.get<std::string>());
  }
  return out;
}
}  // namespace

std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarKind::kChoice: return CompiledGrammar::compile(choice_grammar(parse_choices(spec.text)));
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
  Future existing;
  uint64_t serial = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++hits_;
      existing = it->second.grammar;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    } else {
      serial = ++serial_;
      lru_.push_front(key);
      cache_.emplace(key, Entry{promise.get_future().share(), lru_.begin(), serial});
      // Dropping an entry only forgets it: whoever holds the grammar (or waits on it) keeps it.
      while (max_entries_ > 0 && cache_.size() > max_entries_) {
        cache_.erase(lru_.back());
        lru_.pop_back();
        ++evictions_;
      }
    }
  }
  if (existing.valid()) return existing.get();
  try {
    auto result = std::make_shared<const TokenGrammar>(compile_grammar(spec), vocab_, compile_threads_);
    promise.set_value(result);
    return result;
  } catch (...) {
    // Errors are not cached: drop the entry (if it is still ours) and hand the error to any waiter.
    promise.set_exception(std::current_exception());
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end() && it->second.serial == serial) {
      lru_.erase(it->second.lru);
      cache_.erase(it);
    }
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
size_t GrammarCompiler::cache_evictions() const {
  std::lock_guard lock(mutex_);
  return evictions_;
}
void GrammarCompiler::clear_cache() {
  std::lock_guard lock(mutex_);
  cache_.clear();
  lru_.clear();
}

}  // namespace deepinfer::structured
