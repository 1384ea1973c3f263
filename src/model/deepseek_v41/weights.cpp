#include "model/deepseek_v41/weights.h"

#include <fmt/format.h>

#include <set>

#include "core/error.h"
#include "model/deepseek_v41/tensors.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

constexpr size_t kMaxListed = 20;  // per kind of problem in the error

class Loader {
 public:
  Loader(const io::Checkpoint& checkpoint, const std::filesystem::path& dir, const io::DeepseekV41Config& c,
         const std::function<void(size_t, size_t)>& progress)
      : checkpoint_(checkpoint), c_(c), progress_(progress), total_(checkpoint.total_bytes()) {
    for (const TensorSpec& spec : checkpoint_tensors(c)) check(spec);
    for (const auto& [name, t] : checkpoint.tensors())
      if (!expected_.contains(name) && !is_vision_tensor(name)) note(unexpected_, name + " " + t.shape_string());
    if (missing_.empty() && wrong_.empty() && unexpected_.empty()) return;
    std::string message = fmt::format("{}: the checkpoint does not match its DeepSeek-V4.1 config.json", dir.string());
    auto list = [&](const char* what, const std::vector<std::string>& items, size_t count) {
      if (items.empty()) return;
      message += fmt::format("\n{} {} tensor(s):", count, what);
      for (const auto& s : items) message += "\n  " + s;
      if (count > items.size()) message += fmt::format("\n  ... and {} more", count - items.size());
    };
    list("missing", missing_, missing_count_);
    list("mistyped or mis-shaped", wrong_, wrong_count_);
    list("unexpected", unexpected_, unexpected_count_);
    throw Error(message);
  }

  const io::TensorView& tensor(const std::string& name) {
    const io::TensorView& t = checkpoint_.get(name);
    touch(t);
    return t;
  }

  // A matrix [rows, cols] as stored: BF16; FP8 with a 32x32 E8M0 `.scale`; packed FP4 with per-32 scales.
  WeightMatrix matrix(const std::string& prefix) {
    const io::TensorView& t = tensor(prefix + ".weight");
    WeightMatrix w;
    w.dtype = t.dtype;
    w.rows = t.shape[0];
    w.cols = t.shape[1];
    w.data = t.data;
    if (t.dtype == DType::F8_E4M3 || t.dtype == DType::I8) {
      const io::TensorView& s = tensor(prefix + ".scale");
      w.scale = s.data;
      w.scale_dtype = DType::F8_E8M0;
      w.scale_cols = s.shape[1];
      if (t.dtype == DType::I8) {  // two e2m1 codes per byte, even element in the low nibble
        w.dtype = DType::F4_E2M1;
        w.cols = 2 * t.shape[1];
        w.block_rows = 1;
        w.block_cols = 32;
      } else {
        w.block_rows = c_.quantization.block_rows;
        w.block_cols = c_.quantization.block_cols;
      }
    }
    return w;
  }
  // An Engram table: FP8 rows with one E8M0 scale per 32 values of each row.
  WeightMatrix fp8_rows(const std::string& prefix) {
    WeightMatrix w = matrix(prefix);
    w.block_rows = 1;
    w.block_cols = 32;
    return w;
  }
  Vec vector(const std::string& name) { return io::to_float(tensor(name)); }
  HyperConnection mixer(const std::string& p, const char* site) {
    return {vector(fmt::format("{}.hc_{}_fn", p, site)), vector(fmt::format("{}.hc_{}_base", p, site)),
            vector(fmt::format("{}.hc_{}_scale", p, site))};
  }

 private:
  void note(std::vector<std::string>& list, std::string item) {
    size_t& count = &list == &missing_ ? missing_count_ : &list == &wrong_ ? wrong_count_ : unexpected_count_;
    if (++count <= kMaxListed) list.push_back(std::move(item));
  }

  void check(const TensorSpec& spec) {
    expected_.insert(spec.name);
    if (!checkpoint_.contains(spec.name)) return note(missing_, spec.name);
    const io::TensorView& t = checkpoint_.get(spec.name);
    if (t.dtype != spec.dtype || t.shape != spec.shape) {
      io::TensorView want;
      want.shape = spec.shape;
      note(wrong_, fmt::format("{}: expected {} {}, found {} {}", spec.name, dtype_name(spec.dtype), want.shape_string(),
                               dtype_name(t.dtype), t.shape_string()));
    }
  }

  // Reads every page once so the first forward does not stall on disk, and reports progress.
  void touch(const io::TensorView& t) {
    volatile std::byte sink{};
    for (size_t i = 0; i < t.nbytes; i += 4096) sink = t.data[i];
    (void)sink;
    done_ += t.nbytes;
    if (progress_) progress_(done_, total_);
  }

  const io::Checkpoint& checkpoint_;
  const io::DeepseekV41Config& c_;
  const std::function<void(size_t, size_t)>& progress_;
  size_t done_ = 0, total_;
  std::set<std::string> expected_;
  std::vector<std::string> missing_, wrong_, unexpected_;
  size_t missing_count_ = 0, wrong_count_ = 0, unexpected_count_ = 0;
};

