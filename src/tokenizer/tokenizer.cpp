#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_excerpt.h"
#include "core/text_file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {


// Tokenizer files nest a few levels; a deeper one is refused before the recursive readers
// (nested normalizer / pre-tokenizer Sequences) could overflow the stack.
constexpr size_t kMaxJsonDepth = 128;

nlohmann::json parse_json(std::string_view text, std::string_view source) {
  const size_t depth = json_nesting_depth(text);
  if (depth > kMaxJsonDepth) fail("tokenizer: {} nests JSON {} levels deep (at most {})", source, depth, kMaxJsonDepth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail("tokenizer: {} is not valid JSON: {}", source, error.what());
  }
}

// Only normalizers that leave text unchanged are supported: null or a Sequence of such.
void check_normalizer(const nlohmann::json& normalizer) {
  if (normalizer.is_null()) return;
  const std::string type = normalizer.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& child : normalizer.at("normalizers")) check_normalizer(child);
    return;
  }
  fail("tokenizer.json: unsupported normalizer \"{}\" (only null or an empty Sequence is supported)", type);
}

// Whether decoding maps tokens through the GPT-2 byte alphabet (ByteLevel) or joins them with spaces (null).
bool parse_decoder(const nlohmann::json& decoder) {
  if (decoder.is_null()) return false;
  const std::string type = decoder.at("type").get<std::string>();
  if (type == "ByteLevel") return true;
  fail("tokenizer.json: unsupported decoder \"{}\" (supported: ByteLevel or null)", type);
}

void check_post_processor(const nlohmann::json& post_processor) {
  if (post_processor.is_null()) return;
  const std::string type = post_processor.at("type").get<std::string>();
  // ByteLevel post-processing only trims offsets; ids are unchanged.
  if (type != "ByteLevel") {
    fail("tokenizer.json: unsupported post_processor \"{}\" (supported: ByteLevel or null)", type);
  }
}

// HF's ByteLevel decoder per token: map every character back to its byte, or keep the token's
// UTF-8 as is when some character is outside the byte alphabet.
std::string byte_level_token_bytes(const std::string& token) {
  std::string bytes;
  bytes.reserve(token.size());
  if (utf8::find_invalid_byte(token) != std::string_view::npos) return token;
  size_t position = 0;
  while (position < token.size()) {
    const int byte = utf8::byte_from_code_point(utf8::decode_next(token, position));
    if (byte < 0) return token;
    bytes.push_back(static_cast<char>(byte));
  }
  return bytes;
}

std::optional<std::string> token_content(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  fail("tokenizer_config.json: \"{}\" must be a string or an object with \"content\", found {}", key, json_excerpt(*it));
}

}  // namespace

struct Tokenizer::Impl {
  BpeModel model;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added_tokens;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized = true
  StringToId added_to_id;
  std::vector<std::string> id_to_string;  // token string as in tokenizer.json
  std::vector<std::string> id_to_bytes;   // decoded bytes
  std::vector<bool> id_is_special;
  std::vector<bool> id_is_known;
  bool byte_level_decoder = false;
  std::optional<int32_t> bos, eos;
  bool add_bos = false;
  const std::string empty;

  explicit Impl(BpeModel bpe) : model(std::move(bpe)) {}

