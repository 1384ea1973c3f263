// State accounting of the released configs against hand arithmetic (MODELS.md): DeepSeek-V4.1-Flash
// holds 890 bytes of global KV per token in its released encodings and DeepSeek-V4-Flash 3,514.25;
// the same layouts in the CPU pools' F32 are what a StatePool allocates.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "kv/state_pool.h"
#include "kv/stored_format.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v41/state.h"

namespace deepinfer::kv {
namespace {

const std::filesystem::path kData = DEEPINFER_TEST_DATA_DIR;

StoredFormats all_f32() { return {}; }

// A pool of one slot and one block holds exactly one slot and one block of the layout, and its
// scratch slot and block (padding rows of recorded steps) as much again.
void expect_pool_allocates(const StateLayout& layout) {
  const StatePool pool(layout, 1, 1);
  EXPECT_EQ(pool.scratch_bytes(), layout.slot_bytes() + layout.block_bytes());
  EXPECT_EQ(pool.allocated_bytes() - pool.scratch_bytes(), layout.slot_bytes() + layout.block_bytes());
}

TEST(StateAccounting, RowEncodings) {
  EXPECT_EQ(encoded_row_bytes(RowEncoding::F32, 512), 2048u);
  EXPECT_EQ(encoded_row_bytes(RowEncoding::Mxfp8, 512), 528u);            // 512 + 512/32
  EXPECT_EQ(encoded_row_bytes(RowEncoding::Fp8WithBf16Rope, 512, 64), 584u);  // 448 + 128 + 7 -> 8
  EXPECT_EQ(encoded_row_bytes(RowEncoding::Nvfp4, 512), 288u);            // 256 + 512/16
  EXPECT_EQ(encoded_row_bytes(RowEncoding::Mxfp4, 128), 68u);             // 64 + 128/32
  EXPECT_THROW(encoded_row_bytes(RowEncoding::Mxfp4, 100), Error);       // not whole groups
  EXPECT_THROW(encoded_row_bytes(RowEncoding::Fp8WithBf16Rope, 64, 64), Error);
  EXPECT_EQ(encoded_row_bytes(RowEncoding::Fp8WithBf16Rope, 64, 16), 48u + 32u + 8u);  // kjv: one partial group
}

TEST(StateAccounting, ReleasedV41FlashHolds890BytesOfGlobalKvPerToken) {
  const io::DeepseekV41Config c = io::load_deepseek_v41_config(kData / "configs" / "deepseek-v4.1-flash");
  const StateLayout l = model::deepseek_v41::state_layout(c);
  // 40 layers + 3 DSpark stages, each with a window ring; compressed state only at 2, 8, 14, 20.
  ASSERT_EQ(l.layers.size(), 43u);
  int compressed = 0;
  for (const auto& layer : l.layers) compressed += layer.compressor.has_value();
  EXPECT_EQ(compressed, 4);
  EXPECT_EQ(l.block_tokens, 64);  // lcm(2, 1) = 2, first multiple >= 64
  // F32 pools: 3 ratio-2 sources x (512 + 128) / 2 + the ratio-1 source's 512 + 128 = 1,600 floats.
  EXPECT_EQ(l.bytes_per_token(), 6400.0);
  EXPECT_EQ(stored_state_bytes(l, all_f32()).global_per_token, l.bytes_per_token());
  expect_pool_allocates(l);

  // Released encodings: KV 3 x 288/2 + 288 = 720, index keys 3 x 68/2 + 68 = 170.
  const StoredStateBytes r = stored_state_bytes(l, model::deepseek_v41::released_formats(c));
  EXPECT_EQ(r.kv_per_token, 720.0);
  EXPECT_EQ(r.index_per_token, 170.0);
  EXPECT_EQ(r.global_per_token, 890.0);
  // Window rings: 43 x 128 rows x 528 B.
  EXPECT_EQ(r.window_bytes, 43 * 128 * 528);
}

TEST(StateAccounting, ReleasedV4FlashHolds3514BytesOfGlobalKvPerToken) {
  const io::ModelConfig c = io::load_model_config(kData / "configs" / "deepseek-v4-flash");
  const StateLayout l = model::deepseek_v4::state_layout(c);
  EXPECT_EQ(stored_state_bytes(l, all_f32()).global_per_token, l.bytes_per_token());  // 13,760
  expect_pool_allocates(l);
  // 21 CSA layers: 584/4 KV + 68/4 index key = 146 + 17 = 163; 20 HCA layers: 584/128 = 4.5625.
  const StoredStateBytes r = stored_state_bytes(l, model::deepseek_v4::released_formats(c));
  EXPECT_EQ(r.kv_per_token, 21 * 146.0 + 20 * 4.5625);
  EXPECT_EQ(r.index_per_token, 21 * 17.0);
  EXPECT_EQ(r.global_per_token, 3514.25);
  EXPECT_EQ(r.window_bytes, 43 * 128 * 584);
}

TEST(StateAccounting, V41FixtureMatchesHandArithmetic) {
  // v41_tiny_bf16: kv sources 1 (ratio 2) and 3 (ratio 1), head_dim 64, index_head_dim 32,
  // window 16, 5 layers + 1 DSpark stage.
  const io::DeepseekV41Config c = io::load_deepseek_v41_config(kData / "fixtures" / "v41_tiny_bf16");
  const StateLayout l = model::deepseek_v41::state_layout(c);
  // F32: (64 + 32) / 2 + (64 + 32) = 144 floats = 576 B per token.
  EXPECT_EQ(l.bytes_per_token(), 576.0);
  // Slot: 6 rings x 16 x 64 = 6,144; ratio-2 source: kv and gate groups 2 x 2 x 64 = 256 and
  // 2 x 2 x 32 = 128 for its index keys; ratio-1 source: 2 x 1 x 64 + 2 x 1 x 32 = 192.
  EXPECT_EQ(l.slot_elems, 6144 + 256 + 128 + 192);
  // Released: KV 36/2 + 36, index 17/2 + 17.
  const StoredStateBytes r = stored_state_bytes(l, model::deepseek_v41::released_formats(c));
  EXPECT_EQ(r.global_per_token, 18.0 + 36.0 + 8.5 + 17.0);
}

}  // namespace
}  // namespace deepinfer::kv
