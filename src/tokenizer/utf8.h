#pragma once
// UTF-8 helpers shared by the tokenizer: validation, lossy repair with the same replacement
// rule as Rust's String::from_utf8_lossy (one U+FFFD per maximal invalid subpart), and the
// GPT-2 byte <-> character table used by ByteLevel pre-tokenizers and decoders.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::utf8 {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// What starts at one position of a byte string.
struct SequenceScan {
  enum class Kind { kComplete, kInvalid, kTruncated } kind;
  // kComplete: bytes in the character. kInvalid: bytes in the maximal invalid subpart (>= 1),
  // which becomes one U+FFFD. kTruncated: bytes left, a valid but unfinished prefix.
  size_t length;
};
SequenceScan scan_sequence(std::string_view bytes, size_t position);

// Offset of the first byte that is not part of valid UTF-8, or std::string_view::npos.
size_t find_invalid_byte(std::string_view bytes);

// Valid UTF-8 with every maximal invalid subpart (including a truncated tail) replaced by U+FFFD.
std::string repair_lossy(std::string_view bytes);

// Decodes the character at `position` of valid UTF-8 and advances `position` past it.
uint32_t decode_next(std::string_view valid, size_t& position);
void append_code_point(std::string& out, uint32_t code_point);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_white_space(uint32_t code_point);

// GPT-2 byte-level alphabet: every byte maps to one printable code point.
const std::array<uint32_t, 256>& byte_to_code_point();
// Inverse of byte_to_code_point(); -1 for code points outside the alphabet.
int byte_from_code_point(uint32_t code_point);

}  // namespace deepinfer::utf8
