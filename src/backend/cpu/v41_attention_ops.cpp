// CPU reference: the DeepSeek-V4.1 indexer (with the hierarchical candidate filter) and sparse
// attention, in the reference's arithmetic (model.py Indexer / select_candidate_blocks, kernel.py
// sparse_attn): bf16 index scores, top-k ties to the lower entry, blocked online softmax with
// probabilities rounded to bf16 before they weight the values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kAttentionBlock = 64;  // kernel.py sparse_attn processes 64 keys per block

// Indices of the k largest values, ties to the lower index (a stable descending sort, as the
// fixture generator's top-k), -inf values included.
void stable_top_k(std::span<const float> v, int64_t k, std::vector<int32_t>& out) {
  out.resize(v.size());
  std::iota(out.begin(), out.end(), 0);
  const auto kk = static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(v.size())));
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(kk), out.end(), [&](int32_t a, int32_t b) {
    return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)] || (v[static_cast<size_t>(a)] == v[static_cast<size_t>(b)] && a < b);
  });
  out.resize(kk);
}

std::vector<int32_t> seq_of_tokens(std::span<const SeqSlice> seqs, int64_t T) {
  std::vector<int32_t> seq_of(static_cast<size_t>(T));
  for (size_t i = 0; i < seqs.size(); ++i)
    std::fill_n(seq_of.begin() + seqs[i].begin, seqs[i].count, static_cast<int32_t>(i));
  return seq_of;
}

// One query head over `keys` as kernel.py sparse_attn: online softmax over blocks of 64 keys from a
// finite floor, probabilities rounded to bf16 before PV, the sink in the denominator, bf16 output.
void attend(const float* qh, std::span<const float* const> keys, int64_t hd, float scale, float sink,
            std::vector<float>& acc, std::vector<float>& s, float* o) {
  acc.assign(static_cast<size_t>(hd), 0.0f);
  float running_max = -1e30f, sum = 0.0f;
  for (size_t k0 = 0; k0 < keys.size(); k0 += kAttentionBlock) {
    const size_t k1 = std::min(keys.size(), k0 + kAttentionBlock);
    s.resize(k1 - k0);
    float block_max = -kInf;
    for (size_t k = k0; k < k1; ++k) {
      s[k - k0] = dot(qh, keys[k], hd) * scale;
      block_max = std::max(block_max, s[k - k0]);
    }
    const float new_max = std::max(running_max, block_max);
    const float rescale = std::exp(running_max - new_max);
    sum *= rescale;
    for (float& a : acc) a *= rescale;
    float block_sum = 0.0f;
    for (size_t k = k0; k < k1; ++k) {
      const float pk = std::exp(s[k - k0] - new_max);
      block_sum += pk;
      const float pb = round_to_bf16(pk);
      const float* v = keys[k];
      for (int64_t c = 0; c < hd; ++c) acc[static_cast<size_t>(c)] += pb * v[c];
    }
    sum += block_sum;
    running_max = new_max;
  }
  sum += std::exp(sink - running_max);  // the sink takes probability mass, unscaled
  for (int64_t c = 0; c < hd; ++c) o[c] = round_to_bf16(acc[static_cast<size_t>(c)] / sum);
}

}  // namespace

void CpuBackend::indexer_select_v41(const CompressorLayout& keys, TensorView q, TensorView head_weights,
                                    const backend::IndexerV41Params& p, std::span<const SeqSlice> seqs,
                                    const StateStorage& state, TensorView candidates, TensorView selected) {
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == keys.head_dim, "indexer_select_v41: q must be [T, heads, {}]",
                  keys.head_dim);
  const int64_t T = q.dim(0), nh = q.dim(1), hd = q.dim(2), rate = keys.rate, K = p.top_k;
  const int64_t CB = p.candidate_blocks, bs = p.candidate_block_size;
  DEEPINFER_CHECK(head_weights.numel() == T * nh && selected.numel() == T * K && selected.dtype == DType::I32,
                  "indexer_select_v41: head weights must be [T, {}] and selected I32 [T, {}]", nh, K);
  DEEPINFER_CHECK(p.candidates == backend::CandidateRole::None ||
                      (CB > 0 && bs > 0 && candidates.numel() == T * CB && candidates.dtype == DType::I32),
                  "indexer_select_v41: candidates must be I32 [T, {}] with a block size", CB);
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  backend::check_slices(seqs, T, state);
  const auto seq_of = seq_of_tokens(seqs, T);
  const float* qs = q.f32();
  const float* ws = head_weights.f32();

  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    thread_local std::vector<float> scores, block_scores, w;
    thread_local std::vector<int32_t> picks, blocks;
    w.resize(static_cast<size_t>(nh));
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[tt])];
      const int64_t pos = seq.start + (t - seq.begin), visible = (pos + 1) / rate;
      for (int64_t h = 0; h < nh; ++h) w[static_cast<size_t>(h)] = round_to_bf16(ws[t * nh + h] * p.head_weight_scale);
      scores.resize(static_cast<size_t>(visible));
      for (int64_t j = 0; j < visible; ++j) {
        const float* k = state.entry(seq, keys, j);
        float s = 0.0f;  // heads summed in float32, in order, then rounded (torch's bf16 sum)
        for (int64_t h = 0; h < nh; ++h) {
          const float d = std::max(round_to_bf16(dot(qs + (t * nh + h) * hd, k, hd)), 0.0f);
          s += round_to_bf16(d * w[static_cast<size_t>(h)]);
        }
        scores[static_cast<size_t>(j)] = round_to_bf16(s);
      }
      if (p.candidates != backend::CandidateRole::None) {
        int32_t* cand = candidates.i32() + t * CB;
        if (p.candidates == backend::CandidateRole::Source) {
          // Block score = its best entry; the block of the newest visible entry is pinned in.
          const int64_t nb = (visible + bs - 1) / bs;
          block_scores.assign(static_cast<size_t>(nb), -kInf);
          for (int64_t j = 0; j < visible; ++j)
            block_scores[static_cast<size_t>(j / bs)] = std::max(block_scores[static_cast<size_t>(j / bs)], scores[static_cast<size_t>(j)]);
          if (visible > 0) block_scores[static_cast<size_t>((visible - 1) / bs)] = kInf;
          stable_top_k(block_scores, CB, blocks);
          std::fill(cand, cand + CB, -1);
          int64_t n = 0;
          for (int32_t blk : blocks)
            if (block_scores[static_cast<size_t>(blk)] > -kInf) cand[n++] = blk;
        } else {  // Filter: score only inside the source's blocks
          for (int64_t j = 0; j < visible; ++j) {
            const auto blk = static_cast<int32_t>(j / bs);
            if (std::find(cand, cand + CB, blk) == cand + CB) scores[static_cast<size_t>(j)] = -kInf;
          }
        }
      }
      stable_top_k(scores, K, picks);
      std::sort(picks.begin(), picks.end());
      int32_t* row = selected.i32() + t * K;
      std::fill(row, row + K, -1);
      std::copy(picks.begin(), picks.end(), row);
    }
  });
}

