// CPU reference: the ops that read and write paged model state — compressors, the lightning
// indexer, the sliding-window ring and sparse attention over window + compressed entries.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/attention_keys.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {

using backend::CompressorLayout;
using backend::SeqSlice;
using backend::StateStorage;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_state(const StateStorage& state, std::span<const SeqSlice> seqs, int64_t tokens) {
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  backend::check_slices(seqs, tokens, state);
}

// A compressor's view of one sequence: rows of the current step come from the projections, rows
// of the unfinished window that began before the step from the slot.
struct CompressorRows {
  const CompressorLayout& c;
  const SeqSlice& seq;
  const float* kv;    // step projections [T, width]
  const float* gate;  // [T, width]
  float* slot;        // this compressor's state inside the sequence's slot

  float* pending_kv() const { return slot; }
  float* pending_gate() const { return slot + c.rate * c.width; }
  float* overlap_kv() const { return slot + 2 * c.rate * c.width; }
  float* overlap_gate() const { return slot + 2 * c.rate * c.width + c.rate * c.head_dim; }
  const float* kv_row(int64_t pos) const {
    return pos >= seq.start ? kv + (seq.begin + pos - seq.start) * c.width : pending_kv() + (pos % c.rate) * c.width;
  }
  const float* gate_row(int64_t pos) const {
    return pos >= seq.start ? gate + (seq.begin + pos - seq.start) * c.width
                            : pending_gate() + (pos % c.rate) * c.width;
  }
};

}  // namespace

