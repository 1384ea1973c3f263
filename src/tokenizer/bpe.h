#pragma once
// The BPE model of a tokenizer.json: vocab, ranked merges and the merge loop (lowest rank first,
// leftmost on ties, as HF's Word::merge_all). Results are cached per pre-token word in a
// bounded, lock-free per-thread cache.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deepinfer {

// Hash/equality that let unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using StringToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `model` is the "model" object of tokenizer.json (type BPE). Throws Error on bad content.
  static BpeModel from_json(const nlohmann::json& model);

  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&&) = delete;

  // Appends the ids of one pre-token. With `byte_level`, each byte of `word` is one initial
  // symbol (its GPT-2 alphabet character); otherwise each UTF-8 character is.
  void encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const;

  const StringToId& vocab() const { return vocab_; }

 private:
  BpeModel() = default;
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  void merge_symbols(std::vector<int32_t>& symbols) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  StringToId vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::array<int32_t, 256> byte_symbol_ids_{};  // id of each byte's alphabet character, -1 if absent
  std::optional<int32_t> unknown_id_;
  bool fuse_unknown_ = false;
  bool ignore_merges_ = false;

  // Keys this model's per-thread word caches (see bpe.cpp); unique per model ever created, so a
  // new model at a recycled address never sees stale entries.
  uint64_t cache_generation_ = 0;
};

}  // namespace deepinfer
