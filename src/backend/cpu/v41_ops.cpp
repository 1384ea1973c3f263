// CPU reference: the DeepSeek-V4.1 ops that do not read attention state — bf16 rounding, mHC
// coefficients and collapse, compressor pooling and entry stores, the V4.1 experts and Engram.
// Written from the V4.1 reference (inference/model.py, engram.py, kernel.py): where it holds a bf16
// tensor these ops round to bf16, everything in between is float32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {

using backend::EntryRef;
using backend::SeqSlice;
using backend::StateStorage;

void check_f32(const TensorView& t, const char* what) {
  DEEPINFER_CHECK(t.dtype == DType::F32 && t.device == Device::CPU && t.is_contiguous(),
                  "{}: expected a contiguous F32 CPU tensor", what);
}

void round_span(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void check_entries(std::span<const EntryRef> entries, std::span<const SeqSlice> seqs, const StateStorage& state) {
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  for (const EntryRef& e : entries)
    DEEPINFER_CHECK(e.seq == -1 || (e.seq >= 0 && static_cast<size_t>(e.seq) < seqs.size() && e.entry >= 0),
                    "entry {} of sequence {} outside the step's {} sequences", e.entry, e.seq, seqs.size());
}

}  // namespace

void CpuBackend::round_bf16(TensorView x) {
  check_f32(x, "round_bf16");
  float* d = x.f32();
  const int64_t n = x.numel();
  ThreadPool::global().parallel_for(
      static_cast<size_t>((n + 4095) / 4096), [&](size_t b, size_t e) {
        const int64_t i0 = static_cast<int64_t>(b) * 4096, i1 = std::min(n, static_cast<int64_t>(e) * 4096);
        round_span(d + i0, i1 - i0);
      });
}

void CpuBackend::mhc_coefficients(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                                  TensorView pre, TensorView post, TensorView comb) {
  for (const auto* t : {&residual, &pre, &post, &comb}) check_f32(*t, "mhc_coefficients tensor");
  const int64_t n = p.hc_mult, D = residual.last_dim(), T = residual.rows() / n, mix = (2 + n) * n;
  DEEPINFER_CHECK(residual.numel() == T * n * D && pre.numel() == T * n && post.numel() == T * n &&
                      comb.numel() == T * n * n,
                  "mhc_coefficients: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  mhc_mixes(w.fn, mix, residual.f32(), T, n * D, p.norm_eps);
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      mhc_split(scratch_b_.data() + t * mix, w, p, pre.f32() + t * n, post.f32() + t * n, comb.f32() + t * n * n);
    }
  });
}

void CpuBackend::mhc_collapse(TensorView residual, TensorView pre, TensorView out) {
  for (const auto* t : {&residual, &pre, &out}) check_f32(*t, "mhc_collapse tensor");
  const int64_t D = out.last_dim(), T = out.rows(), n = pre.numel() / std::max<int64_t>(T, 1);
  DEEPINFER_CHECK(residual.numel() == T * n * D && pre.numel() == T * n,
                  "mhc_collapse: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  const float* X = residual.f32();
  const float* ps = pre.f32();
  float* o = out.f32();
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      float* row = o + t * D;
      std::fill(row, row + D, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float pi = ps[t * n + i];
        const float* x = X + (t * n + i) * D;
        for (int64_t d = 0; d < D; ++d) row[d] += pi * x[d];
      }
    }
  });
}

