#include "model/deepseek_v4/weights.h"

#include <fmt/format.h>

#include <bit>

#include "core/error.h"
#include "io/tensor_names.h"

namespace deepinfer::model::deepseek_v4 {

namespace {

using io::AttentionKind;
using io::TensorView;

int64_t pow2_ceil_div(int64_t n, int64_t parts) {
  const int64_t block = (n + parts - 1) / parts;
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(block)));
}

class Loader {
 public:
  Loader(const io::Checkpoint& checkpoint, const std::function<void(size_t, size_t)>& progress)
      : resolver_(checkpoint), progress_(progress), total_(checkpoint.total_bytes()) {}

  // A linear weight `<name>.weight` of logical shape [rows, cols], in any supported storage.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    const TensorView* t = resolver_.optional(name + ".weight");
    if (!t) t = resolver_.optional(name);  // fused expert slices are passed without ".weight"
    if (!t) {
      resolver_.require(name + ".weight");  // records it as missing
      return {};
    }
    WeightMatrix w;
    w.rows = rows;
    w.cols = cols;
    w.data = t->data;
    w.dtype = t->dtype;
    const TensorView* scale = resolver_.optional(name + ".scale");
    if (!scale) scale = resolver_.optional(name + ".weight_scale_inv");
    const bool packed_fp4 = (t->dtype == DType::I8 || t->dtype == DType::U8) && scale;
    const std::vector<int64_t> expected = packed_fp4 ? std::vector<int64_t>{rows, cols / 2}
                                                     : std::vector<int64_t>{rows, cols};
    if (t->shape != expected) {
      bad_shape(*t, expected);
      return {};
    }
    if (packed_fp4) {
      DEEPINFER_CHECK(scale->dtype == DType::F8_E8M0 && scale->shape == (std::vector<int64_t>{rows, cols / 32}),
                      "{}: FP4 weight needs an F8_E8M0 scale of shape [{}, {}], found {} {}", scale->name, rows,
                      cols / 32, dtype_name(scale->dtype), scale->shape_string());
      w.dtype = DType::F4_E2M1;
      w.scale = scale->data;
      w.scale_dtype = DType::F8_E8M0;
      w.scale_cols = cols / 32;
      w.block_rows = 1;
      w.block_cols = 32;
    } else if (scale) {
      DEEPINFER_CHECK(t->dtype == DType::F8_E4M3, "{}: a block scale is only supported on F8_E4M3 weights, found {}",
                      t->name, dtype_name(t->dtype));
      DEEPINFER_CHECK(scale->shape.size() == 2 && scale->shape[0] > 0 && scale->shape[1] > 0 &&
                          (scale->dtype == DType::F32 || scale->dtype == DType::F8_E8M0),
                      "{}: expected a 2-D F32 or F8_E8M0 block scale, found {} {}", scale->name,
                      dtype_name(scale->dtype), scale->shape_string());
      w.scale = scale->data;
      w.scale_dtype = scale->dtype;
      w.scale_cols = scale->shape[1];
      w.block_rows = pow2_ceil_div(rows, scale->shape[0]);
      w.block_cols = pow2_ceil_div(cols, scale->shape[1]);
      DEEPINFER_CHECK((rows + w.block_rows - 1) / w.block_rows == scale->shape[0] &&
                          (cols + w.block_cols - 1) / w.block_cols == scale->shape[1],
                      "{}: scale shape {} does not tile a [{}, {}] weight in square power-of-two blocks",
                      scale->name, scale->shape_string(), rows, cols);
    } else {
      DEEPINFER_CHECK(t->dtype == DType::F32 || t->dtype == DType::BF16 || t->dtype == DType::F16 ||
                          t->dtype == DType::F8_E4M3,
                      "{}: unsupported weight dtype {}", t->name, dtype_name(t->dtype));
    }
    touch(*t);
    return w;
  }

  Vec vector(const std::string& name, std::vector<int64_t> shape) {
    const TensorView* t = resolver_.require(name, shape);
    if (!t) return Vec(static_cast<size_t>(numel(shape)), 0.0f);
    touch(*t);
    return io::to_float(*t);
  }

  const TensorView* optional(const std::string& name) { return resolver_.optional(name); }
  io::TensorResolver& resolver() { return resolver_; }

  void bad_shape(const TensorView& t, const std::vector<int64_t>& expected) {
    resolver_.require(t.name, expected);  // records the mismatch with both shapes
  }

  // Reads every page once so the first forward pass does not stall on disk, and reports progress.
  void touch(const TensorView& t) {
    volatile std::byte sink{};
    for (size_t i = 0; i < t.nbytes; i += 4096) sink = t.data[i];
    (void)sink;
    done_ += t.nbytes;
    if (progress_) progress_(done_, total_);
  }

  static int64_t numel(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  }

 private:
  io::TensorResolver resolver_;
  const std::function<void(size_t, size_t)>& progress_;
  size_t done_ = 0, total_;
};

