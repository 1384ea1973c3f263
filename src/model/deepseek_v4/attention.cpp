// DeepSeek-V4 attention: shared-KV MQA over the sliding window plus, on compressed layers, the
// compressed entries (all completed ones for HCA, the indexer's top-k for CSA), with per-head sinks,
// partial interleaved RoPE undone on the output, and the grouped output projection.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::model::deepseek_v4 {

namespace {

// cos/sin of every token of the chunk: [T, half] each.
void rope_table(const Rope& rope, int64_t start, int64_t T, std::vector<float>& cos, std::vector<float>& sin) {
  const int64_t half = rope.half();
  cos.resize(static_cast<size_t>(T * half));
  sin.resize(static_cast<size_t>(T * half));
  for (int64_t t = 0; t < T; ++t) rope.angles(start + t, cos.data() + t * half, sin.data() + t * half);
}

}  // namespace

void DeepseekV4::compress(const Compressor& comp, CompressorState& st, const float* x, int64_t T) const {
  const int64_t width = st.width, hd = comp.head_dim, rate = comp.rate;
  std::vector<float> kv(static_cast<size_t>(T * width)), gate(static_cast<size_t>(T * width));
  cpu::linear(comp.wkv, x, T, kv.data());
  cpu::linear(comp.wgate, x, T, gate.data());
  st.pending_kv.insert(st.pending_kv.end(), kv.begin(), kv.end());
  st.pending_gate.insert(st.pending_gate.end(), gate.begin(), gate.end());

  const int64_t windows = st.pending() / rate;
  if (windows == 0) return;
  const int64_t slots = comp.overlap ? 2 * rate : rate;
  std::vector<float> slot_kv(static_cast<size_t>(slots)), slot_gate(static_cast<size_t>(slots));
  std::vector<float> entry(static_cast<size_t>(hd)), cos(static_cast<size_t>(rope_compress_.half())),
      sin(static_cast<size_t>(rope_compress_.half()));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t w = 0; w < windows; ++w) {
    const float* win_kv = st.pending_kv.data() + w * rate * width;
    const float* win_gate = st.pending_gate.data() + w * rate * width;
    // Gate logits with the learned position bias, per channel; softmax over the window's slots.
    // CSA: slots [0, rate) hold the previous window's first half (none before the first window),
    // slots [rate, 2 rate) this window's second half.
    for (int64_t c = 0; c < hd; ++c) {
      for (int64_t s = 0; s < rate; ++s) {
        const int64_t ch = comp.overlap ? hd + c : c;
        const int64_t slot = comp.overlap ? rate + s : s;
        slot_kv[slot] = win_kv[s * width + ch];
        slot_gate[slot] = win_gate[s * width + ch] + comp.ape[s * width + ch];
        if (comp.overlap) {
          const bool has_prior = !st.overlap_kv.empty();
          slot_kv[s] = has_prior ? st.overlap_kv[s * hd + c] : 0.0f;
          slot_gate[s] = has_prior ? st.overlap_gate[s * hd + c] : neg_inf;
        }
      }
      cpu::softmax(slot_gate.data(), slots);
      float acc = 0.0f;
      for (int64_t s = 0; s < slots; ++s) acc += slot_kv[s] * slot_gate[s];
      entry[c] = acc;
    }
    if (comp.overlap) {  // this window's first half feeds the next entry
      st.overlap_kv.resize(static_cast<size_t>(rate * hd));
      st.overlap_gate.resize(static_cast<size_t>(rate * hd));
      for (int64_t s = 0; s < rate; ++s)
        for (int64_t c = 0; c < hd; ++c) {
          st.overlap_kv[s * hd + c] = win_kv[s * width + c];
          st.overlap_gate[s * hd + c] = win_gate[s * width + c] + comp.ape[s * width + c];
        }
    }
    cpu::rms_norm(entry.data(), 1, hd, comp.norm.data(), static_cast<float>(config_.rms_norm_eps));
    rope_compress_.angles(st.count() * rate, cos.data(), sin.data());
    cpu::rope_interleaved(entry.data(), hd, cos.data(), sin.data(), rope_compress_.half());
    st.entries.insert(st.entries.end(), entry.begin(), entry.end());
  }
  st.pending_kv.erase(st.pending_kv.begin(), st.pending_kv.begin() + windows * rate * width);
  st.pending_gate.erase(st.pending_gate.begin(), st.pending_gate.begin() + windows * rate * width);
}