void CpuBackend::compress_pool(const backend::CompressorLayout& c, TensorView kv, TensorView gate,
                               std::span<const EntryRef> entries, std::span<const SeqSlice> seqs,
                               const StateStorage& state, TensorView out) {
  check_f32(kv, "compress_pool kv");
  check_f32(gate, "compress_pool gate");
  check_f32(out, "compress_pool out");
  const int64_t rate = c.rate, hd = c.head_dim, T = kv.rows();
  DEEPINFER_CHECK(!c.overlap && c.width == hd && kv.last_dim() == hd && gate.numel() == kv.numel() &&
                      out.numel() == static_cast<int64_t>(entries.size()) * hd,
                  "compress_pool: expected kv / gate [T, {}] and out [{}, {}]", hd, entries.size(), hd);
  backend::check_slices(seqs, T, state);
  check_entries(entries, seqs, state);
  const float* kvs = kv.f32();
  const float* gates = gate.f32();
  // Rows of a group: the step's projections, or the slot's pending rows for tokens of earlier steps.
  auto row = [&](const SeqSlice& seq, const float* step_rows, int64_t pending_offset, int64_t pos) -> const float* {
    if (pos >= seq.start) return step_rows + (seq.begin + pos - seq.start) * hd;
    return state.slot(seq.slot) + c.slot_offset + pending_offset + (pos % rate) * hd;
  };
  ThreadPool::global().parallel_for(entries.size(), [&](size_t b, size_t e) {
    thread_local std::vector<float> g;
    g.resize(static_cast<size_t>(rate));
    for (size_t i = b; i < e; ++i) {
      float* o = out.f32() + static_cast<int64_t>(i) * hd;
      if (entries[i].seq < 0) {  // padding
        std::fill(o, o + hd, 0.0f);
        continue;
      }
      const SeqSlice& seq = seqs[static_cast<size_t>(entries[i].seq)];
      const int64_t first = entries[i].entry * rate;
      DEEPINFER_CHECK(first + rate <= seq.start + seq.count, "compress_pool: entry {} is not complete after the step",
                      entries[i].entry);
      for (int64_t ch = 0; ch < hd; ++ch) {
        // softmax over the group's tokens per channel, then the weighted sum in token order
        for (int64_t s = 0; s < rate; ++s) g[static_cast<size_t>(s)] = row(seq, gates, rate * hd, first + s)[ch];
        softmax(g.data(), rate);
        float acc = 0.0f;
        for (int64_t s = 0; s < rate; ++s) acc += row(seq, kvs, 0, first + s)[ch] * g[static_cast<size_t>(s)];
        o[ch] = acc;
      }
    }
  });
  // The open group of each sequence waits in the slot (after the reads above).
  for (const SeqSlice& seq : seqs) {
    float* slot = state.slot(seq.slot) + c.slot_offset;
    const int64_t end = seq.start + seq.count;
    for (int64_t pos = std::max(seq.start, end / rate * rate); pos < end; ++pos) {
      std::copy_n(kvs + (seq.begin + pos - seq.start) * hd, hd, slot + (pos % rate) * hd);
      std::copy_n(gates + (seq.begin + pos - seq.start) * hd, hd, slot + rate * hd + (pos % rate) * hd);
    }
  }
}

void CpuBackend::store_entries(const backend::CompressorLayout& c, TensorView rows, std::span<const EntryRef> entries,
                               std::span<const SeqSlice> seqs, const StateStorage& state) {
  check_f32(rows, "store_entries rows");
  DEEPINFER_CHECK(rows.numel() == static_cast<int64_t>(entries.size()) * c.head_dim,
                  "store_entries: rows hold {} values, {} entries of {} need {}", rows.numel(), entries.size(),
                  c.head_dim, static_cast<int64_t>(entries.size()) * c.head_dim);
  check_entries(entries, seqs, state);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].seq < 0) continue;  // padding
    const SeqSlice& seq = seqs[static_cast<size_t>(entries[i].seq)];
    DEEPINFER_CHECK((entries[i].entry + 1) * c.rate <= static_cast<int64_t>(seq.blocks.size()) * state.block_tokens,
                    "store_entries: entry {} beyond the block table", entries[i].entry);
    std::copy_n(rows.f32() + static_cast<int64_t>(i) * c.head_dim, c.head_dim, state.entry(seq, c, entries[i].entry));
  }
}