  void encode_text(std::string_view text, std::vector<int32_t>& ids) const;
  // Appends the added-token segments of text[start, end) (tokens and the plain text between them).
  void split_added(std::string_view text, size_t start, size_t end, std::vector<TextSegment>& out) const;
};

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& ids) const {
  thread_local std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenizer.split(text, pieces, storage);
  const bool byte_level = pre_tokenizer.byte_level();
  for (std::string_view piece : pieces) model.encode_word(piece, byte_level, ids);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_text_file(tokenizer_json, kTokenizerFileLimit, "tokenizer"), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view source) {
  const nlohmann::json config = parse_json(tokenizer_json, source);
  try {
    if (!config.is_object() || !config.contains("model")) {
      fail("expected an object with a \"model\" field");
    }
    check_normalizer(config.value("normalizer", nlohmann::json()));
    check_post_processor(config.value("post_processor", nlohmann::json()));
    auto impl = std::make_unique<Impl>(BpeModel::from_json(config.at("model")));
    impl->pre_tokenizer = PreTokenizer::from_json(config.value("pre_tokenizer", nlohmann::json()));
    impl->byte_level_decoder = parse_decoder(config.value("decoder", nlohmann::json()));

    // HF re-derives added-token ids on load (AddedVocabulary::add_tokens) instead of trusting
    // the "id" fields: content already in the model vocab keeps that id, new content gets the
    // next free id after the model vocab. The JSON ids normally agree; mirror HF when not.
    const auto model_vocab_size = static_cast<int64_t>(impl->model.vocab().size());
    int64_t max_added_id = -1;
    for (const auto& entry : config.value("added_tokens", nlohmann::json::array())) {
      AddedToken token;
      token.content = entry.at("content").get<std::string>();
      if (token.content.empty()) continue;
      token.special = entry.value("special", false);
      token.normalized = entry.value("normalized", !token.special);
      token.lstrip = entry.value("lstrip", false);
      token.rstrip = entry.value("rstrip", false);
      token.single_word = entry.value("single_word", false);
      if (const auto it = impl->added_to_id.find(token.content); it != impl->added_to_id.end()) {
        token.id = it->second;  // repeated content: same id, later flags win
        for (AddedToken& existing : impl->added_tokens)
          if (existing.content == token.content) existing = token;
        continue;
      }
      if (const auto it = impl->model.vocab().find(token.content); it != impl->model.vocab().end()) {
        token.id = it->second;
      } else if (max_added_id < 0) {
        token.id = static_cast<int32_t>(model_vocab_size);
      } else {
        token.id = static_cast<int32_t>(max_added_id >= model_vocab_size ? max_added_id + 1 : model_vocab_size);
      }
      max_added_id = std::max<int64_t>(max_added_id, token.id);
      impl->added_to_id[token.content] = token.id;
      impl->added_tokens.push_back(std::move(token));
    }
    std::vector<const AddedToken*> raw, normalized;
    for (const AddedToken& token : impl->added_tokens) {
      (token.normalized ? normalized : raw).push_back(&token);
    }
    impl->raw_matcher = AddedTokenMatcher(std::move(raw));
    impl->normalized_matcher = AddedTokenMatcher(std::move(normalized));

    int32_t max_id = -1;
    for (const auto& [token, id] : impl->model.vocab()) max_id = std::max(max_id, id);
    for (const AddedToken& token : impl->added_tokens) max_id = std::max(max_id, token.id);
    // Ids index tables: a sparse id far past the entries would make them huge (2^31 entries).
    const size_t entries = impl->model.vocab().size() + impl->added_tokens.size();
    if (static_cast<size_t>(max_id) >= 2 * entries + 1024)
      fail("token id {} is far past the {} tokens defined (ids must be dense)", max_id, entries);
    const size_t size = static_cast<size_t>(max_id + 1);
    impl->id_to_string.resize(size);
    impl->id_is_special.resize(size, false);
    impl->id_is_known.resize(size, false);
    for (const auto& [token, id] : impl->model.vocab()) {
      impl->id_to_string[id] = token;
      impl->id_is_known[id] = true;
    }
    // Added tokens take precedence for id -> string, as HF's decode looks them up first.
    for (const AddedToken& token : impl->added_tokens) {
      impl->id_to_string[token.id] = token.content;
      impl->id_is_known[token.id] = true;
      impl->id_is_special[token.id] = token.special;
    }
    impl->id_to_bytes.resize(size);
    for (size_t id = 0; id < size; ++id) {
      impl->id_to_bytes[id] = impl->byte_level_decoder ? byte_level_token_bytes(impl->id_to_string[id])
                                                       : impl->id_to_string[id];
    }
    return Tokenizer(std::move(impl));
  } catch (const nlohmann::json::exception& error) {
    fail("tokenizer: {} has an unexpected structure: {}", source, error.what());
  } catch (const Error& error) {
    fail("tokenizer: loading {}: {}", source, error.what());
  }
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  Tokenizer tokenizer = from_file(dir / "tokenizer.json");
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (auto text = read_text_file_if_exists(config_path, kTokenizerConfigFileLimit, "tokenizer config")) {
    tokenizer.apply_config(*text, config_path.string());
  }
  return tokenizer;
}

