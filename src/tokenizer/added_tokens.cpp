#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

// HF tests word boundaries with the Rust regex \w: Alphabetic, marks, decimal digits,
// connector punctuation and joiners. PCRE2 10.42 has no \p{Alphabetic}, so spell it as letters,
// letter numbers and the non-mark Other_Alphabetic ranges (circled/squared Latin letters).
bool is_word_character(std::string_view character) {
  static const Regex word(
      R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}])");
  return word.matches_at_start(character);
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return is_word_character(text.substr(start));
}

bool starts_with_word(std::string_view text) { return !text.empty() && is_word_character(text); }

// Start of the run of whitespace that ends `text` (text.size() when there is none).
size_t leftmost_space_at_end(std::string_view text) {
  size_t index = text.size();
  size_t position = text.size();
  while (position > 0) {
    size_t start = position - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t cursor = start;
    if (!utf8::is_white_space(utf8::decode_next(text, cursor))) break;
    index = start;
    position = start;
  }
  return index;
}

// Length of the run of whitespace that starts `text`.
size_t rightmost_space_at_start(std::string_view text) {
  size_t position = 0;
  while (position < text.size()) {
    size_t cursor = position;
    if (!utf8::is_white_space(utf8::decode_next(text, cursor))) break;
    position = cursor;
  }
  return position;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t index = 0; index < tokens_.size(); ++index) {
    const std::string& content = tokens_[index]->content;
    if (content.empty()) continue;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    int32_t node = 0;
    for (unsigned char byte : content) {
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(byte, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    // Duplicate contents: the later token wins, as it does in HF's pattern table.
    nodes_[node].token_index = static_cast<int32_t>(index);
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [edge, target] : nodes_[node].children)
    if (edge == byte) return target;
  return -1;
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_match(std::string_view text, size_t position, size_t end) const {
  int32_t node = 0;
  std::pair<int32_t, size_t> best{-1, 0};
  for (size_t i = position; i < end; ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[node].token_index >= 0) best = {nodes_[node].token_index, i + 1 - position};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, size_t start, size_t end, std::vector<TextSegment>& out) const {
  if (tokens_.empty()) {
    if (end > start) out.push_back({start, end, -1});
    return;
  }
  // Offsets below are relative to the segment, mirroring HF, which matches on the segment alone.
  const std::string_view sentence = text.substr(start, end - start);
  size_t segment_start = 0;  // HF's start_offset
  size_t position = 0;
  while (position < sentence.size()) {
    if (!first_byte_[static_cast<unsigned char>(sentence[position])]) {
      ++position;
      continue;
    }
    const auto [token_index, length] = longest_match(sentence, position, sentence.size());
    if (token_index < 0) {
      ++position;
      continue;
    }
    const AddedToken& token = *tokens_[token_index];
    size_t match_start = position;
    size_t match_end = position + length;
    position = match_end;  // matches never overlap, whatever the strip flags do
    if (token.single_word) {
      const bool space_before = match_start == 0 || !ends_with_word(sentence.substr(0, match_start));
      const bool space_after = match_end == sentence.size() || !starts_with_word(sentence.substr(match_end));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) match_start = std::max(leftmost_space_at_end(sentence.substr(0, match_start)), segment_start);
    if (token.rstrip) match_end += rightmost_space_at_start(sentence.substr(match_end));
    if (match_start > segment_start) out.push_back({start + segment_start, start + match_start, -1});
    out.push_back({start + match_start, start + match_end, token.id});
    segment_start = match_end;
  }
  if (segment_start < sentence.size()) out.push_back({start + segment_start, end, -1});
}

}  // namespace deepinfer
