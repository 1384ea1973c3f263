#pragma once
// What Engram's n-gram hash needs besides the weights (V4.1 engram.py): the compressed token map
// derived from the tokenizer (tokens that normalise alike share an id), the per-layer hash
// multipliers (numpy's default_rng(10007 * layer) draws, reproduced exactly) and the prime buckets.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "backend/backend.h"
#include "io/deepseek_v41_config.h"

namespace deepinfer::model::deepseek_v41 {

struct CompressedTokenMap {
  std::vector<int32_t> ids;  // token id -> compressed id
  int64_t size = 0;          // distinct compressed ids
};

// engram.build_compressed_token_map over DIR/tokenizer.json: each token decoded alone (byte-level,
// invalid UTF-8 -> U+FFFD), then NFKC, NFD, accents stripped, lowercased, whitespace runs -> one
// space, stripped (a lone space kept); partial UTF-8 tokens keyed by their raw form. Ids first
// seen first. `rows` >= the tokenizer's ids (model vocabulary rows); ids it lacks decode to "".
CompressedTokenMap compressed_token_map(const std::filesystem::path& tokenizer_json, int64_t rows);

// engram.compute_hash_multipliers: per layer, max_ngram odd multipliers 2 v + 1 with v drawn by
// numpy.random.default_rng(10007 * layer).integers(0, (INT64_MAX / vocab) / 2).
std::vector<int64_t> hash_multipliers(const std::vector<int64_t>& layer_ids, int64_t max_ngram,
                                      int64_t compressed_vocab);

// Everything engram_hash takes, owned.
struct EngramTables {
  CompressedTokenMap map;
  int64_t pad_id = 0;  // compressed id of engram_pad_token_id
  std::vector<int64_t> multipliers, primes, offsets;
  int64_t max_ngram = 0, layers = 0, heads = 0;
  backend::EngramHashParams params() const {
    return {max_ngram, layers, heads, pad_id, multipliers.data(), primes.data(), offsets.data()};
  }
};

// Throws Error when the tokenizer's compressed vocabulary differs from engram_compressed_vocab_size
// (every multiplier derives from it: a mismatch would silently rehash the tables).
EngramTables load_engram_tables(const std::filesystem::path& model_dir, const io::DeepseekV41Config& config);

}  // namespace deepinfer::model::deepseek_v41