void CpuBackend::sparse_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                                      const CompressorLayout* entries, TensorView selected, const float* sink,
                                      float scale, std::span<const SeqSlice> seqs, const StateStorage& state,
                                      TensorView out) {
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == wl.head_dim, "sparse_attention_v41: q must be [T, heads, {}]",
                  wl.head_dim);
  const int64_t T = q.dim(0), H = q.dim(1), hd = q.dim(2), W = wl.window;
  DEEPINFER_CHECK(kv.numel() == T * hd && out.numel() == T * H * hd,
                  "sparse_attention_v41: kv / out shapes do not match");
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  backend::check_slices(seqs, T, state);
  const bool use_selection = entries && !selected.empty();
  const int64_t k_sel = use_selection ? selected.numel() / std::max<int64_t>(T, 1) : 0;
  const auto seq_of = seq_of_tokens(seqs, T);
  const float* qs = q.f32();
  const float* kvs = kv.f32();
  float* os = out.f32();

  ThreadPool::global().parallel_for(static_cast<size_t>(T * H), [&](size_t b, size_t e) {
    thread_local std::vector<const float*> keys;
    thread_local std::vector<float> acc, s;
    for (size_t item = b; item < e; ++item) {
      const int64_t t = static_cast<int64_t>(item) / H, h = static_cast<int64_t>(item) % H;
      const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t pos = seq.start + (t - seq.begin);
      const float* ring = state.slot(seq.slot) + wl.slot_offset;
      keys.clear();
      append_window_keys(keys, seq, pos, W, hd, ring, kvs);
      if (use_selection) append_selected_entries(keys, state, seq, *entries, selected.i32() + t * k_sel, k_sel);
      attend(qs + (t * H + h) * hd, keys, hd, scale, sink[h], acc, s, os + (t * H + h) * hd);
    }
  });
}

void CpuBackend::block_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl, const float* sink,
                                     float scale, std::span<const SeqSlice> seqs, const StateStorage& state,
                                     TensorView out) {
  DEEPINFER_CHECK(q.rank == 3 && q.dim(2) == wl.head_dim, "block_attention_v41: q must be [T, heads, {}]",
                  wl.head_dim);
  const int64_t T = q.dim(0), H = q.dim(1), hd = q.dim(2), W = wl.window;
  DEEPINFER_CHECK(kv.numel() == T * hd && out.numel() == T * H * hd, "block_attention_v41: kv / out shapes do not match");
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  const auto seq_of = seq_of_tokens(seqs, T);
  ThreadPool::global().parallel_for(static_cast<size_t>(T * H), [&](size_t b, size_t e) {
    thread_local std::vector<const float*> keys;
    thread_local std::vector<float> acc, s;
    for (size_t item = b; item < e; ++item) {
      const int64_t t = static_cast<int64_t>(item) / H, h = static_cast<int64_t>(item) % H;
      const SeqSlice& seq = seqs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const float* ring = state.slot(seq.slot) + wl.slot_offset;
      keys.clear();
      for (int64_t slot = 0; slot < std::min(W, seq.start); ++slot) keys.push_back(ring + slot * hd);
      for (int64_t j = 0; j < seq.count; ++j) keys.push_back(kv.f32() + (seq.begin + j) * hd);
      attend(q.f32() + (t * H + h) * hd, keys, hd, scale, sink[h], acc, s, out.f32() + (t * H + h) * hd);
    }
  });
}

}  // namespace deepinfer::cpu
