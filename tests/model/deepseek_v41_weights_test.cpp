// DeepSeek-V4.1 weights as released: the tensor inventory derived from the config is exactly what
// both fixture checkpoints hold (and what the released checkpoint's role counts say), the loader
// keeps FP8 / FP4 / FP8-Engram tensors quantised as views into the mmap, and they widen to the
// same values as io's independent dequantisers; a broken checkpoint gives one error listing all.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>

#include <unistd.h>

#include "core/error.h"
#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/deepseek_v41/tensors.h"
#include "model/deepseek_v41/weights.h"
#include "model/model.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

namespace fs = std::filesystem;
const fs::path kData = DEEPINFER_TEST_DATA_DIR;
const fs::path kBf16 = kData / "fixtures" / "v41_tiny_bf16";
const fs::path kFp8 = kData / "fixtures" / "v41_tiny_fp8";

TEST(DeepseekV41Tensors, InventoryIsExactlyEachFixtureCheckpoint) {
  for (const fs::path& dir : {kBf16, kFp8}) {
    SCOPED_TRACE(dir.filename().string());
    const auto config = io::load_deepseek_v41_config(dir);
    const auto checkpoint = io::Checkpoint::open(dir);
    const auto specs = checkpoint_tensors(config);
    EXPECT_EQ(specs.size(), checkpoint.tensors().size());
    for (const TensorSpec& s : specs) {
      ASSERT_TRUE(checkpoint.contains(s.name)) << s.name;
      const io::TensorView& t = checkpoint.get(s.name);
      EXPECT_EQ(t.dtype, s.dtype) << s.name;
      EXPECT_EQ(t.shape, s.shape) << s.name;
      EXPECT_EQ(static_cast<int64_t>(t.nbytes), s.bytes()) << s.name;
    }
  }
}

// Role counts of the released checkpoint (tests/data/configs/deepseek-v4.1-flash/README.md, C).
TEST(DeepseekV41Tensors, ReleasedInventoryHasTheCheckpointsRoleCounts) {
  const auto config = io::load_deepseek_v41_config(kData / "configs" / "deepseek-v4.1-flash");
  const auto specs = checkpoint_tensors(config);
  auto count = [&](const std::string& pattern) {
    const std::regex re(pattern);
    return std::count_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return std::regex_match(s.name, re); });
  };
  EXPECT_EQ(count(R"(layers\.\d+\.attn\.wq_a\.weight)"), 40);
  EXPECT_EQ(count(R"(layers\.\d+\.attn\.compressor\.wkv\.weight)"), 4);
  EXPECT_EQ(count(R"(layers\.\d+\.attn\.compressor\.wgate\.weight)"), 3);
  EXPECT_EQ(count(R"(layers\.\d+\.attn\.indexer\.wq_b\.weight)"), 8);
  EXPECT_EQ(count(R"(layers\.\d+\.attn\.indexer\.wk\.weight)"), 4);
  EXPECT_EQ(count(R"(layers\.\d+\.engram\.embed\.weight)"), 2);
  EXPECT_EQ(count(R"(layers\.\d+\.ffn\.experts\.\d+\.w1\.weight)"), 40 * 384);
  EXPECT_EQ(count(R"(mtp\.\d+\.ffn\.experts\.\d+\.w1\.weight)"), 3 * 128);
  EXPECT_EQ(count(R"(mtp\.\d+\.(markov_head\.embed|confidence_head\.proj|main_proj)\.weight)"), 3);
  EXPECT_EQ(count(R"(mtp\.\d+\.(embed|head)\.weight)"), 0);  // tied to the main ones, not stored
  int64_t engram = 0;
  for (const auto& s : specs)
    if (s.component == "Engram tables") engram += s.parameters();
  EXPECT_EQ(engram, (384006168LL + 384016682LL) * 256);  // ~196.6B, "the bulk of the checkpoint"
  // The released checkpoint is 475.3 GiB with its vision tower (README, C); the text model alone
  // must come just under it.
  int64_t bytes = 0;
  for (const auto& s : specs) bytes += s.bytes();
  EXPECT_LT(static_cast<double>(bytes), 475.35 * (1 << 30));
  EXPECT_GT(static_cast<double>(bytes), 474.0 * (1 << 30));
  // The FP8 dense scale grid is 32x32: wq_a [1280, 5120] has [40, 160] scales.
  const auto wq_a_scale = std::find_if(specs.begin(), specs.end(), [](auto& s) { return s.name == "layers.0.attn.wq_a.scale"; });
  ASSERT_NE(wq_a_scale, specs.end());
  EXPECT_EQ(wq_a_scale->shape, (std::vector<int64_t>{40, 160}));
}

