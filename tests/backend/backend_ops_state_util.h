#pragma once
// Shared by the state-op suites of test_backend_ops (backend_ops_state_test.cpp,
// backend_ops_attention_test.cpp): the four-layer test layout, state pools in the backend's memory
// with a host mirror, the attention step's sequences and the double-precision attention reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "backend_ops_util.h"
#include "kv/state_layout.h"
#include "kv/state_pool.h"

namespace deepinfer::backend_ops_test {

using backend::CompressorLayout;
using backend::SeqSlice;

inline const float kSentinel = [] {
  const uint32_t bits = 0x7fc0dead;  // a quiet NaN with a recognisable payload
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}();

inline int64_t comp_rate_or(const CompressorLayout* c, int64_t fallback) { return c ? c->rate : fallback; }

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Four layers: sliding only; CSA (overlapping compressor + indexer); HCA (rate 8); and a
// non-overlapping rate-4 compressor. Blocks of 8 positions, so a sequence spans several blocks.
constexpr int64_t kWindow = 5, kHeadDim = 16, kIndexDim = 8, kBlockTokens = 8;

inline kv::StateLayout test_layout(int64_t index_dim = kIndexDim) {
  std::vector<kv::LayerStateSpec> specs(4);
  for (auto& s : specs) s.window = kWindow, s.head_dim = kHeadDim;
  specs[1].compressor = kv::CompressorSpec{4, kHeadDim, true};
  specs[1].indexer = kv::CompressorSpec{4, index_dim, true};
  specs[2].compressor = kv::CompressorSpec{8, kHeadDim, false};
  specs[3].compressor = kv::CompressorSpec{4, kHeadDim, false};
  return kv::plan_layout(specs, kBlockTokens);
}

// A state pool in the backend's memory and a host mirror of it. `storage` (backend memory) is what
// the ops get; `host` addresses the mirror the same way, for filling entries and for the references.
// Both start as the sentinel; upload() sends the mirror to the backend, download() refreshes it
// from there (after every op issued so far has finished).
struct Pools {
  backend::Backend& be;
  kv::StatePool pool;
  std::vector<float> slots, blocks;  // the mirror
  backend::StateStorage storage, host;
  Pools(backend::Backend& backend, const kv::StateLayout& layout, int64_t num_slots, int64_t num_blocks)
      : be(backend),
        pool(layout, num_slots, num_blocks, backend.allocator()),
        slots(static_cast<size_t>(num_slots * layout.slot_elems), kSentinel),
        blocks(static_cast<size_t>(num_blocks * layout.block_elems), kSentinel),
        storage(pool.storage()),
        host(storage) {
    EXPECT_EQ(storage.dtype, DType::F32) << "test bug: these pools hold float32";
    host.slots = slots.data();
    host.blocks = blocks.data();
    upload();
  }
  Pools(const Pools&) = delete;
  Pools& operator=(const Pools&) = delete;

