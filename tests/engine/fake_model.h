#pragma once
// A deterministic CausalLM for engine tests and benchmarks. It keeps real state in the pool, so a
// scheduling mistake shows up in the tokens:
//   - each position's token is written into its block (entry p of block p / block_tokens), and the
//     last `window` tokens into a ring in the slot, plus a running hash of the whole context;
//   - every forward checks that block tables cover the positions, that no block is used twice in
//     a step, that positions continue the sequence's state, and that the slot's ring agrees with
//     the blocks (a slot or block that belongs to another sequence, or a lost recompute, fails);
//   - logits are a hash of the entire context (position 0 on), so any token lost, repeated or
//     reordered changes them. reference_logits() recomputes them from scratch.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "kv/state_layout.h"
#include "kv/state_pool.h"
#include "model/model.h"
#include "sampling/random.h"

namespace deepinfer::engine::testing {

struct FakeModelOptions {
  int64_t vocab = 64;
  int64_t context = 4096;    // max_position_embeddings
  int64_t block_tokens = 8;  // positions per pool block
  int64_t window = 8;        // ring rows checked against the blocks
  int64_t eos_after = -1;    // EOS gets the top logit once the context holds this many tokens
};

class FakeModel : public model::CausalLM {
 public:
  static constexpr uint64_t kSeed = 0x1234;

  explicit FakeModel(FakeModelOptions options = {}) : options_(options) {
    config_.model_type = "fake";
    config_.vocab_size = options.vocab;
    config_.eos_token_ids = {1};
    config_.max_position_embeddings = options.context;
    // Layer 0: the token ring [window] and a rate-1 "compressor" whose entries are the tokens.
    // Layer 1: the running context hash, 16 bits per float.
    std::vector<kv::LayerStateSpec> specs(2);
    specs[0].window = options.window;
    specs[0].head_dim = 1;
    specs[0].compressor = kv::CompressorSpec{1, 1, false};
    specs[1].window = 4;
    specs[1].head_dim = 1;
    layout_ = kv::plan_layout(specs, options.block_tokens);
  }

  const io::ModelConfig& config() const override { return config_; }
  const kv::StateLayout& state_layout() const override { return layout_; }
  std::vector<model::ParameterGroup> parameter_summary() const override { return {}; }
  model::StateFootprint state_footprint() const override { return {}; }
  backend::Backend& backend() const override {
    static const std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend();
    return *cpu;
  }

