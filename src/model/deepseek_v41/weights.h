#pragma once
// DeepSeek-V4.1 weights as the forward reads them, kept as stored (views into the mmapped
// checkpoint): FP8 e4m3 with 32x32 E8M0 block scales, FP4 e2m1 routed experts with per-32 E8M0
// scales, FP8 Engram tables with per-32 row scales, BF16 elsewhere. Small vectors (norms, mixers,
// sinks, biases) are widened to float.
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "backend/weight_matrix.h"
#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"

namespace deepinfer::model::deepseek_v41 {

using deepinfer::WeightMatrix;
using Vec = std::vector<float>;

struct HyperConnection {
  Vec fn, base, scale;  // [(2+hc)*hc, hc*D], [(2+hc)*hc], [3]
};

// A kv source's compressor: ratio 1 is a plain projection (no gate).
struct Compressor {
  int64_t rate = 0;
  WeightMatrix wkv, wgate;  // [head_dim, D]; wgate only when rate > 1
  Vec norm;                 // [head_dim]
};

struct Indexer {
  WeightMatrix wq_b;          // [index_heads * index_head_dim, q_lora_rank]
  WeightMatrix weights_proj;  // [index_heads, D]
  // Index-key owners (kv sources): keys projected from the compressed latent.
  WeightMatrix wk;            // [index_head_dim, head_dim]
  Vec k_norm;                 // [index_head_dim]
  bool owns_keys() const { return wk.valid(); }
};

struct Attention {
  WeightMatrix wq_a, wq_b, wkv, wo_a, wo_b;
  Vec q_norm, kv_norm, sink;
  std::unique_ptr<Compressor> compressor;  // kv sources
  std::unique_ptr<Indexer> indexer;        // index sources
};

struct Expert {
  WeightMatrix w1, w2, w3;  // gate [I, D], down [D, I], up [I, D]
};

struct MoE {
  WeightMatrix gate;  // router [E, D]
  Vec gate_bias;      // [E]
  std::vector<Expert> experts;
  Expert shared;
};

struct Engram {
  int64_t index = 0;   // position in engram_layer_ids (selects its hash columns)
  WeightMatrix table;  // FP8 [rows, engram_head_dim], one E8M0 scale per 32 of a row
  WeightMatrix wkv;    // [D * (hc + 1), hash_columns * engram_head_dim]
  Vec q_weight, k_weight;  // [hc, D]
};

struct Block {
  Vec attn_norm, ffn_norm;
  HyperConnection hc_attn, hc_ffn;
  Attention attn;
  MoE ffn;
  std::unique_ptr<Engram> engram;
};

struct DSparkStage {
  Block block;
  WeightMatrix main_proj;  // first stage: [D, D * targets]
  Vec main_norm;
  Vec norm;                // last stage: final norm, Markov and confidence heads
  WeightMatrix markov_embed, markov_head;  // [V, markov_rank]
  WeightMatrix confidence;                 // [1, D + markov_rank]
};

struct Weights {
  io::Checkpoint checkpoint;  // keeps the mmaps alive
  WeightMatrix embed, head;
  Vec norm;
  std::vector<Block> layers;
  std::vector<DSparkStage> mtp;
};

// Checks the checkpoint against checkpoint_tensors(config) (names, dtypes, shapes; vision tensors
// ignored) and throws one Error listing every missing, mistyped, mis-shaped and unexpected tensor.
std::unique_ptr<Weights> load_weights(const std::filesystem::path& dir, const io::DeepseekV41Config& config,
                                      const std::function<void(size_t, size_t)>& progress);

}  // namespace deepinfer::model::deepseek_v41