TEST(DeepseekV41Weights, Fp8CheckpointStaysQuantisedAndWidensLikeTheDequantisers) {
  const auto config = io::load_deepseek_v41_config(kFp8);
  const auto w = load_weights(kFp8, config, {});
  const auto& cp = w->checkpoint;
  ASSERT_EQ(w->layers.size(), 7u);
  ASSERT_EQ(w->mtp.size(), 2u);

  const WeightMatrix& wq_a = w->layers[0].attn.wq_a;
  EXPECT_EQ(wq_a.dtype, DType::F8_E4M3);
  EXPECT_EQ(wq_a.data, cp.get("layers.0.attn.wq_a.weight").data);  // a view into the mmap
  EXPECT_EQ(wq_a.block_rows, 32);
  EXPECT_EQ(wq_a.block_cols, 32);
  auto expect_rows_equal = [](const WeightMatrix& m, const std::vector<float>& reference) {
    ASSERT_EQ(static_cast<int64_t>(reference.size()), m.rows * m.cols);
    std::vector<float> row(static_cast<size_t>(m.cols));
    for (int64_t r = 0; r < m.rows; ++r) {
      m.row_to_float(r, row.data());
      for (int64_t c = 0; c < m.cols; ++c) ASSERT_EQ(row[c], reference[r * m.cols + c]) << "row " << r << " col " << c;
    }
  };
  expect_rows_equal(wq_a, io::dequantize_fp8_blocks(cp.get("layers.0.attn.wq_a.weight"), cp.get("layers.0.attn.wq_a.scale")));
  expect_rows_equal(w->layers[4].attn.wo_a,
                    io::dequantize_fp8_blocks(cp.get("layers.4.attn.wo_a.weight"), cp.get("layers.4.attn.wo_a.scale")));

  const WeightMatrix& w2 = w->layers[3].ffn.experts[5].w2;
  EXPECT_EQ(w2.dtype, DType::F4_E2M1);
  EXPECT_EQ(w2.rows, 64);
  EXPECT_EQ(w2.cols, 32);  // logical columns: two per stored byte
  expect_rows_equal(w2, io::dequantize_fp4(cp.get("layers.3.ffn.experts.5.w2.weight"), cp.get("layers.3.ffn.experts.5.w2.scale")));

  // Engram table: FP8 rows with one E8M0 scale per 32 values of the row.
  ASSERT_TRUE(w->layers[6].engram);
  EXPECT_EQ(w->layers[6].engram->index, 1);
  const WeightMatrix& table = w->layers[6].engram->table;
  EXPECT_EQ(table.dtype, DType::F8_E4M3);
  const auto raw = io::to_float(cp.get("layers.6.engram.embed.weight"));
  const auto scales = io::to_float(cp.get("layers.6.engram.embed.scale"));
  std::vector<float> expected(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) expected[i] = raw[i] * scales[i / 32];  // head_dim 32: one scale a row
  expect_rows_equal(table, expected);

  // Roles: compressors only at kv sources, wgate only above ratio 1, index keys only at kv sources.
  EXPECT_TRUE(w->layers[1].attn.compressor && w->layers[1].attn.compressor->wgate.valid());
  EXPECT_TRUE(w->layers[4].attn.compressor && !w->layers[4].attn.compressor->wgate.valid());
  EXPECT_FALSE(w->layers[2].attn.compressor);
  EXPECT_TRUE(w->layers[2].attn.indexer && !w->layers[2].attn.indexer->owns_keys());
  EXPECT_TRUE(w->layers[1].attn.indexer->owns_keys());
  EXPECT_FALSE(w->layers[3].attn.indexer);
  EXPECT_TRUE(w->mtp[0].main_proj.valid());
  EXPECT_FALSE(w->mtp[0].markov_head.valid());
  EXPECT_TRUE(w->mtp[1].markov_head.valid() && w->mtp[1].confidence.valid());
}

