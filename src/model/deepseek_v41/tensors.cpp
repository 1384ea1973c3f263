#include "model/deepseek_v41/tensors.h"

#include <fmt/format.h>

namespace deepinfer::model::deepseek_v41 {

namespace {

class Inventory {
 public:
  explicit Inventory(const io::DeepseekV41Config& c) : c_(c) {}

  void add(std::string name, DType dtype, std::vector<int64_t> shape, const std::string& component) {
    out_.push_back({std::move(name), dtype, std::move(shape), component});
  }
  // A Linear in the checkpoint's dense dtype: FP8 with a 32x32 E8M0 `.scale` in fp8 checkpoints.
  void dense(const std::string& prefix, int64_t out, int64_t in, const std::string& component) {
    if (!c_.quantization.fp8) {
      add(prefix + ".weight", DType::BF16, {out, in}, component);
      return;
    }
    const int64_t br = c_.quantization.block_rows, bc = c_.quantization.block_cols;
    add(prefix + ".weight", DType::F8_E4M3, {out, in}, component);
    add(prefix + ".scale", DType::F8_E8M0, {(out + br - 1) / br, (in + bc - 1) / bc}, "block scales");
  }
  void bf16(const std::string& name, std::vector<int64_t> shape, const std::string& component) {
    add(name, DType::BF16, std::move(shape), component);
  }
  void f32(const std::string& name, std::vector<int64_t> shape, const std::string& component) {
    add(name, DType::F32, std::move(shape), component);
  }
  // A routed expert matrix: packed FP4 (I8 [out, in/2] + E8M0 [out, in/32]) or the dense dtype.
  void expert(const std::string& prefix, int64_t out, int64_t in) {
    if (!c_.quantization.fp4_experts) return dense(prefix, out, in, "routed experts");
    add(prefix + ".weight", DType::I8, {out, in / 2}, "routed experts");
    add(prefix + ".scale", DType::F8_E8M0, {out, in / 32}, "block scales");
  }

  // What every block (backbone layer or DSpark stage) has: norms, mixers, attention, MoE.
  void block(const std::string& p, int64_t experts) {
    const io::DeepseekV41Config& c = c_;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim, ql = c.q_lora_rank;
    const int64_t hc = c.hc_mult, mix = (2 + hc) * hc, I = c.moe_intermediate_size;
    bf16(p + ".attn_norm.weight", {D}, "norms");
    bf16(p + ".ffn_norm.weight", {D}, "norms");
    for (const char* site : {"attn", "ffn"}) {
      f32(fmt::format("{}.hc_{}_fn", p, site), {mix, hc * D}, "mHC mixers");
      f32(fmt::format("{}.hc_{}_base", p, site), {mix}, "mHC mixers");
      f32(fmt::format("{}.hc_{}_scale", p, site), {3}, "mHC mixers");
    }
    f32(p + ".attn.attn_sink", {H}, "attention");
    dense(p + ".attn.wq_a", ql, D, "attention");
    bf16(p + ".attn.q_norm.weight", {ql}, "norms");
    dense(p + ".attn.wq_b", H * hd, ql, "attention");
    dense(p + ".attn.wkv", hd, D, "attention");
    bf16(p + ".attn.kv_norm.weight", {hd}, "norms");
    dense(p + ".attn.wo_a", c.o_groups * c.o_lora_rank, H * hd / c.o_groups, "attention");
    dense(p + ".attn.wo_b", D, c.o_groups * c.o_lora_rank, "attention");
    bf16(p + ".ffn.gate.weight", {experts, D}, "router");
    f32(p + ".ffn.gate.bias", {experts}, "router");
    for (int64_t e = 0; e < experts; ++e) {
      const std::string ep = fmt::format("{}.ffn.experts.{}", p, e);
      expert(ep + ".w1", I, D);
      expert(ep + ".w2", D, I);
      expert(ep + ".w3", I, D);
    }
    dense(p + ".ffn.shared_experts.w1", I, D, "shared expert");
    dense(p + ".ffn.shared_experts.w2", D, I, "shared expert");
    dense(p + ".ffn.shared_experts.w3", I, D, "shared expert");
  }