void Tokenizer::apply_config(std::string_view tokenizer_config_json, std::string_view source) {
  const nlohmann::json config = parse_json(tokenizer_config_json, source);
  if (!config.is_object()) fail("{}: expected a JSON object", source);
  auto resolve = [&](const char* key) -> std::optional<int32_t> {
    std::optional<std::string> content;
    try {
      content = token_content(config, key);
    } catch (const nlohmann::json::exception& error) {
      fail("{}: {} has an unexpected structure: {}", source, key, error.what());
    }
    if (!content) return std::nullopt;
    const std::optional<int32_t> id = token_to_id(*content);
    if (!id) fail("{}: {} \"{}\" is not a token of tokenizer.json", source, key, *content);
    return id;
  };
  impl_->bos = resolve("bos_token");
  impl_->eos = resolve("eos_token");
  const auto add_bos = config.find("add_bos_token");
  impl_->add_bos = add_bos != config.end() && add_bos->is_boolean() && add_bos->get<bool>();
  if (impl_->add_bos && !impl_->bos) fail("{}: add_bos_token is true but no bos_token is given", source);
}

void Tokenizer::Impl::split_added(std::string_view text, size_t start, size_t end, std::vector<TextSegment>& out) const {
  if (end <= start) return;
  // 1. Non-normalized added tokens on the raw text, 2. normalized ones on the rest (our
  // normalizer is the identity).
  thread_local std::vector<TextSegment> raw_segments;
  raw_segments.clear();
  raw_matcher.split(text, start, end, raw_segments);
  for (const TextSegment& raw : raw_segments) {
    if (raw.token_id >= 0)
      out.push_back(raw);
    else
      normalized_matcher.split(text, raw.start, raw.end, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const { return encode(text, {}); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, std::span<const Range> plain) const {
  if (const size_t bad = utf8::find_invalid_byte(text); bad != std::string_view::npos) {
    fail("tokenizer: encode expects valid UTF-8, found an invalid byte 0x{:02X} at offset {}",
         static_cast<unsigned char>(text[bad]), bad);
  }
  thread_local std::vector<TextSegment> segments;
  segments.clear();
  size_t cursor = 0;
  for (const Range& range : plain) {
    if (range.begin < cursor || range.end < range.begin || range.end > text.size())
      fail("tokenizer: plain-text range [{}, {}) is out of order or outside the {}-byte text", range.begin, range.end,
           text.size());
    impl_->split_added(text, cursor, range.begin, segments);
    if (range.end > range.begin) segments.push_back({range.begin, range.end, -1});
    cursor = range.end;
  }
  impl_->split_added(text, cursor, text.size(), segments);

  // 3. Pre-tokenize and BPE the plain text; neighbouring plain segments form one run.
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].token_id >= 0) {
      ids.push_back(segments[i].token_id);
      continue;
    }
    const size_t begin = segments[i].start;
    size_t end = segments[i].end;
    while (i + 1 < segments.size() && segments[i + 1].token_id < 0 && segments[i + 1].start == end) end = segments[++i].end;
    impl_->encode_text(text.substr(begin, end - begin), ids);
  }
  return ids;
}

std::vector<std::string> Tokenizer::added_token_contents() const {
  std::vector<std::string> out;
  for (const AddedToken& token : impl_->added_tokens) out.push_back(token.content);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::vector<int32_t> Tokenizer::encode_with_bos(std::string_view text) const {
  std::vector<int32_t> ids = encode(text);
  if (impl_->add_bos && impl_->bos) ids.insert(ids.begin(), *impl_->bos);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_is_known.size() || !impl_->id_is_known[id]) continue;
    if (skip_special_tokens && impl_->id_is_special[id]) continue;
    if (!impl_->byte_level_decoder && !first) bytes.push_back(' ');
    bytes += impl_->id_to_bytes[id];
    first = false;
  }
  return utf8::repair_lossy(bytes);
}

size_t Tokenizer::vocab_size() const { return impl_->id_to_string.size(); }

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_bytes.size()) return impl_->empty;
  return impl_->id_to_bytes[id];
}

const std::string& Tokenizer::token_string(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_string.size()) return impl_->empty;
  return impl_->id_to_string[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token_string) const {
  if (const auto it = impl_->added_to_id.find(token_string); it != impl_->added_to_id.end()) return it->second;
  if (const auto it = impl_->model.vocab().find(token_string); it != impl_->model.vocab().end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_is_special.size() && impl_->id_is_special[id];
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }

}  // namespace deepinfer
