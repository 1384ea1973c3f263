#include "kv/state_layout.h"

#include <numeric>

#include "core/error.h"

namespace deepinfer::kv {

int64_t choose_block_tokens(const std::vector<LayerStateSpec>& layers, int64_t min_block_tokens) {
  int64_t lcm = 1;
  for (const auto& l : layers)
    for (const auto* c : {&l.compressor, &l.indexer})
      if (*c) lcm = std::lcm(lcm, (*c)->rate);
  return (std::max<int64_t>(min_block_tokens, lcm) + lcm - 1) / lcm * lcm;
}

StateLayout plan_layout(const std::vector<LayerStateSpec>& specs, int64_t block_tokens, DType dtype) {
  DEEPINFER_CHECK(block_tokens > 0, "block size must be positive, got {}", block_tokens);
  DEEPINFER_CHECK(dtype == DType::F32, "state pools hold F32 on this backend, asked for {}", dtype_name(dtype));
  StateLayout out;
  out.dtype = dtype;
  out.block_tokens = block_tokens;
  auto place = [&](const CompressorSpec& spec) {
    DEEPINFER_CHECK(spec.rate > 0 && block_tokens % spec.rate == 0,
                    "block size {} is not a multiple of compress rate {}", block_tokens, spec.rate);
    backend::CompressorLayout c;
    c.rate = spec.rate;
    c.head_dim = spec.head_dim;
    c.overlap = spec.overlap;
    c.width = spec.overlap ? 2 * spec.head_dim : spec.head_dim;
    c.slot_offset = out.slot_elems;
    out.slot_elems += c.slot_elems();
    c.entries_per_block = block_tokens / spec.rate;
    c.block_offset = out.block_elems;
    out.block_elems += c.entries_per_block * c.head_dim;
    return c;
  };
  for (const auto& spec : specs) {
    LayerStateLayout l;
    l.window = {spec.window, spec.head_dim, out.slot_elems};
    out.slot_elems += spec.window * spec.head_dim;
    if (spec.compressor) l.compressor = place(*spec.compressor);
    if (spec.indexer) l.indexer = place(*spec.indexer);
    out.layers.push_back(l);
  }
  return out;
}

}  // namespace deepinfer::kv