MoE load_moe(Loader& L, const std::string& p, int64_t experts) {
  MoE m;
  m.gate = L.matrix(p + ".ffn.gate");
  m.gate_bias = L.vector(p + ".ffn.gate.bias");
  for (int64_t e = 0; e < experts; ++e) {
    const std::string ep = fmt::format("{}.ffn.experts.{}", p, e);
    m.experts.push_back({L.matrix(ep + ".w1"), L.matrix(ep + ".w2"), L.matrix(ep + ".w3")});
  }
  m.shared = {L.matrix(p + ".ffn.shared_experts.w1"), L.matrix(p + ".ffn.shared_experts.w2"),
              L.matrix(p + ".ffn.shared_experts.w3")};
  return m;
}

void load_block(Loader& L, const std::string& p, int64_t experts, Block& b) {
  b.attn_norm = L.vector(p + ".attn_norm.weight");
  b.ffn_norm = L.vector(p + ".ffn_norm.weight");
  b.hc_attn = L.mixer(p, "attn");
  b.hc_ffn = L.mixer(p, "ffn");
  Attention& a = b.attn;
  a.wq_a = L.matrix(p + ".attn.wq_a");
  a.q_norm = L.vector(p + ".attn.q_norm.weight");
  a.wq_b = L.matrix(p + ".attn.wq_b");
  a.wkv = L.matrix(p + ".attn.wkv");
  a.kv_norm = L.vector(p + ".attn.kv_norm.weight");
  a.wo_a = L.matrix(p + ".attn.wo_a");
  a.wo_b = L.matrix(p + ".attn.wo_b");
  a.sink = L.vector(p + ".attn.attn_sink");
  b.ffn = load_moe(L, p, experts);
}

}  // namespace

std::unique_ptr<Weights> load_weights(const std::filesystem::path& dir, const io::DeepseekV41Config& c,
                                      const std::function<void(size_t, size_t)>& progress) {
  auto w = std::make_unique<Weights>();
  w->checkpoint = io::Checkpoint::open(dir);
  Loader L(w->checkpoint, dir, c, progress);  // throws unless every tensor is as the config says
  w->embed = L.matrix("embed");
  w->head = L.matrix("head");
  w->norm = L.vector("norm.weight");
  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Block& b = w->layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("layers.{}", l);
    load_block(L, p, c.n_routed_experts, b);
    if (c.is_kv_source(l)) {
      auto comp = std::make_unique<Compressor>();
      comp->rate = c.compress_ratio(l);
      comp->wkv = L.matrix(p + ".attn.compressor.wkv");
      if (comp->rate > 1) comp->wgate = L.matrix(p + ".attn.compressor.wgate");
      comp->norm = L.vector(p + ".attn.compressor.norm.weight");
      b.attn.compressor = std::move(comp);
    }
    if (c.is_index_source(l)) {
      auto ix = std::make_unique<Indexer>();
      ix->wq_b = L.matrix(p + ".attn.indexer.wq_b");
      ix->weights_proj = L.matrix(p + ".attn.indexer.weights_proj");
      if (c.is_kv_source(l)) {
        ix->wk = L.matrix(p + ".attn.indexer.wk");
        ix->k_norm = L.vector(p + ".attn.indexer.k_norm.weight");
      }
      b.attn.indexer = std::move(ix);
    }
    for (size_t i = 0; i < c.engram.layer_ids.size(); ++i) {
      if (c.engram.layer_ids[i] != l) continue;
      auto e = std::make_unique<Engram>();
      e->index = static_cast<int64_t>(i);
      e->table = L.fp8_rows(p + ".engram.embed");
      e->wkv = L.matrix(p + ".engram.wkv");
      e->q_weight = L.vector(p + ".engram.q_weight");
      e->k_weight = L.vector(p + ".engram.k_weight");
      b.engram = std::move(e);
    }
  }
  w->mtp.resize(static_cast<size_t>(c.dspark.stages));
  for (int64_t s = 0; s < c.dspark.stages; ++s) {
    DSparkStage& stage = w->mtp[static_cast<size_t>(s)];
    const std::string p = fmt::format("mtp.{}", s);
    load_block(L, p, c.dspark.n_routed_experts, stage.block);
    if (s == 0) {
      stage.main_proj = L.matrix(p + ".main_proj");
      stage.main_norm = L.vector(p + ".main_norm.weight");
    }
    if (s == c.dspark.stages - 1) {
      stage.norm = L.vector(p + ".norm.weight");
      stage.markov_embed = L.matrix(p + ".markov_head.embed");
      stage.markov_head = L.matrix(p + ".markov_head.head");
      stage.confidence = L.matrix(p + ".confidence_head.proj");
    }
  }
  return w;
}

}  // namespace deepinfer::model::deepseek_v41