  void upload() {
    be.copy_to_backend(storage.slots, slots.data(), slots.size() * sizeof(float));
    be.copy_to_backend(storage.blocks, blocks.data(), blocks.size() * sizeof(float));
  }
  void download() {
    be.synchronize();
    be.copy_to_host(slots.data(), storage.slots, slots.size() * sizeof(float));
    be.copy_to_host(blocks.data(), storage.blocks, blocks.size() * sizeof(float));
  }
};

// Writes fill() into every channel of entry e of compressor c of the sequence.
template <class Fill>
void fill_entry(const backend::StateStorage& storage, const SeqSlice& sl, const CompressorLayout& c, int64_t e, Fill&& fill) {
  float* k = storage.entry(sl, c, e);
  for (int64_t i = 0; i < c.head_dim; ++i) k[i] = fill();
}

enum class Entries { None, All, Selected };

// The attention step, as (slot, blocks, start, count): a fresh prefill, a chunk whose window reaches
// into the ring, a decode, a chunk longer than the window.
inline const std::vector<std::tuple<int32_t, std::vector<int32_t>, int64_t, int64_t>> kAttentionParts = {
    {2, {6, 1}, 0, 4}, {0, {3, 0}, 3, 5}, {3, {9, 2, 7}, 20, 1}, {1, {5, 8, 4}, 9, 7}};

inline std::vector<SeqSlice> attention_slices() {
  std::vector<SeqSlice> out;
  int64_t begin = 0;
  for (const auto& [slot, blocks, start, count] : kAttentionParts) {
    out.push_back({begin, count, start, slot, blocks});
    begin += count;
  }
  return out;
}

inline int64_t tokens_of(const std::vector<SeqSlice>& seqs) { return seqs.empty() ? 0 : seqs.back().begin + seqs.back().count; }

// The state an attention step reads, written with fill(): per sequence, the ring rows of the
// positions before the step that its tokens can see, then every entry completed by the end of the
// step (compress runs first), entry by entry in each of `compressors` (which share one rate). Other
// rows keep the sentinel.
template <class Fill>
void fill_step_state(const backend::StateStorage& storage, const std::vector<SeqSlice>& seqs,
                     const backend::WindowLayout& wl, const std::vector<const CompressorLayout*>& compressors, Fill&& fill) {
  for (const auto& sl : seqs) {
    float* ring = storage.slot(sl.slot) + wl.slot_offset;
    for (int64_t p = std::max<int64_t>(0, sl.start - wl.window + 1); p < sl.start; ++p)
      for (int64_t c = 0; c < wl.head_dim; ++c) ring[(p % wl.window) * wl.head_dim + c] = fill();
    if (compressors.empty()) continue;
    for (int64_t e = 0; e < (sl.start + sl.count) / compressors.front()->rate; ++e)
      for (const CompressorLayout* c : compressors) fill_entry(storage, sl, *c, e, fill);
  }
}

// q [T, H, hd] over window rows (ring before the step, then the step's kv) plus entries, with a sink
// logit per head taking probability mass: the documented semantics, in double.
inline std::vector<double> ref_attention(const std::vector<float>& q, const std::vector<float>& kv, const backend::WindowLayout& wl,
                                  const CompressorLayout* entries, const std::vector<int32_t>* selected, int64_t k_sel,
                                  const std::vector<float>& sink, float scale, const std::vector<SeqSlice>& seqs,
                                  const backend::StateStorage& state, int64_t H) {
  const int64_t hd = wl.head_dim, W = wl.window;
  std::vector<double> out(q.size(), 0.0);
  for (const auto& sl : seqs) {
    const float* ring = state.slot(sl.slot) + wl.slot_offset;
    for (int64_t i = 0; i < sl.count; ++i) {
      const int64_t t = sl.begin + i, pos = sl.start + i;
      std::vector<const float*> keys;
      for (int64_t p = std::max(sl.window_floor, pos - W + 1); p <= pos; ++p)
        keys.push_back(p < sl.start ? ring + (p % W) * hd : kv.data() + (sl.begin + p - sl.start) * hd);
      if (entries && selected) {
        for (int64_t j = 0; j < k_sel; ++j)
          if (const int32_t e = (*selected)[static_cast<size_t>(t * k_sel + j)]; e >= 0) keys.push_back(state.entry(sl, *entries, e));
      } else if (entries) {
        for (int64_t e = 0; e < (pos + 1) / entries->rate; ++e) keys.push_back(state.entry(sl, *entries, e));
      }
      for (int64_t h = 0; h < H; ++h) {
        const float* qh = q.data() + (t * H + h) * hd;
        std::vector<double> logits;
        for (const float* k : keys) {
          double d = 0;
          for (int64_t c = 0; c < hd; ++c) d += static_cast<double>(qh[c]) * k[c];
          logits.push_back(d * scale);
        }
        logits.push_back(sink[static_cast<size_t>(h)]);
        ref_softmax(logits);
        for (size_t j = 0; j < keys.size(); ++j)
          for (int64_t c = 0; c < hd; ++c) out[static_cast<size_t>((t * H + h) * hd + c)] += logits[j] * keys[j][c];
      }
    }
  }
  return out;
}


}  // namespace deepinfer::backend_ops_test