void CpuBackend::swiglu_v41(const backend::SwigluExpert& e, const float* x, int64_t tokens, float limit,
                            const float* weights, bool quantize, float* out) {
  const int64_t I = e.w1->rows, D = e.w1->cols;
  scratch_c_.resize(static_cast<size_t>(tokens * I));
  scratch_d_.resize(static_cast<size_t>(tokens * I));
  const float* in = x;
  if (quantize) {  // the reference's linear() quantises activations for FP8 / FP4 weights
    scratch_a_.assign(x, x + tokens * D);
    quantize_dequantize(TensorView::f32(scratch_a_.data(), {tokens, D}), backend::ActQuant::Fp8Ue8m0);
    in = scratch_a_.data();
  }
  matmul(*e.w1, in, tokens, scratch_c_.data());
  matmul(*e.w3, in, tokens, scratch_d_.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const size_t k = static_cast<size_t>(t * I + i);
      float g = round_to_bf16(scratch_c_[k]), u = round_to_bf16(scratch_d_[k]);
      if (limit > 0) {
        u = std::clamp(u, -limit, limit);
        g = std::min(g, limit);
      }
      float h = silu(g) * u;
      if (weights) h = weights[t] * h;
      scratch_c_[k] = round_to_bf16(h);
    }
  if (quantize) quantize_dequantize(TensorView::f32(scratch_c_.data(), {tokens, I}), backend::ActQuant::Fp8Ue8m0);
  matmul(*e.w2, scratch_c_.data(), tokens, out);
  round_span(out, tokens * D);
}

void CpuBackend::moe_experts_v41(const backend::MoeWeights& w, const backend::MoeV41Quant& quant, TensorView x,
                                 TensorView experts, TensorView weights, TensorView out) {
  check_f32(x, "moe_experts_v41 input");
  check_f32(out, "moe_experts_v41 output");
  const int64_t T = x.rows(), D = x.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  const auto E = static_cast<int64_t>(w.experts.size());
  const auto& by_expert = group_tokens_by_expert(experts, weights, T, K, E, "moe_experts_v41");
  float* o = out.f32();
  std::fill(o, o + T * D, 0.0f);
  std::vector<float> xe, we, ye;
  // Experts in ascending id: every token accumulates its experts in that order whatever the batch.
  for (int64_t e = 0; e < E; ++e) {
    const auto& list = by_expert[static_cast<size_t>(e)];
    if (list.empty()) continue;
    const auto n = static_cast<int64_t>(list.size());
    xe.resize(static_cast<size_t>(n * D));
    we.resize(static_cast<size_t>(n));
    ye.resize(static_cast<size_t>(n * D));
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(x.f32() + list[static_cast<size_t>(i)].first * D, D, xe.begin() + i * D);
      we[static_cast<size_t>(i)] = list[static_cast<size_t>(i)].second;
    }
    swiglu_v41(w.experts[static_cast<size_t>(e)], xe.data(), n, w.swiglu_limit, we.data(), quant.routed, ye.data());
    for (int64_t i = 0; i < n; ++i) {
      float* row = o + list[static_cast<size_t>(i)].first * D;
      for (int64_t d = 0; d < D; ++d) row[d] += ye[static_cast<size_t>(i * D + d)];
    }
  }
  ye.resize(static_cast<size_t>(T * D));
  swiglu_v41(w.shared, x.f32(), T, w.swiglu_limit, nullptr, quant.shared, ye.data());
  for (int64_t i = 0; i < T * D; ++i) o[i] = round_to_bf16(o[i] + ye[static_cast<size_t>(i)]);
}

void CpuBackend::engram_gate(TensorView residual, TensorView kv, const float* weight, float eps) {
  check_f32(residual, "engram_gate residual");
  check_f32(kv, "engram_gate kv");
  DEEPINFER_CHECK(residual.rank == 3, "engram_gate: residual must be [T, n, D]");
  const int64_t T = residual.dim(0), n = residual.dim(1), D = residual.dim(2);
  DEEPINFER_CHECK(kv.numel() == T * (n + 1) * D, "engram_gate: kv must be [T, {}]", (n + 1) * D);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      const float* key_all = kv.f32() + t * (n + 1) * D;
      const float* value = key_all + n * D;
      for (int64_t i = 0; i < n; ++i) {
        float* h = residual.f32() + (t * n + i) * D;
        const float* key = key_all + i * D;
        const float* wi = weight + i * D;
        float hh = 0, kk = 0, dot = 0;
        for (int64_t d = 0; d < D; ++d) {
          hh += h[d] * h[d];
          kk += key[d] * key[d];
          dot += h[d] * wi[d] * key[d];
        }
        const float rstd = (1.0f / std::sqrt(hh / static_cast<float>(D) + eps)) *
                           (1.0f / std::sqrt(kk / static_cast<float>(D) + eps));
        const float s = dot * rstd * inv_sqrt_d;
        // signed square root before the sigmoid, as the training kernel
        const float g = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(s), 1e-6f)), s));
        for (int64_t d = 0; d < D; ++d) h[d] = round_to_bf16(h[d] + g * value[d]);
      }
    }
  });
}

