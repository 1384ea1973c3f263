#pragma once
// What DeepSeek-V4.1 keeps per sequence (MODELS.md, "CSA2 sharing"): a sliding-window ring on every
// layer and DSpark stage; compressed KV entries and index keys only at the kv-source layers, which
// every later layer of the same ratio reads; the ratio-2 compressors' unfinished groups in the slot.
#include <vector>

#include "io/deepseek_v41_config.h"
#include "kv/state_layout.h"
#include "kv/stored_format.h"

namespace deepinfer::model::deepseek_v41 {

// Layers 0..n-1 of the backbone, then one window-only entry per DSpark stage.
std::vector<kv::LayerStateSpec> state_specs(const io::DeepseekV41Config& config);
// The layout the CPU backend's pools use (F32, block size from choose_block_tokens).
kv::StateLayout state_layout(const io::DeepseekV41Config& config);
// What the forward keeps: state_layout plus, with Engram, one more ring (after the DSpark stages)
// of the last max_ngram - 1 compressed token ids, the n-gram history of the next step's tokens.
kv::StateLayout forward_layout(const io::DeepseekV41Config& config);
// The encodings of the released model: window KV FP8 (MXFP8), compressed KV FP4 with E4M3 scales
// per 16, index keys FP4 with E8M0 scales per 32.
kv::StoredFormats released_formats(const io::DeepseekV41Config& config);

}  // namespace deepinfer::model::deepseek_v41
