#include "cli/inspect_deepseek_v41.h"

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>

#include "cli/inspect_print.h"
#include "engine/load_progress.h"
#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/tensors.h"
#include "model/deepseek_v41/weights.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;
using io::DeepseekV41Config;
using io::V41AttentionRole;

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out;
}

const char* role_name(V41AttentionRole role) {
  switch (role) {
    case V41AttentionRole::SlidingOnly: return "window only";
    case V41AttentionRole::Full: return "Full (kv + index source)";
    case V41AttentionRole::Reindex: return "Reindex (own top-k)";
    case V41AttentionRole::Reuse: return "Reuse (shared top-k)";
  }
  return "?";
}

void print_config(const DeepseekV41Config& c, const fs::path& where) {
  std::printf("Model %s\n", where.string().c_str());
  int window_only = 0, ratio2 = 0, ratio1 = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t r = c.compress_ratio(l);
    (r == 0 ? window_only : r == 1 ? ratio1 : ratio2)++;
  }
  print_row("architecture", "deepseek_v41 (DeepSeek-V4.1)");
  print_row("layers", fmt::format("{} ({} window only, {} compressed 1/2+, {} ratio 1) + {} DSpark stage(s)",
                                  c.num_hidden_layers, window_only, ratio2, ratio1, c.dspark.stages));
  print_row("hidden size", std::to_string(c.hidden_size));
  print_row("attention heads", fmt::format("{} query, 1 shared KV latent, head_dim {}, rope {}", c.num_attention_heads,
                                           c.head_dim, c.qk_rope_head_dim));
  print_row("q / o low rank", fmt::format("q_lora {}, o_lora {} in {} groups", c.q_lora_rank, c.o_lora_rank, c.o_groups));
  print_row("sliding window", fmt::format("{} tokens", c.sliding_window));
  print_row("kv sources", join(c.kv_source_layer_ids));
  print_row("index sources", join(c.index_source_layer_ids));
  print_row("indexer", fmt::format("{} heads x {}, top-{} entries", c.index_n_heads, c.index_head_dim, c.index_topk));
  if (c.candidate_source_layer_id >= 0)
    print_row("candidate filter", fmt::format("layer {}: top {} blocks of {} positions", c.candidate_source_layer_id,
                                              c.candidate_topk_blocks, c.candidate_block_size));
  print_row("decoder (replayable)", fmt::format("layers {}-{} hold window state only", c.first_decoder_layer(),
                                                c.num_hidden_layers - 1));
  print_row("experts", fmt::format("{} routed (top-{}, {}, scale {:g}) + {} shared, intermediate {}", c.n_routed_experts,
                                   c.num_experts_per_tok, c.scoring_func, c.routed_scaling_factor, c.n_shared_experts,
                                   c.moe_intermediate_size));
  print_row("SwiGLU clamp", fmt::format("{:g}", c.swiglu_limit));
  print_row("hyper-connections", fmt::format("{} copies, {} Sinkhorn iterations", c.hc_mult, c.hc_sinkhorn_iters));
  if (c.engram.enabled())
    print_row("Engram", fmt::format("layers {}: {}-grams x {} heads of {}, {} + {} rows", join(c.engram.layer_ids),
                                    c.engram.max_ngram_size, c.engram.n_heads, c.engram.head_dim,
                                    with_commas(c.engram.num_embeddings.front()),
                                    c.engram.num_embeddings.size() > 1 ? with_commas(c.engram.num_embeddings.back()) : "0"));
  if (c.dspark.enabled())
    print_row("DSpark", fmt::format("{} stage(s), block {}, targets {}, {} experts top-{}, Markov rank {}", c.dspark.stages,
                                    c.dspark.block_size, join(c.dspark.target_layer_ids), c.dspark.n_routed_experts,
                                    c.dspark.num_experts_per_tok, c.dspark.markov_rank));
  std::string special = c.bos_token_id ? fmt::format("bos {}", *c.bos_token_id) : "no bos";
  for (int64_t id : c.eos_token_ids) special += fmt::format(", eos {}", id);
  print_row("vocabulary", fmt::format("{} ({})", c.vocab_size, special));
  print_row("context", fmt::format("{} positions", c.max_position_embeddings));
  print_row("rope", fmt::format("window layers theta {:g}; compressed theta {:g}{}", c.rope_theta, c.compress_rope_theta,
                                c.original_max_position_embeddings > 0
                                    ? fmt::format(", YaRN x{:g} over {}", c.rope_factor, c.original_max_position_embeddings)
                                    : ""));
  const auto& q = c.quantization;
  print_row("quantization", q.fp8 ? fmt::format("FP8 e4m3, {}x{} {} blocks{}", q.block_rows, q.block_cols, q.scale_fmt,
                                                q.fp4_experts ? "; routed experts FP4 e2m1" : "")
                                  : "none (BF16)");
  if (c.vision_layers > 0) print_row("vision tower", fmt::format("{} layers (not run, not counted)", c.vision_layers));

  std::printf("\nLayers\n  %5s  %8s  %-26s %s\n", "layer", "compress", "role", "also");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    std::string also;
    auto add = [&](const std::string& s) { also += (also.empty() ? "" : ", ") + s; };
    if (l == c.candidate_source_layer_id) add("candidate source");
    if (c.uses_candidates(l)) add("filters by candidates");
    for (int64_t e : c.engram.layer_ids)
      if (e == l) add("Engram");
    for (int64_t t : c.dspark.target_layer_ids)
      if (t == l) add("DSpark target");
    const int64_t r = c.compress_ratio(l);
    std::printf("  %5lld  %8s  %-26s %s\n", static_cast<long long>(l), r ? fmt::format("1/{}", r).c_str() : "-",
                role_name(c.role(l)), also.c_str());
  }
}