Compressor load_compressor(Loader& L, const std::string& prefix, const io::ModelConfig& c, int64_t head_dim,
                           int64_t rate, bool overlap) {
  Compressor comp;
  comp.head_dim = head_dim;
  comp.rate = rate;
  comp.overlap = overlap;
  const int64_t width = overlap ? 2 * head_dim : head_dim;
  comp.wkv = L.matrix(prefix + ".wkv", width, c.hidden_size);
  comp.wgate = L.matrix(prefix + ".wgate", width, c.hidden_size);
  comp.ape = L.vector(prefix + ".ape", {rate, width});
  comp.norm = L.vector(prefix + ".norm.weight", {head_dim});
  return comp;
}

Expert load_expert(Loader& L, const std::string& prefix, const io::ModelConfig& c) {
  Expert e;
  e.w1 = L.matrix(prefix + ".w1", c.moe_intermediate_size, c.hidden_size);
  e.w2 = L.matrix(prefix + ".w2", c.hidden_size, c.moe_intermediate_size);
  e.w3 = L.matrix(prefix + ".w3", c.moe_intermediate_size, c.hidden_size);
  return e;
}

// transformers' in-memory layout fuses the routed experts: gate_up_proj [E, 2I, D], down_proj [E, D, I].
bool load_fused_experts(Loader& L, const std::string& prefix, const io::ModelConfig& c, MoE& moe) {
  const TensorView* gate_up = L.optional(prefix + ".ffn.experts.gate_up_proj");
  const TensorView* down = L.optional(prefix + ".ffn.experts.down_proj");
  if (!gate_up || !down) return false;
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, D = c.hidden_size;
  if (gate_up->shape != std::vector<int64_t>{E, 2 * I, D}) L.bad_shape(*gate_up, {E, 2 * I, D});
  if (down->shape != std::vector<int64_t>{E, D, I}) L.bad_shape(*down, {E, D, I});
  WeightMatrix gu{gate_up->dtype, E * 2 * I, D, gate_up->data};
  WeightMatrix dn{down->dtype, E * D, I, down->data};
  for (int64_t e = 0; e < E; ++e) {
    moe.experts.push_back({gu.row_slice(e * 2 * I, I), dn.row_slice(e * D, D), gu.row_slice(e * 2 * I + I, I)});
  }
  L.touch(*gate_up);
  L.touch(*down);
  return true;
}

}  // namespace

