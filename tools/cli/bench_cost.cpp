// Floors for `deepinfer bench`: bytes and FLOPs a step cannot avoid (see bench_cost.h).
#include "cli/bench_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace deepinfer::cli {

namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The tensor's name without its weight / scale suffix: a scale is counted with its matrix.
std::string base_name(const std::string& name, bool& is_scale) {
  for (const char* suffix : {".weight_scale_inv", ".scale", ".weight"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.ends_with(s)) {
      is_scale = s != ".weight";
      return name.substr(0, name.size() - s.size());
    }
  }
  is_scale = false;
  return name;
}

// Multiply-adds per token of one sequence's attention at position p (it sees p + 1 positions):
// scores and values over its window plus the compressed entries it reads, and the indexer's scores.
double attention_macs(const io::ModelConfig& c, int64_t p) {
  double macs = 0;
  for (size_t l = 0; l < c.layer_types.size(); ++l) {
    const auto kind = c.layer_types[l];
    double keys = static_cast<double>(std::min<int64_t>(p + 1, c.sliding_window));
    if (kind == io::AttentionKind::CSA) {
      const int64_t n = (p + 1) / c.compress_rate_csa;
      keys += static_cast<double>(std::min<int64_t>(c.index_topk, n));
      macs += static_cast<double>(c.index_n_heads * c.index_head_dim) * static_cast<double>(n);
    } else if (kind == io::AttentionKind::HCA) {
      keys += static_cast<double>((p + 1) / c.compress_rate_hca);
    }
    macs += 2.0 * static_cast<double>(c.num_attention_heads * c.head_dim) * keys;  // q.k and p.v
  }
  return macs;
}

// State bytes one sequence's decode token at position `context` reads and writes: its window ring,
// the compressed entries attention reads (CSA: the indexer's top-k; HCA: all), every indexer key,
// and the compressors' pending rows (a full window is read once every `rate` tokens).
double decode_state_bytes(const io::ModelConfig& c, const kv::StateLayout& layout, int64_t context) {
  const auto e = static_cast<double>(layout.element_bytes());
  double bytes = 0;
  auto pending = [&](const backend::CompressorLayout& cl) {
    return (2.0 * static_cast<double>(cl.width) +
            static_cast<double>(cl.slot_elems()) / static_cast<double>(cl.rate)) * e;
  };
  for (const auto& l : layout.layers) {
    const double hd = static_cast<double>(l.window.head_dim);
    bytes += (static_cast<double>(std::min(context, l.window.window)) + 1.0) * hd * e;
    if (l.compressor) {
      const int64_t n = (context + 1) / l.compressor->rate;
      const int64_t read = l.indexer ? std::min<int64_t>(c.index_topk, n) : n;
      bytes += static_cast<double>(read * l.compressor->head_dim) * e + pending(*l.compressor);
    }
    if (l.indexer) {
      const int64_t n = (context + 1) / l.indexer->rate;
      bytes += static_cast<double>(n * l.indexer->head_dim) * e + pending(*l.indexer);
    }
  }
  return bytes;
}

// State a prefill of `tokens` writes: the last window rows and every completed entry.
double prefill_state_bytes(const kv::StateLayout& layout, int64_t tokens) {
  const auto e = static_cast<double>(layout.element_bytes());
  double bytes = 0;
  for (const auto& l : layout.layers) {
    bytes += static_cast<double>(std::min(tokens, l.window.window) * l.window.head_dim) * e;
    for (const auto* cl : {l.compressor ? &*l.compressor : nullptr, l.indexer ? &*l.indexer : nullptr})
      if (cl) bytes += static_cast<double>(tokens / cl->rate * cl->head_dim) * e;
  }
  return bytes;
}

double weight_bytes(const WeightCensus& w, const io::ModelConfig& c, int64_t tokens, double experts) {
  const double rows = static_cast<double>(std::min<int64_t>(tokens, w.gathered_rows));
  const double share = c.n_routed_experts > 0 ? experts / static_cast<double>(c.n_routed_experts) : 0.0;
  // Tied embeddings (no head tensor): the head reads the whole table, which covers the gather.
  const double gathered =
      w.head > 0 ? w.row_gathered * rows / static_cast<double>(std::max<int64_t>(w.gathered_rows, 1)) : 0.0;
  const double head = w.head > 0 ? w.head : w.row_gathered;
  return gathered + head + w.routed * share + w.other;
}