void CpuBackend::compress(const CompressorLayout& c, const backend::CompressorWeights& w,
                          const backend::RopeFreqs& freqs, TensorView kv, TensorView gate,
                          std::span<const SeqSlice> seqs, const StateStorage& state) {
  const int64_t T = kv.numel() / std::max<int64_t>(c.width, 1);
  DEEPINFER_CHECK(kv.numel() == T * c.width && gate.numel() == T * c.width,
                  "compress: projections must be [T, {}]", c.width);
  check_state(state, seqs, T);
  const int64_t rate = c.rate, hd = c.head_dim, width = c.width;
  const int64_t slots = c.overlap ? 2 * rate : rate;
  const float* kvs = kv.f32();
  const float* gates = gate.f32();

  // Every window that completes in this step, over all sequences.
  struct Window {
    size_t seq;
    int64_t w;
  };
  std::vector<Window> windows;
  for (size_t i = 0; i < seqs.size(); ++i) {
    // Windows ending inside cached blocks already have their entries there (bounded replay).
    const int64_t first = std::max(seqs[i].start / rate, seqs[i].cached_until / rate);
    for (int64_t win = first; win < (seqs[i].start + seqs[i].count) / rate; ++win) windows.push_back({i, win});
  }

  ThreadPool::global().parallel_for(windows.size(), [&](size_t b, size_t e) {
    thread_local std::vector<float> slot_kv, slot_gate, entry, cos, sin;
    slot_kv.resize(static_cast<size_t>(slots));
    slot_gate.resize(static_cast<size_t>(slots));
    entry.resize(static_cast<size_t>(hd));
    cos.resize(static_cast<size_t>(freqs.half()));
    sin.resize(static_cast<size_t>(freqs.half()));
    for (size_t i = b; i < e; ++i) {
      const SeqSlice& seq = seqs[windows[i].seq];
      const int64_t win = windows[i].w;
      const CompressorRows rows{c, seq, kvs, gates, state.slot(seq.slot) + c.slot_offset};
      // The previous window's first half: in the slot if it completed before this step.
      const bool prior_in_slot = win * rate <= seq.start;
      for (int64_t ch = 0; ch < hd; ++ch) {
        // Gate logits with the learned position bias, per channel; softmax over the window's slots.
        // CSA: slots [0, rate) hold the previous window's first half (none before the first
        // window), slots [rate, 2 rate) this window's second half.
        for (int64_t s = 0; s < rate; ++s) {
          const int64_t col = c.overlap ? hd + ch : ch;
          const int64_t slot = c.overlap ? rate + s : s;
          const int64_t pos = win * rate + s;
          slot_kv[static_cast<size_t>(slot)] = rows.kv_row(pos)[col];
          slot_gate[static_cast<size_t>(slot)] = rows.gate_row(pos)[col] + w.ape[s * width + col];
          if (c.overlap) {
            if (win == 0) {
              slot_kv[static_cast<size_t>(s)] = 0.0f;
              slot_gate[static_cast<size_t>(s)] = kNegInf;
            } else if (prior_in_slot) {
              slot_kv[static_cast<size_t>(s)] = rows.overlap_kv()[s * hd + ch];
              slot_gate[static_cast<size_t>(s)] = rows.overlap_gate()[s * hd + ch];
            } else {
              const int64_t prev = (win - 1) * rate + s;
              slot_kv[static_cast<size_t>(s)] = rows.kv_row(prev)[ch];
              slot_gate[static_cast<size_t>(s)] = rows.gate_row(prev)[ch] + w.ape[s * width + ch];
            }
          }
        }
        softmax(slot_gate.data(), slots);
        float acc = 0.0f;
        for (int64_t s = 0; s < slots; ++s) acc += slot_kv[static_cast<size_t>(s)] * slot_gate[static_cast<size_t>(s)];
        entry[static_cast<size_t>(ch)] = acc;
      }
      cpu::rms_norm(entry.data(), 1, hd, w.norm, w.norm_eps);
      rope_angles(freqs, win * rate, cos.data(), sin.data());
      rope_interleaved(entry.data(), hd, cos.data(), sin.data(), freqs.half());
      std::copy(entry.begin(), entry.end(), state.entry(seq, c, win));
    }
  });

  // Then the slot: the last completed window's first half becomes the overlap, and the tokens of
  // the window still open are kept. (Entries above read the old slot, so this comes after.)
  for (const SeqSlice& seq : seqs) {
    const CompressorRows rows{c, seq, kvs, gates, state.slot(seq.slot) + c.slot_offset};
    const int64_t end = seq.start + seq.count, open = end / rate * rate;
    if (c.overlap && end / rate > seq.start / rate) {
      const int64_t last = end / rate - 1;
      for (int64_t s = 0; s < rate; ++s)
        for (int64_t ch = 0; ch < hd; ++ch) {
          rows.overlap_kv()[s * hd + ch] = rows.kv_row(last * rate + s)[ch];
          rows.overlap_gate()[s * hd + ch] = rows.gate_row(last * rate + s)[ch] + w.ape[s * width + ch];
        }
    }
    for (int64_t pos = std::max(seq.start, open); pos < end; ++pos) {
      std::copy_n(kvs + (seq.begin + pos - seq.start) * width, width, rows.pending_kv() + (pos % rate) * width);
      std::copy_n(gates + (seq.begin + pos - seq.start) * width, width, rows.pending_gate() + (pos % rate) * width);
    }
  }
}