std::unique_ptr<Weights> load_weights(const std::filesystem::path& dir, const io::ModelConfig& c,
                                      const std::function<void(size_t, size_t)>& progress) {
  auto w = std::make_unique<Weights>();
  w->checkpoint = io::Checkpoint::open(dir);
  Loader L(w->checkpoint, progress);
  const int64_t D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim, hc = c.hc_mult;
  const int64_t mix = (2 + hc) * hc;

  w->embed = L.matrix("embed", c.vocab_size, D);
  // Tied embeddings (tie_word_embeddings): the output projection is the embedding itself, unless the
  // checkpoint ships a separate head anyway.
  const bool tied = c.tie_word_embeddings && !L.optional("head.weight") && !L.optional("head");
  w->head = tied ? w->embed : L.matrix("head", c.vocab_size, D);
  w->norm = L.vector("norm.weight", {D});
  w->hc_head_fn = L.vector("hc_head_fn", {hc, hc * D});
  w->hc_head_base = L.vector("hc_head_base", {hc});
  w->hc_head_scale = L.vector("hc_head_scale", {1});

  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Layer& layer = w->layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("layers.{}", i);
    layer.kind = c.layer_types[static_cast<size_t>(i)];
    layer.mlp_kind = c.mlp_layer_types[static_cast<size_t>(i)];
    layer.attn_norm = L.vector(p + ".attn_norm.weight", {D});
    layer.ffn_norm = L.vector(p + ".ffn_norm.weight", {D});
    layer.hc_attn = {L.vector(p + ".hc_attn_fn", {mix, hc * D}), L.vector(p + ".hc_attn_base", {mix}),
                     L.vector(p + ".hc_attn_scale", {3})};
    layer.hc_ffn = {L.vector(p + ".hc_ffn_fn", {mix, hc * D}), L.vector(p + ".hc_ffn_base", {mix}),
                    L.vector(p + ".hc_ffn_scale", {3})};

    Attention& a = layer.attn;
    a.wq_a = L.matrix(p + ".attn.wq_a", c.q_lora_rank, D);
    a.q_norm = L.vector(p + ".attn.q_norm.weight", {c.q_lora_rank});
    a.wq_b = L.matrix(p + ".attn.wq_b", H * hd, c.q_lora_rank);
    a.wkv = L.matrix(p + ".attn.wkv", hd, D);
    a.kv_norm = L.vector(p + ".attn.kv_norm.weight", {hd});
    a.wo_a = L.matrix(p + ".attn.wo_a", c.o_groups * c.o_lora_rank, H * hd / c.o_groups);
    a.wo_b = L.matrix(p + ".attn.wo_b", D, c.o_groups * c.o_lora_rank);
    a.sink = L.vector(p + ".attn.attn_sink", {H});
    if (layer.kind != AttentionKind::Sliding) {
      const bool csa = layer.kind == AttentionKind::CSA;
      const int64_t rate = csa ? c.compress_rate_csa : c.compress_rate_hca;
      a.compressor = std::make_unique<Compressor>(load_compressor(L, p + ".attn.compressor", c, hd, rate, csa));
      if (csa) {
        a.indexer = std::make_unique<Indexer>();
        a.indexer->compressor = load_compressor(L, p + ".attn.indexer.compressor", c, c.index_head_dim, rate, true);
        a.indexer->wq_b = L.matrix(p + ".attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
        a.indexer->weights_proj = L.matrix(p + ".attn.indexer.weights_proj", c.index_n_heads, D);
      }
    }

    MoE& m = layer.ffn;
    m.gate = L.matrix(p + ".ffn.gate", c.n_routed_experts, D);
    if (layer.mlp_kind == io::MlpKind::HashMoE) {
      if (const TensorView* t = L.resolver().require(p + ".ffn.gate.tid2eid", {c.vocab_size, c.num_experts_per_tok})) {
        L.touch(*t);
        for (int64_t id : io::to_int64(*t)) {
          DEEPINFER_CHECK(id >= 0 && id < c.n_routed_experts, "{}: expert id {} outside [0, {})", t->name, id,
                          c.n_routed_experts);
          m.tid2eid.push_back(static_cast<int32_t>(id));
        }
      }
    } else {
      m.gate_bias = L.vector(p + ".ffn.gate.bias", {c.n_routed_experts});
    }
    if (!load_fused_experts(L, p, c, m)) {
      for (int64_t e = 0; e < c.n_routed_experts; ++e) m.experts.push_back(load_expert(L, fmt::format("{}.ffn.experts.{}", p, e), c));
    }
    m.shared = load_expert(L, p + ".ffn.shared_experts", c);
  }
  // Multi-token-prediction heads are not used by this forward pass (transformers skips them too).
  L.resolver().finish({"mtp.", "model.mtp."});
  return w;
}

}  // namespace deepinfer::model::deepseek_v4