  void backbone_extras(int64_t l) {
    const io::DeepseekV41Config& c = c_;
    const std::string p = fmt::format("layers.{}", l);
    const int64_t D = c.hidden_size, hd = c.head_dim;
    if (c.is_kv_source(l)) {
      // Ratio 1 is a plain projection: no gate.
      bf16(p + ".attn.compressor.wkv.weight", {hd, D}, "compressor");
      if (c.compress_ratio(l) > 1) bf16(p + ".attn.compressor.wgate.weight", {hd, D}, "compressor");
      bf16(p + ".attn.compressor.norm.weight", {hd}, "norms");
    }
    if (c.is_index_source(l)) {
      dense(p + ".attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank, "indexer");
      bf16(p + ".attn.indexer.weights_proj.weight", {c.index_n_heads, D}, "indexer");
      if (c.is_kv_source(l)) {  // index keys are projected from this layer's compressed latent
        bf16(p + ".attn.indexer.wk.weight", {c.index_head_dim, hd}, "indexer");
        bf16(p + ".attn.indexer.k_norm.weight", {c.index_head_dim}, "norms");
      }
    }
    const auto& e = c.engram;
    for (size_t i = 0; i < e.layer_ids.size(); ++i) {
      if (e.layer_ids[i] != l) continue;
      const int64_t rows = e.num_embeddings[i];
      add(p + ".engram.embed.weight", DType::F8_E4M3, {rows, e.head_dim}, "Engram tables");
      add(p + ".engram.embed.scale", DType::F8_E8M0, {rows, e.head_dim / 32}, "block scales");
      dense(p + ".engram.wkv", D * (c.hc_mult + 1), e.hash_columns() * e.head_dim, "Engram projections");
      bf16(p + ".engram.q_weight", {c.hc_mult, D}, "Engram projections");
      bf16(p + ".engram.k_weight", {c.hc_mult, D}, "Engram projections");
    }
  }

  void dspark_extras(int64_t stage) {
    const io::DeepseekV41Config& c = c_;
    const std::string p = fmt::format("mtp.{}", stage);
    const int64_t D = c.hidden_size, V = c.vocab_size, rank = c.dspark.markov_rank;
    if (stage == 0) {
      dense(p + ".main_proj", D, D * static_cast<int64_t>(c.dspark.target_layer_ids.size()), "DSpark heads");
      bf16(p + ".main_norm.weight", {D}, "norms");
    }
    if (stage == c.dspark.stages - 1) {
      bf16(p + ".norm.weight", {D}, "norms");
      bf16(p + ".markov_head.embed.weight", {V, rank}, "DSpark heads");
      bf16(p + ".markov_head.head.weight", {V, rank}, "DSpark heads");
      bf16(p + ".confidence_head.proj.weight", {1, D + rank}, "DSpark heads");
    }
  }

  std::vector<TensorSpec> take() { return std::move(out_); }

 private:
  const io::DeepseekV41Config& c_;
  std::vector<TensorSpec> out_;
};

}  // namespace

int64_t TensorSpec::parameters() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return dtype == DType::I8 ? 2 * n : n;
}

int64_t TensorSpec::bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n * static_cast<int64_t>(dtype_bits(dtype) / 8);
}

std::vector<TensorSpec> checkpoint_tensors(const io::DeepseekV41Config& c) {
  Inventory inv(c);
  const int64_t D = c.hidden_size, V = c.vocab_size;
  inv.bf16("embed.weight", {V, D}, "embedding");
  inv.bf16("head.weight", {V, D}, "lm_head");
  inv.bf16("norm.weight", {D}, "norms");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    inv.block(fmt::format("layers.{}", l), c.n_routed_experts);
    inv.backbone_extras(l);
  }
  // DSpark stages: blocks with a window-only attention and their own MoE, under mtp.* (their
  // embed / head are tied to the main ones and not stored).
  for (int64_t s = 0; s < c.dspark.stages; ++s) {
    inv.block(fmt::format("mtp.{}", s), c.dspark.n_routed_experts);
    inv.dspark_extras(s);
  }
  auto out = inv.take();
  // Everything under mtp.* counts as the draft model, whatever its kind.
  for (auto& t : out)
    if (t.name.starts_with("mtp.") && t.component != "block scales") t.component = "DSpark (" + t.component + ")";
  return out;
}

bool is_vision_tensor(const std::string& name) {
  return name.starts_with("vision.") || name.starts_with("aligner.") || name.starts_with("image_") ||
         name.ends_with(".ffn.gate.bias_vl");
}

}  // namespace deepinfer::model::deepseek_v41