std::vector<std::vector<int32_t>> DeepseekV4::index_select(const Layer& layer, LayerState& ls, const float* x,
                                                           const float* q_residual, int64_t T,
                                                           int64_t start) const {
  const Indexer& ix = *layer.attn.indexer;
  compress(ix.compressor, ls.indexer, x, T);
  const int64_t nh = config_.index_n_heads, hd = config_.index_head_dim, rate = ix.compressor.rate;
  const int64_t half = rope_compress_.half();
  std::vector<float> q(static_cast<size_t>(T * nh * hd)), w(static_cast<size_t>(T * nh));
  cpu::linear(ix.wq_b, q_residual, T, q.data());
  cpu::linear(ix.weights_proj, x, T, w.data());
  std::vector<float> cos, sin;
  rope_table(rope_compress_, start, T, cos, sin);
  const float head_weight_scale = 1.0f / std::sqrt(static_cast<float>(nh));
  const float score_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* keys = ls.indexer.entries.data();

  std::vector<std::vector<int32_t>> selected(static_cast<size_t>(T));
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    std::vector<float> scores;
    for (size_t t = b; t < e; ++t) {
      float* qt = q.data() + t * nh * hd;
      for (int64_t h = 0; h < nh; ++h) cpu::rope_interleaved(qt + h * hd, hd, cos.data() + t * half, sin.data() + t * half, half);
      // Entry w is complete (visible) for the query at position p iff w < (p + 1) / rate. The
      // reference ranks all entries this call holds, the hidden ones at -inf, and drops those picks.
      const int64_t count = ls.indexer.count();
      const int64_t visible = std::min<int64_t>((start + static_cast<int64_t>(t) + 1) / rate, count);
      const int64_t ranked = ties_ == TopKTies::Reference ? count : visible;
      scores.assign(static_cast<size_t>(ranked), -std::numeric_limits<float>::infinity());
      for (int64_t j = 0; j < visible; ++j) {
        float s = 0.0f;
        for (int64_t h = 0; h < nh; ++h) {
          const float* qh = qt + h * hd;
          const float* k = keys + j * hd;
          float d = 0.0f;
          for (int64_t c = 0; c < hd; ++c) d += qh[c] * k[c];
          s += std::max(d, 0.0f) * score_scale * (w[t * nh + h] * head_weight_scale);
        }
        scores[static_cast<size_t>(j)] = s;
      }
      auto picks = top_k(scores, config_.index_topk);
      std::erase_if(picks, [&](int32_t j) { return j >= visible; });
      std::sort(picks.begin(), picks.end());
      selected[t] = std::move(picks);
    }
  });
  return selected;
}