TEST(DeepseekV41Weights, Bf16CheckpointLoads) {
  const auto config = io::load_deepseek_v41_config(kBf16);
  const auto w = load_weights(kBf16, config, {});
  EXPECT_EQ(w->layers[2].ffn.experts[7].w1.dtype, DType::BF16);
  EXPECT_EQ(w->layers[0].engram->table.dtype, DType::F8_E4M3);  // FP8 Engram in every V4.1 checkpoint
  EXPECT_EQ(w->layers[1].engram->index, 1);
  EXPECT_EQ(w->mtp.size(), 1u);
  EXPECT_TRUE(w->mtp[0].main_proj.valid() && w->mtp[0].markov_embed.valid());
}

// A V4.1 folder loads as a CausalLM with the shared fields of its config.
TEST(DeepseekV41Weights, LoadModelRunsV41Folders) {
  auto m = model::load_model(kBf16);
  EXPECT_EQ(m->config().model_type, "deepseek_v41");
  EXPECT_EQ(m->vocab_size(), 512);
}

class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("deepinfer_v41_weights_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    fs::copy_file(kFp8 / "config.json", dir_ / "config.json", fs::copy_options::overwrite_existing);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The fixture's tensors with `edit` applied, written as the folder's checkpoint.
  template <typename Edit>
  void write_edited(Edit edit) {
    const auto cp = io::Checkpoint::open(kFp8);
    std::vector<io::OwnedTensor> tensors;
    for (const auto& [name, t] : cp.tensors()) {
      io::OwnedTensor o{name, t.dtype, t.shape, std::vector<std::byte>(t.data, t.data + t.nbytes)};
      tensors.push_back(std::move(o));
    }
    edit(tensors);
    io::write_safetensors(dir_ / "model.safetensors", tensors);
  }
  std::string load_error() {
    try {
      load_weights(dir_, io::load_deepseek_v41_config(dir_), {});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(BrokenCheckpoint, OneErrorListsEveryProblem) {
  write_edited([](std::vector<io::OwnedTensor>& ts) {
    std::erase_if(ts, [](const io::OwnedTensor& t) { return t.name == "layers.2.attn.indexer.wq_b.scale"; });
    for (auto& t : ts) {
      if (t.name == "layers.0.attn.wkv.weight") t.dtype = DType::I8;  // same bytes, wrong dtype
      if (t.name == "layers.4.ffn.gate.bias") {
        t.shape = {4};
        t.data.resize(16);
      }
    }
    ts.push_back(io::make_owned_tensor("layers.3.attn.compressor.wkv.weight", DType::BF16, {64, 64},
                                       std::vector<uint16_t>(64 * 64, 0)));
  });
  const std::string e = load_error();
  EXPECT_NE(e.find("does not match its DeepSeek-V4.1 config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("1 missing tensor(s):\n  layers.2.attn.indexer.wq_b.scale"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.attn.wkv.weight: expected F8_E4M3 [64, 64], found I8 [64, 64]"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.4.ffn.gate.bias: expected F32 [8], found F32 [4]"), std::string::npos) << e;
  EXPECT_NE(e.find("1 unexpected tensor(s):\n  layers.3.attn.compressor.wkv.weight"), std::string::npos) << e;
}

TEST_F(BrokenCheckpoint, VisionTensorsAreIgnored) {
  write_edited([](std::vector<io::OwnedTensor>& ts) {
    ts.push_back(io::make_owned_tensor("vision.blocks.0.attn.qkv.weight", DType::BF16, {2, 2}, std::vector<uint16_t>(4, 0)));
    ts.push_back(io::make_owned_tensor("layers.0.ffn.gate.bias_vl", DType::F32, {8}, std::vector<float>(8, 0.f)));
  });
  EXPECT_EQ(load_error(), "");
}

}  // namespace
}  // namespace deepinfer::model::deepseek_v41
