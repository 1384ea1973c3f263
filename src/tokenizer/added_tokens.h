#pragma once
// Added tokens (tokenizer.json "added_tokens") and how HF finds them in text: leftmost-longest
// matching, then single_word / lstrip / rstrip adjustments (AddedVocabulary::find_matches).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A piece of text after added-token extraction: either an added token or plain text to encode.
struct TextSegment {
  size_t start = 0, end = 0;
  int32_t token_id = -1;  // -1: plain text
};

// Finds a fixed set of added tokens in text (one matcher per normalized / non-normalized set).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<const AddedToken*> tokens);

  bool empty() const { return tokens_.empty(); }
  // Splits text[start, end) into segments (in order, covering it) and appends them to `out`.
  void split(std::string_view text, size_t start, size_t end, std::vector<TextSegment>& out) const;

 private:
  // Byte trie; children are few per node, so a sorted edge list is compact and fast enough.
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token_index = -1;  // index into tokens_ when a token ends here
  };
  int32_t child(int32_t node, unsigned char byte) const;
  // Longest token starting at `position` of text (bounded by `end`): token index or -1, and length.
  std::pair<int32_t, size_t> longest_match(std::string_view text, size_t position, size_t end) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace deepinfer
