#include "kv/stored_format.h"

#include "core/error.h"

namespace deepinfer::kv {

std::string_view row_encoding_name(RowEncoding e) {
  switch (e) {
    case RowEncoding::F32: return "F32";
    case RowEncoding::Mxfp8: return "FP8 e4m3 + E8M0/32";
    case RowEncoding::Fp8WithBf16Rope: return "FP8 e4m3 + BF16 rope + E8M0/64";
    case RowEncoding::Nvfp4: return "FP4 e2m1 + E4M3/16";
    case RowEncoding::Mxfp4: return "FP4 e2m1 + E8M0/32";
  }
  return "?";
}

size_t encoded_row_bytes(RowEncoding e, int64_t width, int64_t rope_dims) {
  DEEPINFER_CHECK(width > 0, "row width must be positive, got {}", width);
  auto whole_groups = [&](int64_t values, int64_t group) {
    DEEPINFER_CHECK(values % group == 0, "{}: {} values are not whole groups of {}", row_encoding_name(e), values, group);
    return values / group;
  };
  switch (e) {
    case RowEncoding::F32: return static_cast<size_t>(width) * 4;
    case RowEncoding::Mxfp8: return static_cast<size_t>(width + whole_groups(width, 32));
    case RowEncoding::Fp8WithBf16Rope: {
      DEEPINFER_CHECK(rope_dims >= 0 && rope_dims < width, "rope dims {} outside [0, {})", rope_dims, width);
      const int64_t fp8 = width - rope_dims;
      const int64_t scales = ((fp8 + 63) / 64 + 7) / 8 * 8;  // a partial group still takes a scale
      return static_cast<size_t>(fp8 + 2 * rope_dims + scales);
    }
    case RowEncoding::Nvfp4: return static_cast<size_t>(whole_groups(width, 2) + whole_groups(width, 16));
    case RowEncoding::Mxfp4: return static_cast<size_t>(whole_groups(width, 2) + whole_groups(width, 32));
  }
  return 0;
}

StoredStateBytes stored_state_bytes(const StateLayout& layout, const StoredFormats& f) {
  StoredStateBytes out;
  const auto per_token = [&](const backend::CompressorLayout& c, RowEncoding e) {
    return static_cast<double>(c.entries_per_block) * static_cast<double>(encoded_row_bytes(e, c.head_dim, f.rope_dims)) /
           static_cast<double>(layout.block_tokens);
  };
  for (const auto& l : layout.layers) {
    if (l.window.window > 0)
      out.window_bytes += l.window.window * static_cast<int64_t>(encoded_row_bytes(f.window, l.window.head_dim, f.rope_dims));
    if (l.compressor) out.kv_per_token += per_token(*l.compressor, f.kv_entry);
    if (l.indexer) out.index_per_token += per_token(*l.indexer, f.index_key);
  }
  out.global_per_token = out.kv_per_token + out.index_per_token;
  return out;
}

}  // namespace deepinfer::kv
