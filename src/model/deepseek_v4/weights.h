#pragma once
// DeepSeek-V4 weights as the forward pass reads them. Large matrices stay in their stored dtype
// (views into the mmapped checkpoint); small vectors (norms, mixers, biases) are widened to float.
#include <functional>
#include <memory>
#include <vector>

#include "backend/weight_matrix.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace deepinfer::model::deepseek_v4 {

using deepinfer::WeightMatrix;
using Vec = std::vector<float>;

// mHC mixer of one sub-layer site: fn [(2+hc)*hc, hc*D], base [(2+hc)*hc], scale [3].
struct HyperConnection {
  Vec fn, base, scale;
};

// A compressor (main CSA/HCA or the indexer's): projections to `width` channels per token
// (2 x head for CSA's overlapping halves), learned position bias `ape` [rate, width], RMSNorm.
struct Compressor {
  int64_t head_dim = 0;  // output width of one compressed entry
  int64_t rate = 0;
  bool overlap = false;  // CSA: entry w mixes window w-1's first half with window w's second half
  WeightMatrix wkv, wgate;
  Vec ape, norm;
};

struct Indexer {
  Compressor compressor;
  WeightMatrix wq_b;          // [n_heads * index_head_dim, q_lora_rank]
  WeightMatrix weights_proj;  // [n_heads, hidden]
};

struct Attention {
  WeightMatrix wq_a, wq_b, wkv, wo_a, wo_b;
  Vec q_norm, kv_norm, sink;
  std::unique_ptr<Compressor> compressor;  // CSA / HCA layers
  std::unique_ptr<Indexer> indexer;        // CSA layers
};

struct Expert {
  WeightMatrix w1, w2, w3;  // gate [I, D], down [D, I], up [I, D]
};

struct MoE {
  WeightMatrix gate;             // router [E, D]
  Vec gate_bias;                 // e_score_correction_bias [E] (top-k routed layers)
  std::vector<int32_t> tid2eid;  // [vocab, top_k] (hash-routed layers)
  std::vector<Expert> experts;
  Expert shared;
};

struct Layer {
  io::AttentionKind kind = io::AttentionKind::Sliding;
  io::MlpKind mlp_kind = io::MlpKind::MoE;
  Vec attn_norm, ffn_norm;
  HyperConnection hc_attn, hc_ffn;
  Attention attn;
  MoE ffn;
};

struct Weights {
  io::Checkpoint checkpoint;  // keeps the mmaps alive
  WeightMatrix embed, head;
  Vec norm;
  Vec hc_head_fn, hc_head_base, hc_head_scale;
  std::vector<Layer> layers;
};

// Loads and checks every tensor against the config; throws one Error listing all missing,
// unexpected and mis-shaped tensors.
std::unique_ptr<Weights> load_weights(const std::filesystem::path& dir, const io::ModelConfig& config,
                                      const std::function<void(size_t, size_t)>& progress);

}  // namespace deepinfer::model::deepseek_v4
