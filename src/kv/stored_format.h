#pragma once
// What a state layout costs when its rows are stored in a given encoding. The pools of the CPU
// backend hold F32 (StateLayout::dtype); the released models keep window KV, compressed KV and
// indexer keys in FP8 / FP4 encodings. Both figures come from the same layout (the same entries
// per block, the same rings), so the accounting `deepinfer inspect` prints for the released
// formats is the pool a backend storing those encodings allocates.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kv/state_layout.h"

namespace deepinfer::kv {

enum class RowEncoding : uint8_t {
  F32,              // 4 B per value (the CPU pools)
  Mxfp8,            // FP8 e4m3 + one E8M0 scale per 32 values (V4.1 window KV: 512 -> 528 B)
  Fp8WithBf16Rope,  // FP8 e4m3 non-rope values + BF16 rope values + one E8M0 per 64 FP8 values, padded
                    // to 8 scale bytes (V4 KV: 448 + 128 + 8 = 584 B, FlashMLA's layout)
  Nvfp4,            // FP4 e2m1 + one E4M3 scale per 16 values (V4.1 compressed KV: 512 -> 288 B)
  Mxfp4,            // FP4 e2m1 + one E8M0 scale per 32 values (indexer keys: 128 -> 68 B)
};

std::string_view row_encoding_name(RowEncoding e);
// Bytes of one stored row of `width` values (`rope_dims` of them BF16 for Fp8WithBf16Rope).
size_t encoded_row_bytes(RowEncoding e, int64_t width, int64_t rope_dims = 0);

struct StoredFormats {
  RowEncoding window = RowEncoding::F32;     // sliding-window ring rows
  RowEncoding kv_entry = RowEncoding::F32;   // compressed KV entries (block pool)
  RowEncoding index_key = RowEncoding::F32;  // indexer keys (block pool)
  int64_t rope_dims = 0;
};

struct StoredStateBytes {
  double global_per_token = 0;  // compressed KV + indexer keys, per token of context
  double kv_per_token = 0;      // of which compressed KV
  double index_per_token = 0;   // of which indexer keys
  int64_t window_bytes = 0;     // every layer's sliding-window ring, per sequence
};

StoredStateBytes stored_state_bytes(const StateLayout& layout, const StoredFormats& formats);

}  // namespace deepinfer::kv
