// The loader accepts the three tensor namings (released checkpoint, transformers 5 on disk,
// transformers in memory with fused experts) and block-quantised FP8 / packed FP4 weights, and
// reports every missing, unexpected or mis-shaped tensor in one error.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <regex>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/model.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(DEEPINFER_TEST_DATA_DIR) + "/fixtures/v4_tiny_a";

std::vector<int32_t> prompt_ids() {
  auto g = io::Checkpoint::open_file(kFixture + "/golden.safetensors");
  std::vector<int32_t> ids;
  for (int64_t v : io::to_int64(g.get("p0.input_ids"))) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

std::vector<float> prefill_logits(const fs::path& dir) {
  auto m = model::load_model(dir);
  auto state = m->new_sequence();
  std::vector<float> logits;
  m->forward(*state, prompt_ids(), logits, true);
  return logits;
}

// Largest |a - b| over the range of b; +Inf (failing every bound) on a size mismatch or any NaN/Inf,
// which std::max(d, NaN) would silently skip.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || b.empty()) return std::numeric_limits<double>::infinity();
  double d = 0, lo = b[0], hi = b[0];
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      ADD_FAILURE() << "non-finite value at " << i << ": " << a[i] << " vs " << b[i];
      return std::numeric_limits<double>::infinity();
    }
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    lo = std::min<double>(lo, b[i]);
    hi = std::max<double>(hi, b[i]);
  }
  return d / (hi > lo ? hi - lo : 1.0);
}

io::OwnedTensor copy_tensor(const io::TensorView& t, std::string name) {
  io::OwnedTensor o{std::move(name), t.dtype, t.shape, {}};
  o.data.assign(t.data, t.data + t.nbytes);
  return o;
}

io::OwnedTensor f32_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  return io::make_owned_tensor(std::move(name), DType::F32, std::move(shape), v);
}