  void forward(const model::ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const override {
    const auto t0 = std::chrono::steady_clock::now();
    const backend::StateStorage st = pool.storage();
    const auto& ring = layout_.layers[0].window;
    const auto& entries = *layout_.layers[0].compressor;
    const auto& hash_at = layout_.layers[1].window;
    std::vector<uint64_t> row_hash(batch.tokens.size());
    std::unordered_set<int32_t> blocks_seen, slots_seen;
    ++forward_calls;
    last_tokens = batch.num_tokens();
    last_seqs = static_cast<int64_t>(batch.seqs.size());
    max_tokens_per_call = std::max(max_tokens_per_call, last_tokens);
    if (record_sizes) forward_sizes.push_back(last_tokens);
    for (const auto& s : batch.seqs) {
      DEEPINFER_CHECK(s.slot >= 0 && s.slot < pool.num_slots(), "fake model: slot {} out of range", s.slot);
      DEEPINFER_CHECK(slots_seen.insert(s.slot).second, "fake model: slot {} used twice in one step", s.slot);
      DEEPINFER_CHECK(static_cast<int64_t>(s.blocks.size()) >= layout_.blocks_for(s.start + s.count),
                      "fake model: {} blocks do not cover positions up to {}", s.blocks.size(), s.start + s.count);
      for (size_t i = 0; i < s.blocks.size(); ++i) {
        const int32_t b = s.blocks[i];
        DEEPINFER_CHECK(b >= 0 && b < pool.num_blocks(), "fake model: block {} out of range", b);
        // Blocks of a prefix-cache hit are shared read-only; every block written is this sequence's alone.
        if (static_cast<int64_t>(i + 1) * layout_.block_tokens <= s.cached_until) continue;
        DEEPINFER_CHECK(blocks_seen.insert(b).second, "fake model: block {} used twice in one step", b);
      }
      float* slot = st.slot(s.slot);
      float* ring_rows = slot + ring.slot_offset;
      float* hash_words = slot + hash_at.slot_offset;
      auto entry = [&](int64_t p) -> float& { return *st.entry(s, entries, p); };
      // The context hash lives in the slot; a bounded replay (prefix-cache hit) rebuilds it from
      // the window floor, as the real model rebuilds its window there.
      uint64_t h = kSeed;
      if (s.start > s.window_floor) {
        h = 0;
        for (int k = 0; k < 4; ++k) h |= static_cast<uint64_t>(hash_words[k]) << (16 * k);
        for (int64_t p = std::max<int64_t>(s.window_floor, s.start - options_.window); p < s.start; ++p)
          DEEPINFER_CHECK(ring_rows[p % options_.window] == entry(p),
                          "fake model: slot {} does not hold the sequence whose blocks it was given (position {})",
                          s.slot, p);
      }
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t t = s.begin + i, p = s.start + i;
        DEEPINFER_CHECK(batch.positions[static_cast<size_t>(t)] == p, "fake model: token {} at position {}, expected {}",
                        t, batch.positions[static_cast<size_t>(t)], p);
        const int32_t token = batch.tokens[static_cast<size_t>(t)];
        if (p >= s.cached_until) entry(p) = static_cast<float>(token);  // cached blocks are read-only
        DEEPINFER_CHECK(entry(p) == static_cast<float>(token), "fake model: cached block entry at {} is not the token",
                        p);
        ring_rows[p % options_.window] = static_cast<float>(token);
        h = step_hash(h, token);
        row_hash[static_cast<size_t>(t)] = h;
      }
      for (int k = 0; k < 4; ++k) hash_words[k] = static_cast<float>((h >> (16 * k)) & 0xFFFF);
    }
    logits.clear();
    logits.reserve(batch.logit_rows.size() * static_cast<size_t>(options_.vocab));
    for (int64_t r : batch.logit_rows) {
      const auto row = logits_from(row_hash[static_cast<size_t>(r)], batch.positions[static_cast<size_t>(r)] + 1);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Next-token logits after `context`, from scratch.
  std::vector<float> reference_logits(std::span<const int32_t> context) const {
    uint64_t h = kSeed;
    for (int32_t t : context) h = step_hash(h, t);
    return logits_from(h, static_cast<int64_t>(context.size()));
  }

  mutable int64_t forward_calls = 0, last_tokens = 0, last_seqs = 0, max_tokens_per_call = 0;
  mutable double forward_seconds = 0;
  bool record_sizes = true;
  mutable std::vector<int64_t> forward_sizes;  // tokens per forward call

 private:
  static uint64_t step_hash(uint64_t h, int32_t token) {
    return sampling::mix64(h ^ (static_cast<uint64_t>(token) + 1)) & 0xFFFFFFFFFFFFull;  // 48 bits
  }
  std::vector<float> logits_from(uint64_t h, int64_t context_length) const {
    std::vector<float> row(static_cast<size_t>(options_.vocab));
    for (size_t v = 0; v < row.size(); ++v) row[v] = static_cast<float>(sampling::mix64(h + v) % 1000) / 250.0f;
    row[1] = -5.0f;  // EOS unlikely unless forced
    if (options_.eos_after >= 0 && context_length >= options_.eos_after) row[1] = 100.0f;
    return row;
  }

  FakeModelOptions options_;
  io::ModelConfig config_;
  kv::StateLayout layout_;
};

}  // namespace deepinfer::engine::testing
