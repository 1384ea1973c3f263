#pragma once
// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json, matching the `tokenizers`
// library token for token: added tokens (special / normalized / lstrip / rstrip), Split
// pre-tokenizers (PCRE2 with Unicode properties), ByteLevel pre-tokenizer and decoder.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

class Tokenizer {
 public:
  // tokenizer.json only; throws Error on a missing or malformed file.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // A model folder: tokenizer.json plus tokenizer_config.json (bos/eos tokens, add_bos_token).
  static Tokenizer from_model_dir(const std::filesystem::path& dir);
  // tokenizer.json's text; `source` names it in errors.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view source = "tokenizer.json");
  // tokenizer_config.json's text: bos_token, eos_token, add_bos_token.
  void apply_config(std::string_view tokenizer_config_json, std::string_view source = "tokenizer_config.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Encodes text. Added tokens that appear in the text are matched first (as HF does); no BOS is added.
  std::vector<int32_t> encode(std::string_view text) const;
  // encode() with BOS prepended when tokenizer_config asks for it.
  std::vector<int32_t> encode_with_bos(std::string_view text) const;
  // A byte range [begin, end) of a text.
  struct Range {
    size_t begin = 0, end = 0;
  };
  // encode(), except that no added token is matched inside or across `plain` ranges (sorted,
  // non-overlapping): their text is tokenized as ordinary text (HF's split_special_tokens), and
  // text around them keeps one BPE run. Chat prompts use it so that a message that spells
  // "<｜end▁of▁sentence｜>" never becomes the special id.
  std::vector<int32_t> encode(std::string_view text, std::span<const Range> plain) const;
  // The contents of every added token (what encode() matches as one id), longest first.
  std::vector<std::string> added_token_contents() const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  size_t vocab_size() const;  // highest id + 1 (base vocab plus added tokens)
  // The raw bytes a token stands for (after byte-level decoding); empty for unknown ids.
  const std::string& token_bytes(int32_t id) const;
  // The token's string as written in tokenizer.json (e.g. "Ġthe"); empty for unknown ids.
  const std::string& token_string(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token_string) const;
  bool is_special(int32_t id) const;  // an added token marked special

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool add_bos() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces that are always complete UTF-8: bytes of a
// character split across tokens are held back until the character is complete.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);  // the newly completed text (possibly empty)
  std::string flush();           // whatever is held back, invalid bytes replaced by U+FFFD

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer
