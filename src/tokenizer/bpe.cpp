#include "tokenizer/bpe.h"
#include "core/json_excerpt.h"

#include <algorithm>
#include <array>
#include <atomic>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A direct-mapped cache of word -> ids: bounded (no eviction bookkeeping, a colliding word just
// replaces the slot) and per thread, so concurrent encodes never take a lock.
struct CacheSlot {
  size_t hash = 0;
  bool used = false;
  std::string word;
  std::vector<int32_t> ids;
};
constexpr size_t kCacheSlots = 1 << 15;
constexpr size_t kMaxCachedWordBytes = 256;

struct WordCache {
  uint64_t generation = 0;
  std::vector<CacheSlot> slots;
};

// The calling thread's cache for the model with this generation; a thread keeps caches for its
// few most recently used models.
WordCache& thread_cache(uint64_t generation) {
  thread_local std::array<WordCache, 4> caches;
  thread_local size_t next_victim = 0;
  for (WordCache& cache : caches)
    if (cache.generation == generation) return cache;
  WordCache& cache = caches[next_victim++ % caches.size()];
  cache.generation = generation;
  cache.slots.assign(kCacheSlots, CacheSlot{});
  return cache;
}

std::atomic<uint64_t> next_cache_generation{1};

void reject_if_set(const nlohmann::json& model, const char* field, const char* why) {
  const auto it = model.find(field);
  if (it == model.end() || it->is_null()) return;
  if (it->is_boolean() && !it->get<bool>()) return;
  fail("tokenizer.json: BPE option \"{}\" = {} is not supported ({})", field, it->dump(), why);
}

}  // namespace

BpeModel::BpeModel(BpeModel&& other) noexcept
    : vocab_(std::move(other.vocab_)),
      merges_(std::move(other.merges_)),
      byte_symbol_ids_(other.byte_symbol_ids_),
      unknown_id_(other.unknown_id_),
      fuse_unknown_(other.fuse_unknown_),
      ignore_merges_(other.ignore_merges_),
      cache_generation_(other.cache_generation_) {}

BpeModel BpeModel::from_json(const nlohmann::json& model) {
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") fail("tokenizer.json: model type must be \"BPE\", found \"{}\"", type);
  reject_if_set(model, "dropout", "encoding must be deterministic");
  reject_if_set(model, "continuing_subword_prefix", "only byte-level BPE is implemented");
  reject_if_set(model, "end_of_word_suffix", "only byte-level BPE is implemented");
  reject_if_set(model, "byte_fallback", "only byte-level BPE is implemented");

  BpeModel result;
  result.cache_generation_ = next_cache_generation.fetch_add(1);
  const auto& vocab = model.at("vocab");
  if (!vocab.is_object()) fail("tokenizer.json: model.vocab must be an object of token -> id, found {}", vocab.type_name());
  result.vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      fail("tokenizer.json: model.vocab[\"{}\"] must be a non-negative 32-bit id, found {}", token, json_excerpt(id));
    }
    result.vocab_.emplace(token, id.get<int32_t>());
  }

  const auto& merges = model.at("merges");
  result.merges_.reserve(merges.size());
  auto id_of = [&](const std::string& token, size_t rank) {
    const auto it = result.vocab_.find(token);
    if (it == result.vocab_.end()) fail("tokenizer.json: merge {} uses \"{}\", which is not in the vocab", rank, token);
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {  // legacy form "a b"
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        fail("tokenizer.json: merge {} must be two tokens separated by one space, found \"{}\"", rank, text);
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      fail("tokenizer.json: merge {} must be \"a b\" or [\"a\", \"b\"], found {}", rank, json_excerpt(merge));
    }
    const int32_t left_id = id_of(left, rank);
    const int32_t right_id = id_of(right, rank);
    const int32_t merged_id = id_of(left + right, rank);
    // A repeated pair keeps its last rank, like HF's HashMap insert.
    result.merges_[pair_key(left_id, right_id)] = Merge{static_cast<int32_t>(rank), merged_id};
  }

  const auto& alphabet = utf8::byte_to_code_point();
  for (int byte = 0; byte < 256; ++byte) {
    std::string character;
    utf8::append_code_point(character, alphabet[byte]);
    const auto it = result.vocab_.find(character);
    result.byte_symbol_ids_[byte] = it == result.vocab_.end() ? -1 : it->second;
  }
  if (const auto it = model.find("unk_token"); it != model.end() && !it->is_null()) {
    result.unknown_id_ = id_of(it->get<std::string>(), 0);
  }
  result.fuse_unknown_ = model.value("fuse_unk", false);
  result.ignore_merges_ = model.value("ignore_merges", false);
  return result;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::merge_symbols(std::vector<int32_t>& symbols) const {
  const int count = static_cast<int>(symbols.size());
  if (count < 2) return;
  // Scratch buffers reused across calls on this thread (long words would otherwise allocate).
  thread_local std::vector<int> previous, next;
  thread_local std::vector<char> removed;
  previous.resize(count);
  next.resize(count);
  removed.assign(count, 0);
  for (int i = 0; i < count; ++i) {
    previous[i] = i - 1;
    next[i] = i + 1 < count ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int position;
    int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  // Min-heap on (rank, position) kept in a reused buffer.
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [](const Candidate& candidate) {
    heap.push_back(candidate);
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (int i = 0; i + 1 < count; ++i) {
    if (const Merge* merge = find_merge(symbols[i], symbols[i + 1])) push({merge->rank, i, merge->merged_id});
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate top = heap.back();
    heap.pop_back();
    const int left = top.position;
    if (removed[left] || next[left] < 0) continue;
    const int right = next[left];
    // Skip entries made stale by an earlier merge of either symbol.
    const Merge* current = find_merge(symbols[left], symbols[right]);
    if (current == nullptr || current->merged_id != top.merged_id) continue;
    symbols[left] = top.merged_id;
    removed[right] = 1;
    next[left] = next[right];
    if (next[right] >= 0) previous[next[right]] = left;
    if (previous[left] >= 0) {
      if (const Merge* merge = find_merge(symbols[previous[left]], symbols[left]))
        push({merge->rank, previous[left], merge->merged_id});
    }
    if (next[left] >= 0) {
      if (const Merge* merge = find_merge(symbols[left], symbols[next[left]]))
        push({merge->rank, left, merge->merged_id});
    }
  }
  size_t kept = 0;
  for (int i = 0; i < count; ++i)
    if (!removed[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

void BpeModel::encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  CacheSlot* slot = nullptr;
  size_t hash = 0;
  if (word.size() <= kMaxCachedWordBytes) {
    hash = std::hash<std::string_view>{}(word);
    slot = &thread_cache(cache_generation_).slots[hash & (kCacheSlots - 1)];
    if (slot->used && slot->hash == hash && slot->word == word) {
      out.insert(out.end(), slot->ids.begin(), slot->ids.end());
      return;
    }
  }

  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool whole_word_done = false;
  if (ignore_merges_) {
    std::string mapped;
    if (byte_level) {
      for (unsigned char byte : word) utf8::append_code_point(mapped, utf8::byte_to_code_point()[byte]);
    } else {
      mapped = std::string(word);
    }
    if (const auto it = vocab_.find(mapped); it != vocab_.end()) {
      symbols.push_back(it->second);
      whole_word_done = true;
    }
  }
  if (!whole_word_done) {
    bool previous_unknown = false;
    auto push_symbol = [&](int32_t id) {
      if (id >= 0) {
        symbols.push_back(id);
        previous_unknown = false;
      } else if (unknown_id_) {  // characters outside the vocab become unk (fused if asked)
        if (!(fuse_unknown_ && previous_unknown)) symbols.push_back(*unknown_id_);
        previous_unknown = true;
      }  // without unk_token HF drops the character
    };
    if (byte_level) {
      for (unsigned char byte : word) push_symbol(byte_symbol_ids_[byte]);
    } else {
      size_t position = 0;
      while (position < word.size()) {
        const size_t start = position;
        utf8::decode_next(word, position);
        const auto it = vocab_.find(word.substr(start, position - start));
        push_symbol(it == vocab_.end() ? -1 : it->second);
      }
    }
    merge_symbols(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (slot != nullptr) {
    slot->used = true;
    slot->hash = hash;
    slot->word.assign(word);
    slot->ids.assign(symbols.begin(), symbols.end());
  }
}

}  // namespace deepinfer