double routed_share(const io::ModelConfig& c) {
  return c.n_routed_experts > 0 ? static_cast<double>(c.num_experts_per_tok) / static_cast<double>(c.n_routed_experts)
                                : 0.0;
}

}  // namespace

WeightCensus weight_census(const io::Checkpoint& checkpoint) {
  WeightCensus w;
  std::map<std::string, double> by_dtype;
  for (const auto& [name, t] : checkpoint.tensors()) {
    bool is_scale = false;
    const std::string base = base_name(name, is_scale);
    const auto bytes = static_cast<double>(t.nbytes);
    const bool routed = has(name, "experts.") && !has(name, "shared");
    const bool packed = (t.dtype == DType::I8 || t.dtype == DType::U8) && has(name, "experts");
    by_dtype[is_scale ? std::string("block scales") : packed ? std::string("FP4 (packed)")
                                                             : std::string(dtype_name(t.dtype))] += bytes;
    const double logical = static_cast<double>(t.numel()) * (packed ? 2.0 : 1.0);
    if (has(base, "embed") || has(base, "tid2eid")) {
      w.row_gathered += bytes;
      if (has(base, "embed") && !is_scale && !t.shape.empty()) w.gathered_rows = t.shape[0];
    } else if (base == "head" || base == "lm_head") {
      w.head += bytes;
    } else if (routed) {
      w.routed += bytes;
      if (!is_scale && t.shape.size() >= 2) w.routed_macs += logical;
    } else {
      w.other += bytes;
      // Matrices of a product (not position biases, which are added).
      if (!is_scale && t.shape.size() >= 2 && !has(base, "ape") && !has(base, "position_bias")) w.dense_macs += logical;
    }
  }
  for (const auto& [dtype, bytes] : by_dtype)
    w.dtypes += fmt::format("{}{} {}", w.dtypes.empty() ? "" : ", ", dtype,
                            bytes >= 1e9 ? fmt::format("{:.2f} GB", bytes / 1e9) : fmt::format("{:.1f} MB", bytes / 1e6));
  return w;
}

double expected_distinct_experts(int64_t experts, int64_t k, int64_t tokens) {
  if (experts <= 0 || k <= 0) return 0;
  const double e = static_cast<double>(experts);
  return e * (1.0 - std::pow(1.0 - static_cast<double>(k) / e, static_cast<double>(tokens)));
}

StepCost decode_cost(const WeightCensus& w, const io::ModelConfig& c, const kv::StateLayout& layout, int64_t batch,
                     int64_t context) {
  StepCost s;
  s.experts_per_layer = expected_distinct_experts(c.n_routed_experts, c.num_experts_per_tok, batch);
  s.weight_bytes = weight_bytes(w, c, batch, s.experts_per_layer);
  s.state_bytes = static_cast<double>(batch) * decode_state_bytes(c, layout, context);
  const auto head = static_cast<double>(c.vocab_size * c.hidden_size);
  const double per_token = w.dense_macs + w.routed_macs * routed_share(c) + head + attention_macs(c, context);
  s.flops = 2.0 * static_cast<double>(batch) * per_token;
  return s;
}

StepCost prefill_cost(const WeightCensus& w, const io::ModelConfig& c, const kv::StateLayout& layout, int64_t tokens) {
  StepCost s;
  s.experts_per_layer = expected_distinct_experts(c.n_routed_experts, c.num_experts_per_tok, tokens);
  s.weight_bytes = weight_bytes(w, c, tokens, s.experts_per_layer);
  s.state_bytes = prefill_state_bytes(layout, tokens);
  double macs = static_cast<double>(tokens) * (w.dense_macs + w.routed_macs * routed_share(c)) +
                static_cast<double>(c.vocab_size * c.hidden_size);  // lm_head for the last token
  for (int64_t p = 0; p < tokens; ++p) macs += attention_macs(c, p);
  s.flops = 2.0 * macs;
  return s;
}

}  // namespace deepinfer::cli
