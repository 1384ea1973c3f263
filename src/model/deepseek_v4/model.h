#pragma once
// DeepSeek-V4 (V4-Flash / V4-Pro) forward pass on the CPU reference backend, following
// transformers 5.17 `DeepseekV4ForCausalLM` (see MODELS.md for the math in words).
#include <memory>

#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"
#include "model/model.h"

namespace deepinfer::model::deepseek_v4 {

class DeepseekV4 final : public CausalLM {
 public:
  DeepseekV4(io::ModelConfig config, std::unique_ptr<Weights> weights, TopKTies ties = TopKTies::Reference);

  const io::ModelConfig& config() const override { return config_; }
  std::unique_ptr<SequenceState> new_sequence() const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, std::vector<float>& logits,
               bool all_logits) const override;
  std::vector<ParameterGroup> parameter_summary() const override;
  StateFootprint state_footprint() const override;

 private:
  // One sub-layer site of mHC: from the residual copies X [T, hc, D] computes the sub-layer input
  // [T, D] and the per-token post [T, hc] and comb [T, hc, hc] weights.
  void hyper_connection_pre(const HyperConnection& hc, const float* X, int64_t T, float* input, float* post,
                            float* comb) const;
  // X[k] = post[k] * out + sum_j comb[j][k] * X[j], per token.
  void hyper_connection_post(float* X, int64_t T, const float* out, const float* post, const float* comb) const;

  void attention(const Layer& layer, LayerState& state, const float* x, int64_t T, int64_t start,
                 float* out) const;
  // Feeds the chunk's projections to a compressor; appends every entry whose window completed.
  void compress(const Compressor& comp, CompressorState& state, const float* x, int64_t T) const;
  // For each query of a CSA layer, the compressed entries its indexer selects.
  std::vector<std::vector<int32_t>> index_select(const Layer& layer, LayerState& state, const float* x,
                                                 const float* q_residual, int64_t T, int64_t start) const;
  void moe(const Layer& layer, const float* x, std::span<const int32_t> tokens, float* out) const;

  // Indices of the k best scores under the tie policy; `scores` may hold -inf for hidden candidates.
  std::vector<int32_t> top_k(std::span<const float> scores, int64_t k) const;

  io::ModelConfig config_;
  std::unique_ptr<Weights> weights_;
  Rope rope_main_, rope_compress_;
  TopKTies ties_;
};

}  // namespace deepinfer::model::deepseek_v4
