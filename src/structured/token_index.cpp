#include "structured/token_index.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace deepinfer::structured {

TokenizerIndex::TokenizerIndex(Vocabulary vocabulary) : vocab_(std::move(vocabulary)) {
  const size_t n = vocab_.tokens.size();
  vocab_.special.resize(n, 0);
  for (int32_t stop : vocab_.stop_tokens) {
    DEEPINFER_CHECK(stop >= 0 && static_cast<size_t>(stop) < n, "stop token {} outside the vocabulary", stop);
  }
  // FNV-1a over lengths, bytes, flags and stop tokens.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (size_t id = 0; id < n; ++id) {
    mix(vocab_.tokens[id].size());
    for (char c : vocab_.tokens[id]) mix(static_cast<uint8_t>(c));
    mix(vocab_.special[id]);
  }
  for (int32_t stop : vocab_.stop_tokens) mix(static_cast<uint64_t>(stop) + 7);
  identity_ = h;

  std::vector<int32_t> ids;
  for (size_t id = 0; id < n; ++id) {
    if (!vocab_.special[id] && !vocab_.tokens[id].empty() && !is_stop_token(static_cast<int32_t>(id))) {
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return vocab_.tokens[a] < vocab_.tokens[b]; });
  // Build the trie in preorder: the nodes on the path of the previous token are kept open.
  std::vector<uint32_t> path;  // node index per depth - 1
  const std::string* previous = nullptr;
  for (int32_t id : ids) {
    const std::string& bytes = vocab_.tokens[id];
    max_length_ = std::max(max_length_, bytes.size());
    size_t common = 0;
    if (previous) {
      while (common < previous->size() && common < bytes.size() && (*previous)[common] == bytes[common]) ++common;
    }
    // Close nodes deeper than the common prefix.
    while (path.size() > common) {
      trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      TrieNode node{static_cast<uint8_t>(bytes[d]), static_cast<uint16_t>(d + 1), 0,
                    static_cast<uint32_t>(token_order_.size()), static_cast<uint32_t>(token_order_.size())};
      path.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back(node);
    }
    DEEPINFER_CHECK(bytes.size() < 65535, "token {} is too long", id);
    token_order_.push_back(id);
    trie_[path.back()].tokens_end = static_cast<uint32_t>(token_order_.size());
    previous = &bytes;
  }
  while (!path.empty()) {
    trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
  auto end = static_cast<uint32_t>(token_order_.size());
  trie_.push_back(TrieNode{0, 0, static_cast<uint32_t>(trie_.size() + 1), end, end});
  // Children come after their parent in preorder, so one backward pass fills every set.
  descendant_bytes_.assign(trie_.size(), ByteSet{});
  for (size_t i = trie_size(); i-- > 0;) {
    for (size_t child = i + 1; child < trie_[i].subtree_end; child = trie_[child].subtree_end) {
      descendant_bytes_[i].set(trie_[child].byte);
      descendant_bytes_[i] |= descendant_bytes_[child];
    }
  }
}

bool TokenizerIndex::is_stop_token(int32_t id) const {
  return std::find(vocab_.stop_tokens.begin(), vocab_.stop_tokens.end(), id) != vocab_.stop_tokens.end();
}

}  // namespace deepinfer::structured
