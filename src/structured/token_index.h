#pragma once
// The vocabulary as the matcher sees it: raw token bytes, special flags and stop tokens, plus a
// byte trie (in preorder) so that tokens sharing a prefix share the parsing work.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace deepinfer {
class Tokenizer;
}

namespace deepinfer::structured {

struct Vocabulary {
  std::vector<std::string> tokens;   // raw bytes per token id
  std::vector<char> special;         // 1: a control token, never part of grammar text
  std::vector<int32_t> stop_tokens;  // allowed exactly when the grammar can end (e.g. EOS)
};

class TokenizerIndex {
 public:
  struct TrieNode {
    uint8_t byte;
    uint16_t depth;          // bytes from the root, this node's byte included (>= 1)
    uint32_t subtree_end;    // index of the first node after this node's subtree
    uint32_t tokens_begin;   // into token_order(): tokens ending here, then the subtree's
    uint32_t tokens_end;     // end of the tokens ending exactly here
  };

  explicit TokenizerIndex(Vocabulary vocabulary);
  // Special tokens of the tokenizer are excluded from grammar text; EOS is the stop token.
  static std::shared_ptr<const TokenizerIndex> from_tokenizer(const Tokenizer& tokenizer);

  size_t vocab_size() const { return vocab_.tokens.size(); }
  size_t mask_words() const { return (vocab_size() + 31) / 32; }
  const std::string& token(int32_t id) const { return vocab_.tokens[id]; }
  bool is_special(int32_t id) const { return vocab_.special[id] != 0; }
  const std::vector<int32_t>& stop_tokens() const { return vocab_.stop_tokens; }
  bool is_stop_token(int32_t id) const;
  uint64_t identity() const { return identity_; }  // content hash, for compile caches

  // Trie nodes in preorder plus a sentinel (tokens_begin == token_order().size()).
  const std::vector<TrieNode>& trie() const { return trie_; }
  size_t trie_size() const { return trie_.size() - 1; }
  const std::vector<int32_t>& token_order() const { return token_order_; }
  // Every byte that appears below node i (its own byte excluded): lets a walk accept a whole
  // subtree at once when the automaton loops on all of them.
  const ByteSet& descendant_bytes(size_t i) const { return descendant_bytes_[i]; }
  size_t max_token_length() const { return max_length_; }

 private:
  Vocabulary vocab_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> token_order_;
  std::vector<ByteSet> descendant_bytes_;
  size_t max_length_ = 0;
  uint64_t identity_ = 0;
};

// Bitmask helpers: int32 words, bit (id % 32) of word (id / 32), 1 = allowed.
inline void set_mask_bit(std::span<int32_t> mask, int32_t id) {
  mask[id >> 5] = static_cast<int32_t>(static_cast<uint32_t>(mask[id >> 5]) | (1u << (id & 31)));
}
inline bool test_mask_bit(std::span<const int32_t> mask, int32_t id) {
  return (static_cast<uint32_t>(mask[id >> 5]) >> (id & 31)) & 1u;
}

}  // namespace deepinfer::structured