std::string dtype_label(DType d) { return d == DType::I8 ? "FP4 (packed I8)" : std::string(dtype_name(d)); }

// Parameters of the tensors the config implies, or (with a checkpoint) of those it holds.
std::vector<model::ParameterGroup> parameter_groups(const DeepseekV41Config& c, const io::Checkpoint* checkpoint) {
  std::map<std::pair<std::string, std::string>, model::ParameterGroup> groups;
  auto add = [&](const std::string& component, DType dtype, int64_t count, int64_t bytes) {
    auto& g = groups[{component, dtype_label(dtype)}];
    g.component = component;
    g.dtype = dtype_label(dtype);
    g.count += count;
    g.bytes += bytes;
  };
  const auto specs = model::deepseek_v41::checkpoint_tensors(c);
  if (!checkpoint) {
    for (const auto& s : specs) add(s.component, s.dtype, s.parameters(), s.bytes());
  } else {
    std::map<std::string, std::string> component;
    for (const auto& s : specs) component[s.name] = s.component;
    for (const auto& [name, t] : checkpoint->tensors()) {
      const auto it = component.find(name);
      add(it == component.end() ? "vision" : it->second, t.dtype, t.numel() * (t.dtype == DType::I8 ? 2 : 1),
          static_cast<int64_t>(t.nbytes));
    }
  }
  std::vector<model::ParameterGroup> out;
  for (auto& [key, g] : groups) out.push_back(g);
  return out;
}

void print_state_sections(const DeepseekV41Config& c) {
  const kv::StateLayout layout = model::deepseek_v41::state_layout(c);
  print_state(layout, c.max_position_embeddings);
  print_released_state(layout, model::deepseek_v41::released_formats(c));
}

}  // namespace

int inspect_deepseek_v41_folder(const fs::path& dir) {
  const DeepseekV41Config c = io::load_deepseek_v41_config(dir);
  engine::LoadProgress progress;
  const auto weights = model::deepseek_v41::load_weights(dir, c, [&](size_t d, size_t t) { progress.update(d, t); });
  progress.finish();
  print_config(c, dir);
  print_parameters(parameter_groups(c, &weights->checkpoint));
  print_state_sections(c);
  std::fflush(stdout);
  return 0;
}

int inspect_deepseek_v41_config(const fs::path& config_file, const std::string& text) {
  const DeepseekV41Config c = io::parse_deepseek_v41_config(text, config_file.string());
  print_config(c, config_file);
  std::printf("\n(parameters: the tensors this config implies; no checkpoint was read)\n");
  print_parameters(parameter_groups(c, nullptr));
  print_state_sections(c);
  std::fflush(stdout);
  return 0;
}

}  // namespace deepinfer::cli
