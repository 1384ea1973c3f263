#pragma once
// The keys a query attends to in the CPU sparse attention ops (V4 and V4.1), as row pointers in the
// order the reference concatenates them: the sliding window, then the selected compressed entries.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/state.h"

namespace deepinfer::cpu {

// The window of the query at position `pos` of `seq`, in position order from max(window_floor,
// pos - W + 1): rows from before the step live in the ring (row p % W), the step's own in kv [T, hd].
inline void append_window_keys(std::vector<const float*>& keys, const backend::SeqSlice& seq, int64_t pos, int64_t W,
                               int64_t hd, const float* ring, const float* kv) {
  for (int64_t p = std::max(seq.window_floor, pos - W + 1); p <= pos; ++p)
    keys.push_back(p < seq.start ? ring + (p % W) * hd : kv + (seq.begin + p - seq.start) * hd);
}

// The compressed entries one token selected, `selected` [k] (-1: none), in that order.
inline void append_selected_entries(std::vector<const float*>& keys, const backend::StateStorage& state,
                                    const backend::SeqSlice& seq, const backend::CompressorLayout& entries,
                                    const int32_t* selected, int64_t k) {
  for (int64_t j = 0; j < k; ++j)
    if (selected[j] >= 0) keys.push_back(state.entry(seq, entries, selected[j]));
}

}  // namespace deepinfer::cpu
