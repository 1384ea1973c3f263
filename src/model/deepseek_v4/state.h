#pragma once
// What DeepSeek-V4 keeps per sequence and layer (see MODELS.md): the sliding-window KV ring on every
// layer; on compressed layers the compressor's unfinished window (and for CSA the previous window's
// overlap half) in the sequence's slot, and its compressed entries in blocks; on CSA layers the same
// again for the indexer's own compressor (its entries are the indexer keys).
#include <vector>

#include "io/model_config.h"
#include "kv/state_layout.h"
#include "kv/stored_format.h"

namespace deepinfer::model::deepseek_v4 {

// Computed from the config alone, so `deepinfer inspect` can size pools for configs it has no
// weights for.
std::vector<kv::LayerStateSpec> state_specs(const io::ModelConfig& config);
// The layout the CPU backend's pools use for this config (F32, block size from choose_block_tokens).
kv::StateLayout state_layout(const io::ModelConfig& config);
// The encodings of the released model (SERVING.md): window and compressed KV 448 FP8 + 64 BF16 rope
// + E8M0 scales (584 B at head_dim 512), indexer keys FP4 with E8M0 scales per 32 (68 B at 128).
kv::StoredFormats released_formats(const io::ModelConfig& config);

}  // namespace deepinfer::model::deepseek_v4