void CpuBackend::indexer_select(const CompressorLayout& keys, TensorView q, TensorView head_weights,
                                float head_weight_scale, float score_scale, int64_t top_k, backend::TopKTies ties,
                                std::span<const SeqSlice> seqs, const StateStorage& state, TensorView selected) {
  DEEPINFER_CHECK(q.rank == 3, "indexer_select: q must be [T, heads, head_dim]");
  const int64_t T = q.dim(0), nh = q.dim(1), hd = q.dim(2), rate = keys.rate;
  DEEPINFER_CHECK(hd == keys.head_dim && head_weights.numel() == T * nh && selected.numel() == T * top_k,
                  "indexer_select: shapes do not match (T = {}, heads = {}, head_dim = {} vs keys {}, top_k = {})", T,
                  nh, hd, keys.head_dim, top_k);
  check_state(state, seqs, T);
  const float* qs = q.f32();
  const float* ws = head_weights.f32();
  int32_t* out = selected.i32();
  constexpr int64_t kEntryChunk = 64;
  constexpr int64_t kScoreBudget = int64_t{1} << 24;  // floats of scores held at once (64 MB)

  // Work spans all sequences of the step at once (a decode step of 32 sequences is one parallel
  // loop, not 32 tiny ones), in groups of tokens whose score rows fit the budget.
  auto& seq_of = routed_tokens_;
  seq_of.resize(static_cast<size_t>(T));
  for (size_t i = 0; i < seqs.size(); ++i)
    std::fill_n(seq_of.begin() + seqs[i].begin, seqs[i].count, static_cast<int32_t>(i));
  auto entries_of = [&](int64_t t) {  // entries the token's sequence holds after the step
    const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
    return (seq.start + seq.count) / rate;
  };
  std::vector<int64_t> row_offset, item_offset;  // per token of the group: score row, first work item
  for (int64_t t0 = 0; t0 < T;) {
    row_offset.clear();
    item_offset.clear();
    int64_t t1 = t0, floats = 0, items = 0;
    while (t1 < T && (t1 == t0 || floats + entries_of(t1) <= kScoreBudget)) {
      row_offset.push_back(floats);
      item_offset.push_back(items);
      floats += std::max<int64_t>(entries_of(t1), 1);
      items += (entries_of(t1) + kEntryChunk - 1) / kEntryChunk;
      ++t1;
    }
    item_offset.push_back(items);
    scratch_a_.assign(static_cast<size_t>(floats), kNegInf);
    // Scores, threaded over (token, block of 64 entries): one row of q . K^T per head.
    ThreadPool::global().parallel_for(static_cast<size_t>(items), [&](size_t b, size_t e) {
      size_t lt = static_cast<size_t>(std::upper_bound(item_offset.begin(), item_offset.end(), static_cast<int64_t>(b)) -
                                      item_offset.begin()) - 1;
      for (size_t item = b; item < e; ++item) {
        while (static_cast<int64_t>(item) >= item_offset[lt + 1]) ++lt;
        const int64_t t = t0 + static_cast<int64_t>(lt), chunk = static_cast<int64_t>(item) - item_offset[lt];
        const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
        const int64_t count = entries_of(t), pos = seq.start + (t - seq.begin);
        const int64_t visible = std::min((pos + 1) / rate, count);
        const int64_t j1 = std::min(visible, (chunk + 1) * kEntryChunk);
        float* row = scratch_a_.data() + row_offset[lt];
        for (int64_t j = chunk * kEntryChunk; j < j1; ++j) {
          const float* k = state.entry(seq, keys, j);
          float s = 0.0f;
          for (int64_t h = 0; h < nh; ++h) {
            const float d = dot(qs + (t * nh + h) * hd, k, hd);
            s += std::max(d, 0.0f) * score_scale * (ws[t * nh + h] * head_weight_scale);
          }
          row[j] = s;
        }
      }
    });
    ThreadPool::global().parallel_for(static_cast<size_t>(t1 - t0), [&](size_t b, size_t e) {
      for (size_t lt = b; lt < e; ++lt) {
        const int64_t t = t0 + static_cast<int64_t>(lt);
        const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
        const int64_t count = entries_of(t), pos = seq.start + (t - seq.begin);
        const int64_t visible = std::min((pos + 1) / rate, count);
        // The reference ranks every entry its call holds, hidden ones at -inf, and drops those picks.
        const int64_t ranked = ties == backend::TopKTies::Reference ? count : visible;
        const std::span<const float> scores(scratch_a_.data() + row_offset[lt], static_cast<size_t>(ranked));
        auto picks =
            ties == backend::TopKTies::Reference ? torch_top_k_indices(scores, top_k) : top_k_indices(scores, top_k);
        std::erase_if(picks, [&](int32_t j) { return j >= visible; });
        std::sort(picks.begin(), picks.end());
        int32_t* row = out + t * top_k;
        std::fill(row, row + top_k, -1);
        std::copy(picks.begin(), picks.end(), row);
      }
    });
    t0 = t1;
  }
}

