// State layouts of real configs against hand arithmetic: the bytes per token and per sequence slot
// that the pools allocate for the bundled kjv-tiny-v4 model and the released DeepSeek-V4-Flash config
// (tests/data/configs/deepseek-v4-flash), plus the planner's own rules.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/model_config.h"
#include "kv/state_layout.h"
#include "model/deepseek_v4/state.h"

namespace deepinfer::kv {
namespace {

const std::filesystem::path kData = DEEPINFER_TEST_DATA_DIR;
const std::filesystem::path kModels = DEEPINFER_MODELS_DIR;

StateLayout layout_of(const std::filesystem::path& dir) {
  return model::deepseek_v4::state_layout(io::load_model_config(dir));
}

TEST(StateLayout, KjvTinyV4MatchesHandArithmetic) {
  // config: 6 layers [sliding, sliding, CSA, HCA, CSA, HCA], head_dim 64, window 64,
  // index_head_dim 32, CSA rate 4, HCA rate 16; F32 = 4 bytes.
  const StateLayout l = layout_of(kModels / "kjv-tiny-v4");
  ASSERT_EQ(l.dtype, DType::F32);
  // Block: the smallest multiple of lcm(4, 16) = 16 that is >= 64.
  EXPECT_EQ(l.block_tokens, 64);
  // Per token, per compressed layer head_dim / rate entries (+ index_head_dim / rate on CSA):
  //   CSA: 64/4 + 32/4 = 16 + 8 = 24 floats; HCA: 64/16 = 4 floats.
  //   2 CSA + 2 HCA = 48 + 8 = 56 floats = 224 bytes.
  EXPECT_EQ(l.bytes_per_token(), 224.0);
  EXPECT_EQ(l.block_bytes(), 224u * 64u);  // 14,336
  // Slot: window * head_dim per layer = 64 * 64 = 4096 floats x 6 layers = 24,576;
  //   compressor partial state 2 * rate * width (+ 2 * rate * head_dim with overlap):
  //   CSA main, width 128 (overlap):   2*4*128 + 2*4*64 = 1024 + 512 = 1536
  //   CSA indexer, width 64 (overlap): 2*4*64 + 2*4*32 =  512 + 256 =  768
  //   HCA, width 64:                   2*16*64                      = 2048
  //   24,576 + 2 * (1536 + 768) + 2 * 2048 = 33,280 floats = 133,120 bytes.
  EXPECT_EQ(l.slot_elems, 33280);
  EXPECT_EQ(l.slot_bytes(), 133120u);
  EXPECT_EQ(l.blocks_for(1), 1);
  EXPECT_EQ(l.blocks_for(64), 1);
  EXPECT_EQ(l.blocks_for(65), 2);
}

TEST(StateLayout, ReleasedDeepSeekV4FlashMatchesHandArithmetic) {
  // config: 43 layers: 0-1 sliding, then CSA (rate 4) on even and HCA (rate 128) on odd layers up
  // to 42: 21 CSA, 20 HCA; head_dim 512, window 128, index_head_dim 128.
  const io::ModelConfig c = io::load_model_config(kData / "configs" / "deepseek-v4-flash");
  ASSERT_EQ(c.num_hidden_layers, 43);
  int csa = 0, hca = 0;
  for (auto kind : c.layer_types) csa += kind == io::AttentionKind::CSA, hca += kind == io::AttentionKind::HCA;
  ASSERT_EQ(csa, 21);
  ASSERT_EQ(hca, 20);
  const StateLayout l = model::deepseek_v4::state_layout(c);
  EXPECT_EQ(l.block_tokens, 128);  // lcm(4, 128) = 128 >= 64
  // Per token: CSA 512/4 + 128/4 = 128 + 32 = 160 floats; HCA 512/128 = 4 floats.
  //   21 * 160 + 20 * 4 = 3360 + 80 = 3440 floats = 13,760 bytes.
  EXPECT_EQ(l.bytes_per_token(), 13760.0);
  EXPECT_EQ(l.block_bytes(), 13760u * 128u);  // 1,761,280
  // Slot: windows 43 * 128 * 512 = 2,818,048 floats;
  //   CSA main, width 1024 (overlap):  2*4*1024 + 2*4*512 = 8192 + 4096 = 12,288
  //   CSA indexer, width 256 (overlap): 2*4*256 + 2*4*128 = 2048 + 1024 =  3,072
  //   HCA, width 512:                   2*128*512                      = 131,072
  //   2,818,048 + 21 * (12,288 + 3,072) + 20 * 131,072 = 2,818,048 + 322,560 + 2,621,440
  //   = 5,762,048 floats = 23,048,192 bytes.
  EXPECT_EQ(l.slot_elems, 5762048);
  EXPECT_EQ(l.slot_bytes(), 23048192u);
}

TEST(StateLayout, OffsetsTileSlotsAndBlocks) {
  const StateLayout l = layout_of(kModels / "kjv-tiny-v4");
  int64_t slot_end = 0, block_end = 0;
  for (const auto& layer : l.layers) {
    EXPECT_EQ(layer.window.slot_offset, slot_end);
    slot_end += layer.window.window * layer.window.head_dim;
    for (const auto* c : {&layer.compressor, &layer.indexer}) {
      if (!*c) continue;
      EXPECT_EQ((*c)->slot_offset, slot_end);
      EXPECT_EQ((*c)->block_offset, block_end);
      EXPECT_EQ((*c)->entries_per_block * (*c)->rate, l.block_tokens);
      EXPECT_EQ((*c)->width, (*c)->overlap ? 2 * (*c)->head_dim : (*c)->head_dim);
      slot_end += (*c)->slot_elems();
      block_end += (*c)->entries_per_block * (*c)->head_dim;
    }
  }
  EXPECT_EQ(slot_end, l.slot_elems);
  EXPECT_EQ(block_end, l.block_elems);
}

TEST(StateLayout, PlannerRules) {
  std::vector<LayerStateSpec> specs(2);
  specs[0] = {8, 16, CompressorSpec{4, 16, true}, CompressorSpec{4, 8, true}};
  specs[1] = {8, 16, CompressorSpec{48, 16, false}, std::nullopt};
  EXPECT_EQ(choose_block_tokens(specs), 96);      // lcm(4, 48) = 48, first multiple >= 64
  EXPECT_EQ(choose_block_tokens(specs, 100), 144);
  EXPECT_EQ(choose_block_tokens({LayerStateSpec{8, 16, std::nullopt, std::nullopt}}), 64);  // window only
  EXPECT_THROW(plan_layout(specs, 100), Error);  // not a multiple of 48
  EXPECT_THROW(plan_layout(specs, 0), Error);
  EXPECT_THROW(plan_layout(specs, 96, DType::BF16), Error);  // CPU pools hold F32
  const StateLayout l = plan_layout(specs, 96);
  // Block: (96/4)*16 + (96/4)*8 + (96/48)*16 = 384 + 192 + 32 = 608 floats.
  EXPECT_EQ(l.block_elems, 608);
  // Slot: 2 windows 8*16 = 256; main (width 32) 2*4*32 + 2*4*16 = 384; indexer (width 16)
  // 2*4*16 + 2*4*8 = 192; HCA-like (width 16) 2*48*16 = 1536.
  EXPECT_EQ(l.slot_elems, 256 + 384 + 192 + 1536);
}

}  // namespace
}  // namespace deepinfer::kv
