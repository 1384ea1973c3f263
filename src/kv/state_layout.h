#pragma once
// Where each layer's state lives inside a slot (bounded per-sequence state) and inside a block
// (compressed KV entries and indexer keys of `block_tokens` positions, all compressed layers), and
// what that costs in bytes. The model describes its layers; plan_layout assigns the offsets.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/state.h"
#include "core/dtype.h"

namespace deepinfer::kv {

struct CompressorSpec {
  int64_t rate = 0, head_dim = 0;
  bool overlap = false;
};

// What one layer keeps: a window ring, and on compressed layers a compressor (CSA: plus the indexer's).
struct LayerStateSpec {
  int64_t window = 0, head_dim = 0;
  std::optional<CompressorSpec> compressor, indexer;
};

struct LayerStateLayout {
  backend::WindowLayout window;
  std::optional<backend::CompressorLayout> compressor, indexer;
};

struct StateLayout {
  DType dtype = DType::F32;  // element type of both pools
  int64_t block_tokens = 0;  // positions one block covers
  int64_t slot_elems = 0;    // elements per slot
  int64_t block_elems = 0;   // elements per block
  std::vector<LayerStateLayout> layers;

  size_t element_bytes() const { return dtype_bits(dtype) / 8; }
  size_t slot_bytes() const { return static_cast<size_t>(slot_elems) * element_bytes(); }
  size_t block_bytes() const { return static_cast<size_t>(block_elems) * element_bytes(); }
  double bytes_per_token() const { return static_cast<double>(block_bytes()) / static_cast<double>(block_tokens); }
  // Blocks a sequence of `positions` tokens needs.
  int64_t blocks_for(int64_t positions) const { return (positions + block_tokens - 1) / block_tokens; }
};

// The smallest block size >= min_block_tokens that is a multiple of every compress rate.
int64_t choose_block_tokens(const std::vector<LayerStateSpec>& layers, int64_t min_block_tokens = 64);

StateLayout plan_layout(const std::vector<LayerStateSpec>& layers, int64_t block_tokens, DType dtype = DType::F32);

}  // namespace deepinfer::kv
