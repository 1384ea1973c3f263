// Backend's DeepSeek-V4.1 ops for backends that do not implement them yet: a clear error naming the
// op and the backend, instead of a pure virtual every backend would have to stub.
#include "backend/backend.h"
#include "core/error.h"

namespace deepinfer::backend {

namespace {
[[noreturn]] void missing(const Backend& b, const char* op) {
  fail("the {} backend does not implement the DeepSeek-V4.1 op {} yet (issue #11); run V4.1 with --device cpu",
       b.name(), op);
}
}  // namespace

void Backend::round_bf16(TensorView) { missing(*this, "round_bf16"); }
void Backend::mhc_coefficients(const MhcWeights&, const MhcParams&, TensorView, TensorView, TensorView, TensorView) {
  missing(*this, "mhc_coefficients");
}
void Backend::mhc_collapse(TensorView, TensorView, TensorView) { missing(*this, "mhc_collapse"); }
void Backend::compress_pool(const CompressorLayout&, TensorView, TensorView, std::span<const EntryRef>,
                            std::span<const SeqSlice>, const StateStorage&, TensorView) {
  missing(*this, "compress_pool");
}
void Backend::store_entries(const CompressorLayout&, TensorView, std::span<const EntryRef>, std::span<const SeqSlice>,
                            const StateStorage&) {
  missing(*this, "store_entries");
}
void Backend::indexer_select_v41(const CompressorLayout&, TensorView, TensorView, const IndexerV41Params&,
                                 std::span<const SeqSlice>, const StateStorage&, TensorView, TensorView) {
  missing(*this, "indexer_select_v41");
}
void Backend::sparse_attention_v41(TensorView, TensorView, const WindowLayout&, const CompressorLayout*, TensorView,
                                   const float*, float, std::span<const SeqSlice>, const StateStorage&, TensorView) {
  missing(*this, "sparse_attention_v41");
}
void Backend::block_attention_v41(TensorView, TensorView, const WindowLayout&, const float*, float,
                                  std::span<const SeqSlice>, const StateStorage&, TensorView) {
  missing(*this, "block_attention_v41");
}
void Backend::moe_experts_v41(const MoeWeights&, const MoeV41Quant&, TensorView, TensorView, TensorView, TensorView) {
  missing(*this, "moe_experts_v41");
}
void Backend::engram_gate(TensorView, TensorView, const float*, float) { missing(*this, "engram_gate"); }
void Backend::engram_hash(const EngramHashParams&, const WindowLayout&, std::span<const int32_t>,
                          std::span<const int32_t>, std::span<const SeqSlice>, const StateStorage&, TensorView) {
  missing(*this, "engram_hash");
}

}  // namespace deepinfer::backend
