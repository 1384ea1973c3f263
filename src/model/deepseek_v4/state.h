#pragma once
// Per-sequence incremental state of DeepSeek-V4, one entry per layer (see MODELS.md):
// the sliding-window KV ring, and for compressed layers the compressor's unfinished window, the
// previous window's overlap half (CSA) and the running list of compressed entries (for CSA also
// the indexer's own compressor).
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace deepinfer::model::deepseek_v4 {

struct CompressorState {
  int64_t width = 0;                      // per-token projection width (2 x head for CSA)
  int64_t head_dim = 0;                   // width of one compressed entry
  std::vector<float> pending_kv;          // tokens of the unfinished window [n, width]
  std::vector<float> pending_gate;        // (gate logits, position bias not yet added)
  std::vector<float> overlap_kv;          // CSA: previous window's first half [rate, head_dim]
  std::vector<float> overlap_gate;        //      its gate logits, position bias included
  std::vector<float> entries;             // compressed entries [n_entries, head_dim], rope applied
  int64_t pending() const { return width ? static_cast<int64_t>(pending_kv.size()) / width : 0; }
  int64_t count() const { return head_dim ? static_cast<int64_t>(entries.size()) / head_dim : 0; }
};

struct LayerState {
  std::vector<float> window;  // ring of the last `sliding_window` KV rows [window, head_dim], slot = pos % window
  CompressorState compressor, indexer;
};

class V4SequenceState final : public SequenceState {
 public:
  int64_t length() const override { return length_; }
  size_t bytes() const override;

  int64_t length_ = 0;
  std::vector<LayerState> layers;
};

}  // namespace deepinfer::model::deepseek_v4