void CpuBackend::engram_hash(const backend::EngramHashParams& p, const backend::WindowLayout& history,
                             std::span<const int32_t> compressed_ids, std::span<const int32_t> floor_history,
                             std::span<const SeqSlice> seqs, const StateStorage& state, TensorView hash_ids) {
  const auto T = static_cast<int64_t>(compressed_ids.size());
  const int64_t cols = p.columns(), look = p.max_ngram - 1, W = history.window;
  DEEPINFER_CHECK(hash_ids.dtype == DType::I32 && hash_ids.numel() == p.layers * T * cols,
                  "engram_hash: hash ids must be I32 [{}, {}, {}]", p.layers, T, cols);
  DEEPINFER_CHECK(history.head_dim == 1 && W >= look, "engram_hash: the history ring must hold {} ids", look);
  DEEPINFER_CHECK(state.dtype == DType::F32 && state.slots, "CPU state ops need F32 pools");
  backend::check_slices(seqs, T, state);
  DEEPINFER_CHECK(floor_history.empty() || floor_history.size() == seqs.size() * static_cast<size_t>(look),
                  "engram_hash: floor_history must hold {} ids per sequence, got {} for {} sequences", look,
                  floor_history.size(), seqs.size());
  int32_t* out = hash_ids.i32();
  std::vector<int64_t> ids(static_cast<size_t>(p.max_ngram));
  for (size_t si = 0; si < seqs.size(); ++si) {
    const SeqSlice& seq = seqs[si];
    float* ring = state.slot(seq.slot) + history.slot_offset;
    for (int64_t i = 0; i < seq.count; ++i) {
      const int64_t pos = seq.start + i, t = seq.begin + i;
      // ids[s] = compressed id at pos - s: the step's own tokens, earlier ones from the ring; below
      // the window floor (a replay's start: the ring holds another sequence's ids) from
      // floor_history, or as at the start when there is none.
      for (int64_t s = 0; s < p.max_ngram; ++s) {
        const int64_t q = pos - s;
        int64_t& id = ids[static_cast<size_t>(s)];
        if (q < 0) id = p.pad_id;
        else if (q >= seq.start) id = compressed_ids[static_cast<size_t>(seq.begin + q - seq.start)];
        else if (q >= seq.window_floor) id = static_cast<int64_t>(ring[q % W]);
        else if (floor_history.empty()) id = p.pad_id;
        else id = floor_history[si * static_cast<size_t>(look) + static_cast<size_t>(q - (seq.start - look))];
      }
      for (int64_t l = 0; l < p.layers; ++l) {
        const int64_t* mult = p.multipliers + l * p.max_ngram;
        int64_t rolling = ids[0] * mult[0];
        for (int64_t s = 1; s < p.max_ngram; ++s) {
          rolling ^= ids[static_cast<size_t>(s)] * mult[s];
          for (int64_t h = 0; h < p.heads; ++h) {
            const int64_t col = (s - 1) * p.heads + h;
            const int64_t prime = p.primes[l * cols + col];
            out[(l * T + t) * cols + col] = static_cast<int32_t>(rolling % prime + p.offsets[l * cols + col]);
          }
        }
      }
    }
    for (int64_t i = std::max<int64_t>(0, seq.count - W); i < seq.count; ++i)
      ring[(seq.start + i) % W] = static_cast<float>(compressed_ids[static_cast<size_t>(seq.begin + i)]);
  }
}

}  // namespace deepinfer::cpu
