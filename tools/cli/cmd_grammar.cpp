// `deepinfer grammar check`: compiles a grammar (JSON Schema, regex or GBNF) against a tokenizer,
// tokenizes a text and walks the matcher token by token, checking each token against the mask
// too. Exit 0: complete match; 1: rejected or incomplete (says where); 2: invalid / unsupported
// grammar (prints the typed error).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "core/text_file.h"
#include "structured/grammar_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using namespace deepinfer::structured;

struct GrammarCheckArgs {
  std::string schema_file, regex, ebnf_file, tokenizer_file, text;
  bool any_json = false;
  bool compact = false;
};

std::string read_file(const std::string& path) { return read_text_file(path, kRequestFileLimit, "grammar input"); }

std::string printable(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

int run_check(const GrammarCheckArgs& args) {
  int given = !args.schema_file.empty() + !args.regex.empty() + !args.ebnf_file.empty() + args.any_json;
  DEEPINFER_CHECK(given == 1, "give exactly one of --schema, --regex, --ebnf, --json-object");
  GrammarSpec spec;
  if (!args.schema_file.empty()) spec = {GrammarKind::kJsonSchema, read_file(args.schema_file), {}};
  if (!args.regex.empty()) spec = {GrammarKind::kRegex, args.regex, {}};
  if (!args.ebnf_file.empty()) spec = {GrammarKind::kEbnf, read_file(args.ebnf_file), {}};
  if (args.any_json) spec = {GrammarKind::kAnyJson, "", {}};
  if (args.compact) spec.json_options.whitespace = JsonSchemaOptions::Whitespace::kCompact;

  // With a tokenizer_config.json next to the file, EOS (the stop token) is known too.
  std::filesystem::path tokenizer_path(args.tokenizer_file);
  bool has_config = std::filesystem::exists(tokenizer_path.parent_path() / "tokenizer_config.json");
  Tokenizer tokenizer = has_config ? Tokenizer::from_model_dir(tokenizer_path.parent_path()) : Tokenizer::from_file(tokenizer_path);
  GrammarCompiler compiler(TokenizerIndex::from_tokenizer(tokenizer));
  std::shared_ptr<const TokenGrammar> grammar;
  try {
    grammar = compiler.compile(spec);
  } catch (const GrammarError& e) {
    std::fprintf(stderr, "grammar error: %s\n", e.what());
    return 2;
  }
  GrammarMatcher matcher(grammar);
  std::vector<int32_t> mask(grammar->vocab().mask_words());
  std::vector<int32_t> ids = tokenizer.encode(args.text);
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& bytes = grammar->vocab().token(ids[i]);
    matcher.fill_next_token_bitmask(mask);
    bool in_mask = test_mask_bit(mask, ids[i]);
    bool accepted = matcher.accept_token(ids[i]);
    if (!in_mask || !accepted) {
      std::printf("rejected: token %zu (id %d, \"%s\") at byte offset %zu%s\n", i, ids[i], printable(bytes).c_str(),
                  offset, in_mask == accepted ? "" : " (mask and matcher disagree)");
      return 1;
    }
    offset += bytes.size();
  }
  matcher.fill_next_token_bitmask(mask);
  auto stops = grammar->vocab().stop_tokens();
  bool stop_allowed = !stops.empty() && test_mask_bit(mask, stops[0]);
  if (!matcher.can_end() || (!stops.empty() && !stop_allowed)) {
    std::printf("rejected: incomplete, the text is a valid prefix but not a complete match (%zu tokens, %zu bytes)\n",
                ids.size(), offset);
    return 1;
  }
  std::printf("accepted: %zu tokens, %zu bytes\n", ids.size(), offset);
  return 0;
}

const CommandRegistration registration{Command{
    "grammar", "Structured outputs: check a text against a JSON Schema, regex or GBNF grammar",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<GrammarCheckArgs>();
      sub.require_subcommand(1);
      CLI::App* check = sub.add_subcommand("check", "Walk the token matcher over TEXT (exit 0 match, 1 reject, 2 bad grammar)");
      check->add_option("--schema", args->schema_file, "JSON Schema file");
      check->add_option("--regex", args->regex, "Regular expression (full match)");
      check->add_option("--ebnf", args->ebnf_file, "GBNF grammar file (start rule: root)");
      check->add_flag("--json-object", args->any_json, "Any JSON object");
      check->add_flag("--compact", args->compact, "JSON without whitespace");
      check->add_option("--tokenizer", args->tokenizer_file, "tokenizer.json")->required();
      check->add_option("--text", args->text, "Text to check")->required();
      return [args] { return run_check(*args); };
    }}};

}  // namespace
}  // namespace deepinfer::cli
