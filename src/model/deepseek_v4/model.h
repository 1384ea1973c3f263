#pragma once
// DeepSeek-V4 (V4-Flash / V4-Pro) as a sequence of backend ops over a batch of sequences, following
// transformers 5.17 `DeepseekV4ForCausalLM` (see MODELS.md for the math in words).
#include <memory>
#include <mutex>

#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"
#include "model/model.h"
#include "core/workspace.h"

namespace deepinfer::model::deepseek_v4 {

class DeepseekV4 final : public CausalLM {
 public:
  DeepseekV4(io::ModelConfig config, std::unique_ptr<Weights> weights, const LoadOptions& options);

  const io::ModelConfig& config() const override { return config_; }
  const kv::StateLayout& state_layout() const override { return layout_; }
  void forward(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const override;
  void forward_sampled(const ForwardBatch& batch, kv::StatePool& pool, std::span<const backend::SampleRow> rows,
                       std::vector<int32_t>& tokens) const override;
  std::vector<ParameterGroup> parameter_summary() const override;
  StateFootprint state_footprint() const override;
  backend::Backend& backend() const override { return *backend_; }
  void moe_idle_step() const override;

 private:
  // The device half of forward (forward_mutex_ held): the logits [rows, V] in the workspace, valid
  // until the next forward (an empty view when no row wants logits).
  TensorView forward_device(const ForwardBatch& batch, kv::StatePool& pool) const;
  struct Step;  // the step's batch, state and workspace, passed through the layer functions

  void attention(const Layer& layer, size_t index, Step& step, TensorView x, TensorView out) const;
  void moe(const Layer& layer, size_t index, Step& step, TensorView x, TensorView out) const;

  io::ModelConfig config_;
  std::unique_ptr<Weights> weights_;
  kv::StateLayout layout_;
  Rope rope_main_, rope_compress_;
  TopKTies ties_;
  backend::MhcParams mhc_;
  std::vector<std::vector<backend::SwigluExpert>> experts_;  // per layer, views of the weights
  std::vector<backend::SwigluExpert> shared_;
  std::unique_ptr<backend::Backend> backend_;
  mutable Workspace workspace_;  // activations of a step: nothing is allocated once shapes stop growing
  mutable std::mutex forward_mutex_;  // one forward at a time: the workspace and backend scratch are shared
};

}  // namespace deepinfer::model::deepseek_v4
