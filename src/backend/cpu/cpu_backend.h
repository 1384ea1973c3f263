#pragma once
// The CPU reference backend: float32 everywhere, threaded over the global pool. Its GEMM
// (packed_linear.h) computes every output as one fixed chain, so results never depend on the batch;
// batch-invariant mode only changes top-k tie breaking.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/packed_linear.h"

namespace deepinfer::cpu {

// cos/sin of every rotary pair at `position`, scaled by the attention factor.
inline void rope_angles(const backend::RopeFreqs& f, int64_t position, float* cos, float* sin) {
  const auto pos = static_cast<float>(position);
  for (int64_t i = 0; i < f.half(); ++i) {
    const float a = f.inv_freq[static_cast<size_t>(i)] * pos;
    cos[i] = std::cos(a) * f.attention_factor;
    sin[i] = std::sin(a) * f.attention_factor;
  }
}

class CpuBackend final : public backend::Backend {
 public:
  explicit CpuBackend(const backend::BackendOptions& options) : options_(options) {}

  std::string_view name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  bool batch_invariant() const override { return options_.batch_invariant; }
  bool reproduces_reference_ties(backend::TopKSite) const override { return true; }

  Allocator& allocator() override { return HostAllocator::instance(); }
  void copy_to_backend(void* dst, const void* host_src, size_t bytes) override { std::memcpy(dst, host_src, bytes); }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override { std::memcpy(host_dst, src, bytes); }
  void synchronize() override {}

  void sample(TensorView logits, std::span<const backend::SampleRow> rows, std::span<int32_t> tokens) override;
  void linear(const WeightMatrix& w, TensorView x, TensorView y) override;
  void grouped_linear(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) override;
  void gather_rows(TensorView src, std::span<const int64_t> rows, TensorView dst) override;
  void embed(const WeightMatrix& table, std::span<const int32_t> ids, TensorView out) override;
  void embed_ids(const WeightMatrix& table, TensorView ids, TensorView out) override;
  void rms_norm(TensorView x, const float* weight, float eps, TensorView out) override;
  void rope(TensorView x, std::span<const int64_t> positions, const backend::RopeFreqs& freqs, bool inverse) override;

  void mhc_pre(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual, TensorView input,
               TensorView post, TensorView comb) override;
  void mhc_post(TensorView residual, TensorView out, TensorView post, TensorView comb) override;
  void mhc_head(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                TensorView hidden) override;

  void compress(const backend::CompressorLayout& c, const backend::CompressorWeights& w,
                const backend::RopeFreqs& freqs, TensorView kv, TensorView gate,
                std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state) override;
  void indexer_select(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                      float head_weight_scale, float score_scale, int64_t top_k, backend::TopKTies ties,
                      std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                      TensorView selected) override;
  void store_window(const backend::WindowLayout& wl, TensorView kv, std::span<const backend::SeqSlice> seqs,
                    const backend::StateStorage& state) override;
  void sparse_attention(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                        const backend::CompressorLayout* entries, TensorView selected, const float* sink, float scale,
                        std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                        TensorView out) override;

  void moe_route(const backend::RoutingParams& p, TensorView logits, std::span<const int32_t> token_ids,
                 TensorView experts, TensorView weights) override;
  void moe_experts(const backend::MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                   TensorView out) override;
  void moe_shared_expert(const backend::MoeWeights& w, TensorView x, TensorView out) override;
  void moe_expert_rows(const backend::MoeWeights& w, TensorView x, TensorView row_expert, TensorView y) override;
  void moe_combine(TensorView y, TensorView row_of, TensorView experts, TensorView weights, TensorView out) override;
  void quantize_dequantize(TensorView x, backend::ActQuant format) override;

  // DeepSeek-V4.1 (v41_ops.cpp, v41_attention_ops.cpp).
  void round_bf16(TensorView x) override;
  void mhc_coefficients(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                        TensorView pre, TensorView post, TensorView comb) override;
  void mhc_collapse(TensorView residual, TensorView pre, TensorView out) override;
  void compress_pool(const backend::CompressorLayout& c, TensorView kv, TensorView gate,
                     std::span<const backend::EntryRef> entries, std::span<const backend::SeqSlice> seqs,
                     const backend::StateStorage& state, TensorView out) override;
  void store_entries(const backend::CompressorLayout& c, TensorView rows, std::span<const backend::EntryRef> entries,
                     std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state) override;
  void indexer_select_v41(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                          const backend::IndexerV41Params& p, std::span<const backend::SeqSlice> seqs,
                          const backend::StateStorage& state, TensorView candidates, TensorView selected) override;
  void sparse_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                            const backend::CompressorLayout* entries, TensorView selected, const float* sink,
                            float scale, std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                            TensorView out) override;
  void block_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl, const float* sink, float scale,
                           std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                           TensorView out) override;
  void moe_experts_v41(const backend::MoeWeights& w, const backend::MoeV41Quant& quant, TensorView x,
                       TensorView experts, TensorView weights, TensorView out) override;
  void engram_gate(TensorView residual, TensorView kv, const float* weight, float eps) override;
  void engram_hash(const backend::EngramHashParams& p, const backend::WindowLayout& history,
                   std::span<const int32_t> compressed_ids, std::span<const int32_t> floor_history,
                   std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                   TensorView hash_ids) override;

 private:
  // y [tokens, w.rows] = x W^T through the kernel the options ask for.
  void matmul(const WeightMatrix& w, const float* x, int64_t tokens, float* y);
  // scratch_b_ [rows, mixes] = (unweighted RMSNorm of each row of X [rows, width]) fn^T: the
  // mixing GEMM of mhc_pre and mhc_head.
  void mhc_mixes(const float* fn, int64_t mixes, const float* X, int64_t rows, int64_t width, float eps);
  // out [tokens, D] = w2 (silu(min(w1 x, limit)) * clamp(w3 x, -limit, limit)).
  void swiglu(const backend::SwigluExpert& e, const float* x, int64_t tokens, float limit, float* out);
  // The V4.1 expert: bf16 rounding after every GEMM, the routing weight before w2, FP8 activations
  // when `quantize`; out [tokens, D].
  void swiglu_v41(const backend::SwigluExpert& e, const float* x, int64_t tokens, float limit, const float* weights,
                  bool quantize, float* out);
  // routed_[e] = (token, routing weight) of every token routed to expert e, in token order.
  const std::vector<std::vector<std::pair<int64_t, float>>>& group_tokens_by_expert(
      TensorView experts, TensorView weights, int64_t T, int64_t K, int64_t E, const char* op);
  // The sigmoid / softmax + Sinkhorn split of one token's mixes m [(2+n)*n] (mhc_pre, mhc_coefficients).
  static void mhc_split(const float* m, const backend::MhcWeights& w, const backend::MhcParams& p, float* pre,
                        float* post, float* comb);

  backend::BackendOptions options_;
  PackedLinear gemm_;
  // Scratch kept between calls so a step allocates only while shapes still grow.
  std::vector<float> scratch_a_, scratch_b_, scratch_c_, scratch_d_;
  std::vector<std::vector<std::pair<int64_t, float>>> routed_;  // tokens (and weights) per expert
  std::vector<int32_t> routed_tokens_;                          // sequence of each token
  std::vector<int64_t> expert_rows_, token_fill_;               // MoE: first routed row per expert
  std::vector<int32_t> moe_row_of_, moe_row_expert_;            // MoE: routed row per (token, k), expert per row
  std::vector<float> ep_x_, ep_y_;                              // moe_expert_rows: rows grouped by expert
};

}  // namespace deepinfer::cpu
