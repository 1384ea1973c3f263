#pragma once
// DeepSeek-V4.1-Flash as a sequence of backend ops over a batch of sequences, following the official
// reference `inference/model.py` (MODELS.md, "DeepSeek-V4.1-Flash"). The reference computes in
// bf16 with FP8/FP4 fake-quantisation: every tensor it holds in bf16 is rounded to bf16 here too,
// and activations are quantised exactly where it quantises them.
#include <memory>
#include <optional>
#include <mutex>

#include "core/workspace.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v41/engram_tables.h"
#include "model/deepseek_v41/weights.h"
#include "model/model.h"

namespace deepinfer::model::deepseek_v41 {

// DSpark draft of one decode step per sequence (the reference's forward_spec): draft token ids
// [block + 1] (first = the main model's token), logits [block, V] incl. the Markov-head bias, and
// confidences [block].
struct DSparkDraft {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  std::vector<float> confidence;
};

class DeepseekV41 final : public CausalLM {
 public:
  DeepseekV41(io::DeepseekV41Config config, std::unique_ptr<Weights> weights, EngramTables engram,
              const LoadOptions& options);

  const io::ModelConfig& config() const override { return common_; }
  const io::DeepseekV41Config& v41_config() const { return config_; }
  const kv::StateLayout& state_layout() const override { return layout_; }
  void forward(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const override;
  std::vector<ParameterGroup> parameter_summary() const override;
  StateFootprint state_footprint() const override;
  backend::Backend& backend() const override { return *backend_; }
  const EngramTables& engram_tables() const { return engram_; }
  // Tokens the decoder layers (after the last kv source) have processed, over all forwards.
  int64_t decoder_tokens_processed() const { return decoder_tokens_; }
  // forward(), then for every logits row the DSpark draft of the positions after it, drafted from
  // the row's greedy token (the reference's forward_spec at temperature 0). Needs DSpark stages.
  void forward_with_drafts(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits,
                           std::vector<DSparkDraft>& drafts) const;

 private:
  struct Step;  // the step's batch, state, workspace and what layers hand down (defined in step.h)

  void run(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits,
           std::vector<DSparkDraft>* drafts) const;
  // Engram's hash ids of the step's tokens into step.hash_ids.
  void engram_hashes(Step& step) const;
  // [rows, cols] copies of a one-row table (embedded, so a recorded step holds no upload).
  TensorView constant_rows(Step& step, const WeightMatrix& row, int64_t rows) const;
  // The DSpark target taps [T, D * targets] -> main_x [T, D]; every stage's window ring gets its
  // main KV of the step's tokens (the reference seeds them in forward_spec).
  TensorView dspark_main(Step& step, TensorView taps) const;
  void dspark_draft(Step& step, std::span<const float> logits, std::vector<DSparkDraft>& drafts) const;
  // The target taps, token-major [T, targets * D] as the reference concatenates them.
  TensorView concat_taps(Step& step, const std::vector<TensorView>& taps) const;
  void block(const Block& b, int64_t layer, Step& step, TensorView& X, TensorView& pre) const;
  void attention(const Block& b, int64_t layer, Step& step, TensorView x, TensorView out) const;
  void compress(const Block& b, int64_t layer, Step& step, TensorView x) const;
  void indexer(const Block& b, int64_t layer, Step& step, TensorView x, TensorView qr) const;
  // block: the layer, or num_hidden_layers + stage for a DSpark stage.
  void moe(const MoE& m, int64_t block, Step& step, TensorView x, TensorView out) const;
  void engram(const Engram& e, Step& step, TensorView X) const;
  // y = x W^T as the reference's linear(): FP8-quantised activations for FP8 / FP4 weights, the
  // output rounded to bf16 (the reference's bf16 result).
  void project(Step& step, const WeightMatrix& w, TensorView x, TensorView y) const;
  // project() for sibling weights of one x [T, width] (outs' y [T, rows]): one FP8 copy of x for the
  // quantised ones, and each kind in one Backend::linears call (one launch where the backend can).
  void project_siblings(Step& step, TensorView x, std::span<const backend::LinearOut> outs) const;
  // A copy of x [rows, width] quantised to FP8 (per-32 UE8M0), as the reference's FP8 / FP4 GEMMs
  // take their activations.
  TensorView fp8_input(Step& step, TensorView x) const;
  // A copy of x [rows, width] in the step's workspace.
  TensorView copy(Step& step, TensorView x) const;
  const deepseek_v4::Rope& rope_of(int64_t layer) const;
  // Bounded replay: the rows of `step` the decoder layers run over, and each sequence's window floor
  // for them (nullopt: every row, floors as given; empty: none at all).
  std::optional<std::vector<int64_t>> decoder_rows(const ForwardBatch& batch, std::vector<int64_t>& floors) const;
  // The step of `rows` alone: slices renumbered, window floors raised to `floors` (per sequence).
  void replay(const Step& step, std::span<const int64_t> rows, std::span<const int64_t> floors,
              ForwardBatch& out) const;
  // `rows` along dimension `row_dim` of an F32 / I32 tensor (dimensions before it kept).
  TensorView gather(Step& step, TensorView t, std::span<const int64_t> rows, int row_dim = 0) const;

  io::DeepseekV41Config config_;
  io::ModelConfig common_;
  std::unique_ptr<Weights> weights_;
  EngramTables engram_;
  kv::StateLayout layout_;
  deepseek_v4::Rope rope_window_, rope_compressed_;
  backend::MhcParams mhc_;
  std::vector<std::vector<backend::SwigluExpert>> experts_;  // per block (layers, then DSpark stages)
  std::vector<backend::SwigluExpert> shared_;
  std::vector<std::vector<float>> engram_weight_;  // per engram layer: q_weight * k_weight [n, D]
  std::unique_ptr<backend::Backend> backend_;
  mutable Workspace workspace_;
  int64_t replay_keep_ = 0;
  mutable int64_t decoder_tokens_ = 0;
  mutable std::vector<int64_t> iota_;  // 0, 1, 2, ... for copies through gather_rows
  mutable std::vector<int32_t> zeros_;  // ids of constant_rows
  std::vector<float> first_copy_data_, mean_copies_data_;  // [hc_mult] each
  WeightMatrix first_copy_, mean_copies_;                  // one-row F32 tables over them
  mutable std::mutex forward_mutex_;
};

// Loads a V4.1 folder (config.json, weights, tokenizer.json for Engram).
std::unique_ptr<CausalLM> load(const std::filesystem::path& dir, const LoadOptions& options);

}  // namespace deepinfer::model::deepseek_v41