void DeepseekV4::attention(const Layer& layer, LayerState& ls, const float* x, int64_t T, int64_t start,
                           float* out) const {
  const Attention& a = layer.attn;
  const int64_t H = config_.num_attention_heads, hd = config_.head_dim, D = config_.hidden_size;
  const int64_t W = config_.sliding_window, ql = config_.q_lora_rank;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const Rope& rope = layer.kind == io::AttentionKind::Sliding ? rope_main_ : rope_compress_;
  const int64_t half = rope.half();
  std::vector<float> cos, sin;
  rope_table(rope, start, T, cos, sin);

  // Queries: low-rank q with its norm (shared with the indexer), then an unweighted norm per head.
  std::vector<float> q_res(static_cast<size_t>(T * ql)), q(static_cast<size_t>(T * H * hd));
  cpu::linear(a.wq_a, x, T, q_res.data());
  cpu::rms_norm(q_res.data(), T, ql, a.q_norm.data(), eps);
  cpu::linear(a.wq_b, q_res.data(), T, q.data());
  cpu::rms_norm(q.data(), T * H, hd, nullptr, eps);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      cpu::rope_interleaved(q.data() + (t * H + h) * hd, hd, cos.data() + t * half, sin.data() + t * half, half);

  // The single KV head (K == V).
  std::vector<float> kv(static_cast<size_t>(T * hd));
  cpu::linear(a.wkv, x, T, kv.data());
  cpu::rms_norm(kv.data(), T, hd, a.kv_norm.data(), eps);
  for (int64_t t = 0; t < T; ++t) cpu::rope_interleaved(kv.data() + t * hd, hd, cos.data() + t * half, sin.data() + t * half, half);

  // Window keys in position order: the ring's tokens still inside the window, then this chunk.
  if (ls.window.empty()) ls.window.resize(static_cast<size_t>(W * hd));
  const int64_t first_pos = std::max<int64_t>(0, start - (W - 1));
  std::vector<float> keys(static_cast<size_t>((start - first_pos + T) * hd));
  for (int64_t p = first_pos; p < start; ++p)
    std::copy_n(ls.window.begin() + (p % W) * hd, hd, keys.begin() + (p - first_pos) * hd);
  std::copy(kv.begin(), kv.end(), keys.begin() + (start - first_pos) * hd);

  // Compressed entries each query may attend to.
  std::vector<std::vector<int32_t>> selected;
  const float* entries = nullptr;
  if (a.compressor) {
    if (a.indexer) selected = index_select(layer, ls, x, q_res.data(), T, start);
    compress(*a.compressor, ls.compressor, x, T);
    entries = ls.compressor.entries.data();
    if (!a.indexer) {  // HCA: every completed entry
      selected.resize(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {
        const int64_t visible = std::min<int64_t>((start + t + 1) / a.compressor->rate, ls.compressor.count());
        for (int32_t j = 0; j < visible; ++j) selected[t].push_back(j);
      }
    }
  }

  std::vector<float> heads(static_cast<size_t>(T * H * hd));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ThreadPool::global().parallel_for(static_cast<size_t>(T * H), [&](size_t b, size_t e) {
    std::vector<float> logits;
    for (size_t i = b; i < e; ++i) {
      const int64_t t = static_cast<int64_t>(i) / H, h = static_cast<int64_t>(i) % H;
      const int64_t pos = start + t;
      const float* qh = q.data() + i * hd;
      const int64_t lo = std::max(first_pos, pos - W + 1) - first_pos, hi = pos - first_pos;  // inclusive
      const size_t n_window = static_cast<size_t>(hi - lo + 1);
      const size_t n_comp = selected.empty() ? 0 : selected[t].size();
      logits.resize(n_window + n_comp + 1);
      auto key = [&](size_t j) {
        return j < n_window ? keys.data() + (lo + static_cast<int64_t>(j)) * hd
                            : entries + static_cast<int64_t>(selected[t][j - n_window]) * hd;
      };
      for (size_t j = 0; j < n_window + n_comp; ++j) {
        const float* k = key(j);
        float d = 0.0f;
        for (int64_t c = 0; c < hd; ++c) d += qh[c] * k[c];
        logits[j] = d * scale;
      }
      logits.back() = a.sink[h];  // the sink takes probability mass and is then dropped
      cpu::softmax(logits.data(), static_cast<int64_t>(logits.size()));
      float* o = heads.data() + i * hd;
      std::fill(o, o + hd, 0.0f);
      for (size_t j = 0; j < n_window + n_comp; ++j) {
        const float* v = key(j);
        const float p = logits[j];
        for (int64_t c = 0; c < hd; ++c) o[c] += p * v[c];
      }
      // V carried RoPE (K == V): rotate the output's rope slice back by the query position.
      cpu::rope_interleaved(o, hd, cos.data() + t * half, sin.data() + t * half, half, -1.0f);
    }
  });

  // Grouped output projection: each group of heads to o_lora_rank (block-diagonal wo_a), then wo_b.
  const int64_t G = config_.o_groups, R = config_.o_lora_rank, group_in = H * hd / G;
  std::vector<float> group_x(static_cast<size_t>(T * group_in)), lowrank(static_cast<size_t>(T * G * R)),
      group_y(static_cast<size_t>(T * R));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(heads.begin() + t * H * hd + g * group_in, group_in, group_x.begin() + t * group_in);
    cpu::linear(a.wo_a.row_slice(g * R, R), group_x.data(), T, group_y.data());
    for (int64_t t = 0; t < T; ++t) std::copy_n(group_y.begin() + t * R, R, lowrank.begin() + t * G * R + g * R);
  }
  cpu::linear(a.wo_b, lowrank.data(), T, out);
  (void)D;

  // Keep the last W tokens' KV for the next call.
  for (int64_t t = std::max<int64_t>(0, T - W); t < T; ++t)
    std::copy_n(kv.begin() + t * hd, hd, ls.window.begin() + ((start + t) % W) * hd);
}

}  // namespace deepinfer::model::deepseek_v4