void CpuBackend::store_window(const backend::WindowLayout& wl, TensorView kv, std::span<const SeqSlice> seqs,
                              const StateStorage& state) {
  const int64_t hd = wl.head_dim, W = wl.window, T = kv.numel() / std::max<int64_t>(hd, 1);
  check_state(state, seqs, T);
  const float* kvs = kv.f32();
  for (const SeqSlice& seq : seqs) {
    float* ring = state.slot(seq.slot) + wl.slot_offset;
    for (int64_t i = std::max<int64_t>(0, seq.count - W); i < seq.count; ++i)
      std::copy_n(kvs + (seq.begin + i) * hd, hd, ring + ((seq.start + i) % W) * hd);
  }
}

void CpuBackend::sparse_attention(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                                  const CompressorLayout* entries, TensorView selected, const float* sink,
                                  float scale, std::span<const SeqSlice> seqs, const StateStorage& state,
                                  TensorView out) {
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == wl.head_dim, "sparse_attention: q must be [T, heads, {}]", wl.head_dim);
  const int64_t T = q.dim(0), H = q.dim(1), hd = q.dim(2), W = wl.window;
  DEEPINFER_CHECK(kv.numel() == T * hd && out.numel() == T * H * hd, "sparse_attention: kv / out shapes do not match");
  check_state(state, seqs, T);
  const bool use_selection = entries && !selected.empty();
  const int64_t k_sel = use_selection ? selected.numel() / std::max<int64_t>(T, 1) : 0;
  auto& seq_of = routed_tokens_;
  seq_of.resize(static_cast<size_t>(T));
  for (size_t i = 0; i < seqs.size(); ++i)
    std::fill_n(seq_of.begin() + seqs[i].begin, seqs[i].count, static_cast<int32_t>(i));
  const float* qs = q.f32();
  const float* kvs = kv.f32();
  const int32_t* sel = use_selection ? selected.i32() : nullptr;
  float* os = out.f32();

  // One work item per (token, group of heads): the shared KV head is read once for the group.
  const int64_t group = std::min<int64_t>(H, 16), groups = (H + group - 1) / group;
  ThreadPool::global().parallel_for(static_cast<size_t>(T * groups), [&](size_t b, size_t e) {
    thread_local std::vector<float> logits;
    thread_local std::vector<const float*> keys;
    for (size_t item = b; item < e; ++item) {
      const int64_t t = static_cast<int64_t>(item) / groups, h0 = static_cast<int64_t>(item) % groups * group;
      const int64_t h1 = std::min(H, h0 + group);
      const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t pos = seq.start + (t - seq.begin);
      const float* ring = state.slot(seq.slot) + wl.slot_offset;
      keys.clear();
      append_window_keys(keys, seq, pos, W, hd, ring, kvs);
      if (use_selection) {
        append_selected_entries(keys, state, seq, *entries, sel + t * k_sel, k_sel);
      } else if (entries) {  // every completed entry (HCA)
        for (int64_t entry = 0; entry < (pos + 1) / entries->rate; ++entry)
          keys.push_back(state.entry(seq, *entries, entry));
      }
      const size_t n = keys.size(), stride = n + 1;  // the sink closes each head's row
      logits.resize(static_cast<size_t>(h1 - h0) * stride);
      for (size_t j = 0; j < n; ++j)
        for (int64_t h = h0; h < h1; ++h)
          logits[static_cast<size_t>(h - h0) * stride + j] = dot(qs + (t * H + h) * hd, keys[j], hd) * scale;
      for (int64_t h = h0; h < h1; ++h) {
        float* row = logits.data() + static_cast<size_t>(h - h0) * stride;
        row[n] = sink[h];  // the sink takes probability mass and is then dropped
        softmax(row, static_cast<int64_t>(stride));
        std::fill(os + (t * H + h) * hd, os + (t * H + h + 1) * hd, 0.0f);
      }
      for (size_t j = 0; j < n; ++j) {
        const float* v = keys[j];
        for (int64_t h = h0; h < h1; ++h) {
          const float p = logits[static_cast<size_t>(h - h0) * stride + j];
          float* o = os + (t * H + h) * hd;
          for (int64_t c = 0; c < hd; ++c) o[c] += p * v[c];
        }
      }
    }
  });
}

}  // namespace deepinfer::cpu