// A fresh folder holding the fixture's config.json and the given tensors.
class TempModel {
 public:
  explicit TempModel(const std::string& tag) {
    dir_ = fs::temp_directory_path() / ("deepinfer_ckpt_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kFixture + "/config.json", dir_ / "config.json");
  }
  ~TempModel() { fs::remove_all(dir_); }
  void write(const std::vector<io::OwnedTensor>& tensors) { io::write_safetensors(dir_ / "model.safetensors", tensors); }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// transformers 5 on-disk name -> released checkpoint name.
std::string released_name(const std::string& name) {
  static const std::map<std::string, std::string> top = {{"model.embed_tokens.weight", "embed.weight"},
                                                         {"model.norm.weight", "norm.weight"},
                                                         {"model.hc_head.hc_fn", "hc_head_fn"},
                                                         {"model.hc_head.hc_base", "hc_head_base"},
                                                         {"model.hc_head.hc_scale", "hc_head_scale"}};
  if (auto it = top.find(name); it != top.end()) return it->second;
  std::string s = name.starts_with("model.") ? name.substr(6) : name;
  return std::regex_replace(s, std::regex(R"(\.attn\.norm\.)"), ".attn.kv_norm.");
}

TEST(CheckpointNames, ReleasedNamesLoadToTheSameLogits) {
  const auto want = prefill_logits(kFixture);
  auto src = io::Checkpoint::open(kFixture);
  std::vector<io::OwnedTensor> out;
  for (const auto& [name, t] : src.tensors()) out.push_back(copy_tensor(t, released_name(name)));
  TempModel tmp("released");
  tmp.write(out);
  EXPECT_EQ(max_rel_diff(prefill_logits(tmp.dir()), want), 0.0);
}

// Released name -> transformers in-memory module path (experts fused separately). Written out
// independently of src/io/tensor_names.cpp on purpose: a shared table could not catch its own typo.
std::string in_memory_name(const std::string& released) {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
      {"attn.indexer.compressor.wkv", "self_attn.compressor.indexer.kv_proj"},
      {"attn.indexer.compressor.wgate", "self_attn.compressor.indexer.gate_proj"},
      {"attn.indexer.compressor.norm", "self_attn.compressor.indexer.kv_norm"},
      {"attn.indexer.wq_b", "self_attn.compressor.indexer.q_b_proj"},
      {"attn.indexer.weights_proj", "self_attn.compressor.indexer.scorer.weights_proj"},
      {"attn.compressor.ape", "self_attn.compressor.position_bias"},
      {"attn.compressor.wkv", "self_attn.compressor.kv_proj"},
      {"attn.compressor.wgate", "self_attn.compressor.gate_proj"},
      {"attn.compressor.norm", "self_attn.compressor.kv_norm"},
      {"attn.attn_sink", "self_attn.sinks"},
      {"attn.wq_a", "self_attn.q_a_proj"},
      {"attn.wq_b", "self_attn.q_b_proj"},
      {"attn.q_norm", "self_attn.q_a_norm"},
      {"attn.wkv", "self_attn.kv_proj"},
      {"attn.kv_norm", "self_attn.kv_norm"},
      {"attn.wo_a", "self_attn.o_a_proj"},
      {"attn.wo_b", "self_attn.o_b_proj"},
      {"attn_norm", "input_layernorm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"hc_attn_fn", "attn_hc.fn"},
      {"hc_attn_base", "attn_hc.base"},
      {"hc_attn_scale", "attn_hc.scale"},
      {"hc_ffn_fn", "ffn_hc.fn"},
      {"hc_ffn_base", "ffn_hc.base"},
      {"hc_ffn_scale", "ffn_hc.scale"},
      {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
      {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
      {"ffn.gate.weight", "mlp.gate.weight"},
      {"ffn.shared_experts.w1", "mlp.shared_experts.gate_proj"},
      {"ffn.shared_experts.w3", "mlp.shared_experts.up_proj"},
      {"ffn.shared_experts.w2", "mlp.shared_experts.down_proj"},
  };
  if (released == "embed.weight") return "model.embed_tokens.weight";
  if (released == "head.weight") return "lm_head.weight";
  if (released == "norm.weight") return "model.norm.weight";
  if (released.starts_with("hc_head_")) return "model.hc_head.hc_" + released.substr(8);
  std::smatch m;
  if (!std::regex_match(released, m, std::regex(R"((layers\.\d+\.)(.*))"))) return released;
  const std::string rest = m[2];
  for (const auto& [native, hf] : renames)
    if (rest == native || rest.starts_with(native + ".")) return "model." + m[1].str() + hf + rest.substr(native.size());
  return "model." + released;
}

TEST(CheckpointNames, InMemoryNamesWithFusedExpertsLoadToTheSameLogits) {
  const auto want = prefill_logits(kFixture);
  auto src = io::Checkpoint::open(kFixture);
  std::vector<io::OwnedTensor> out;
  // experts[layer][expert] = {w1, w2, w3}
  std::map<int, std::map<int, std::array<const io::TensorView*, 3>>> experts;
  const std::regex expert_re(R"(model\.layers\.(\d+)\.ffn\.experts\.(\d+)\.w([123])\.weight)");
  for (const auto& [name, t] : src.tensors()) {
    std::smatch m;
    if (std::regex_match(name, m, expert_re)) {
      experts[std::stoi(m[1])][std::stoi(m[2])][std::stoi(m[3]) - 1] = &t;
      continue;
    }
    out.push_back(copy_tensor(t, in_memory_name(released_name(name))));
  }
  ASSERT_FALSE(experts.empty());
  for (const auto& [layer, per_expert] : experts) {
    const auto& first = *per_expert.begin()->second[0];
    const int64_t E = static_cast<int64_t>(per_expert.size()), I = first.shape[0], D = first.shape[1];
    io::OwnedTensor gate_up{"model.layers." + std::to_string(layer) + ".mlp.experts.gate_up_proj", first.dtype,
                            {E, 2 * I, D}, {}};
    io::OwnedTensor down{"model.layers." + std::to_string(layer) + ".mlp.experts.down_proj", first.dtype, {E, D, I}, {}};
    for (const auto& [e, w] : per_expert) {
      gate_up.data.insert(gate_up.data.end(), w[0]->data, w[0]->data + w[0]->nbytes);  // gate rows first
      gate_up.data.insert(gate_up.data.end(), w[2]->data, w[2]->data + w[2]->nbytes);  // then up
      down.data.insert(down.data.end(), w[1]->data, w[1]->data + w[1]->nbytes);
    }
    out.push_back(std::move(gate_up));
    out.push_back(std::move(down));
  }
  TempModel tmp("in_memory");
  tmp.write(out);
  EXPECT_EQ(max_rel_diff(prefill_logits(tmp.dir()), want), 0.0);
}

TEST(CheckpointNames, MissingUnexpectedAndMisshapedTensorsAreListedTogether) {
  auto src = io::Checkpoint::open(kFixture);
  std::vector<io::OwnedTensor> out;
  for (const auto& [name, t] : src.tensors()) {
    if (name == "model.layers.2.attn.wq_a.weight") continue;                    // missing
    io::OwnedTensor o = copy_tensor(t, name);
    if (name == "model.layers.0.attn.wkv.weight") o.shape = {o.shape[1], o.shape[0]} ; // mis-shaped (square here)
    if (name == "model.layers.1.attn.wo_b.weight") o.shape = {o.shape[0] / 2, o.shape[1] * 2};
    out.push_back(std::move(o));
  }
  out.push_back(f32_tensor("model.layers.0.attn.bogus", {2}, {1.0f, 2.0f}));  // unexpected
  TempModel tmp("broken");
  tmp.write(out);
  try {
    model::load_model(tmp.dir());
    FAIL() << "a broken checkpoint loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, ::testing::HasSubstr("1 missing tensor(s): layers.2.attn.wq_a.weight"));
    EXPECT_THAT(msg, ::testing::HasSubstr("model.layers.1.attn.wo_b.weight is [32, 128]"));
    EXPECT_THAT(msg, ::testing::HasSubstr("1 unexpected tensor(s): model.layers.0.attn.bogus"));
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "errors are one line";
  }
}

// --- Quantised weights -----------------------------------------------------------------------

uint8_t nearest_code(float v, int codes, float (*decode)(uint8_t)) {
  uint8_t best = 0;
  float best_err = INFINITY;
  for (int c = 0; c < codes; ++c) {
    const float d = decode(static_cast<uint8_t>(c));
    if (std::isnan(d)) continue;
    if (std::fabs(d - v) < best_err) best_err = std::fabs(d - v), best = static_cast<uint8_t>(c);
  }
  return best;
}

// Quantises W [rows, cols] to FP8 e4m3 with square power-of-two E8M0 block scales; returns the
// weight, the scale, and the dequantised values the engine must reproduce.
struct Quantised {
  io::OwnedTensor weight, scale;
  std::vector<float> dequantised;
};

Quantised quantise_fp8(const std::string& base, const std::vector<float>& w, int64_t rows, int64_t cols, int64_t block,
                       bool e8m0) {
  const int64_t sr = (rows + block - 1) / block, sc = (cols + block - 1) / block;
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols));
  std::vector<float> scale_f(static_cast<size_t>(sr * sc));
  std::vector<uint8_t> scale_e(static_cast<size_t>(sr * sc));
  std::vector<float> deq(w.size());
  for (int64_t bi = 0; bi < sr; ++bi)
    for (int64_t bj = 0; bj < sc; ++bj) {
      float amax = 1e-12f;
      for (int64_t r = bi * block; r < std::min(rows, (bi + 1) * block); ++r)
        for (int64_t c = bj * block; c < std::min(cols, (bj + 1) * block); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      float s = amax / 448.0f;
      if (e8m0) {  // round the scale up to a power of two
        const int e = static_cast<int>(std::ceil(std::log2(s)));
        s = std::ldexp(1.0f, e);
        scale_e[bi * sc + bj] = static_cast<uint8_t>(e + 127);
      }
      scale_f[bi * sc + bj] = s;
      for (int64_t r = bi * block; r < std::min(rows, (bi + 1) * block); ++r)
        for (int64_t c = bj * block; c < std::min(cols, (bj + 1) * block); ++c) {
          const uint8_t code = nearest_code(w[r * cols + c] / s, 256, f8e4m3_to_f32);
          q[r * cols + c] = code;
          deq[r * cols + c] = f8e4m3_to_f32(code) * s;
        }
    }
  Quantised out{io::make_owned_tensor(base + ".weight", DType::F8_E4M3, {rows, cols}, q), {}, deq};
  out.scale = e8m0 ? io::make_owned_tensor(base + ".scale", DType::F8_E8M0, {sr, sc}, scale_e)
                   : io::make_owned_tensor(base + ".weight_scale_inv", DType::F32, {sr, sc}, scale_f);
  return out;
}

Quantised quantise_fp4(const std::string& base, const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2), 0), scales(static_cast<size_t>(rows * cols / 32));
  std::vector<float> deq(w.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 32; ++g) {
      float amax = 1e-12f;
      for (int64_t c = g * 32; c < (g + 1) * 32; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const int e = static_cast<int>(std::ceil(std::log2(amax / 6.0f)));
      scales[r * (cols / 32) + g] = static_cast<uint8_t>(e + 127);
      const float s = std::ldexp(1.0f, e);
      for (int64_t c = g * 32; c < (g + 1) * 32; ++c) {
        const uint8_t code = nearest_code(w[r * cols + c] / s, 16, f4e2m1_to_f32);
        packed[(r * cols + c) / 2] |= static_cast<uint8_t>((c % 2 == 0) ? code : code << 4);
        deq[r * cols + c] = f4e2m1_to_f32(code) * s;
      }
    }
  return {io::make_owned_tensor(base + ".weight", DType::I8, {rows, cols / 2}, packed),
          io::make_owned_tensor(base + ".scale", DType::F8_E8M0, {rows, cols / 32}, scales), deq};
}

TEST(QuantisedWeights, Fp8BlockScalesAndFp4ExpertsMatchTheirDequantisedValues) {
  auto src = io::Checkpoint::open(kFixture);
  std::vector<io::OwnedTensor> quantised, reference;
  int fp8 = 0, fp4 = 0;
  for (const auto& [name, t] : src.tensors()) {
    const std::string released = released_name(name);
    const bool dense_fp8 = std::regex_search(released, std::regex(R"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)\.weight$|shared_experts\.w[123]\.weight$)"));
    const bool expert_fp4 = std::regex_search(released, std::regex(R"(ffn\.experts\.\d+\.w[123]\.weight$)"));
    if (!dense_fp8 && !expert_fp4) {
      quantised.push_back(copy_tensor(t, released));
      reference.push_back(copy_tensor(t, released));
      continue;
    }
    const std::string base = released.substr(0, released.size() - 7);  // drop ".weight"
    const int64_t rows = t.shape[0], cols = t.shape[1];
    Quantised q = expert_fp4 ? quantise_fp4(base, io::to_float(t), rows, cols)
                             // alternate the scale formats and block sizes (32 divides, 128 does not)
                             : quantise_fp8(base, io::to_float(t), rows, cols, fp8 % 2 ? 32 : 128, fp8 % 3 != 0);
    (expert_fp4 ? fp4 : fp8)++;
    reference.push_back(f32_tensor(released, {rows, cols}, q.dequantised));
    quantised.push_back(std::move(q.weight));
    quantised.push_back(std::move(q.scale));
  }
  ASSERT_GT(fp8, 10);
  ASSERT_GT(fp4, 10);
  TempModel a("fp8"), b("fp8_reference");
  a.write(quantised);
  b.write(reference);
  EXPECT_LE(max_rel_diff(prefill_logits(a.dir()), prefill_logits(b.dir())), 1e-6);
}

}  // namespace
}  // namespace deepinfer
