// `deepinfer inspect`: what a model folder holds — architecture, per-layer attention kinds,
// parameters by component and dtype, and the bytes per token and per sequence slot that the state
// pools allocate, in the pools' F32 and in the released encodings. `--config FILE` does the same from
// a config.json alone (no parameters for V4; V4.1 counts the tensors its config implies).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/inspect_deepseek_v41.h"
#include "cli/inspect_print.h"
#include "core/error.h"
#include "core/text_file.h"
#include "engine/load_progress.h"
#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "model/deepseek_v4/state.h"
#include "model/model.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

const char* attention_name(io::AttentionKind kind) {
  switch (kind) {
    case io::AttentionKind::Sliding: return "sliding window";
    case io::AttentionKind::CSA: return "CSA (compressed sparse)";
    case io::AttentionKind::HCA: return "HCA (heavily compressed)";
  }
  return "?";
}

std::string rope_text(const io::RopeParams& r) {
  std::string text = fmt::format("{}, theta {:g}", r.type, r.theta);
  if (r.type == "yarn")
    text += fmt::format(", factor {:g}, original context {}, beta {:g}/{:g}", r.factor,
                        r.original_max_position_embeddings, r.beta_fast, r.beta_slow);
  if (r.type == "yarn" && r.attention_factor) text += fmt::format(", attention factor {:g}", *r.attention_factor);
  return text;
}

void print_config(const io::ModelConfig& c, const fs::path& dir) {
  std::printf("Model %s\n", dir.string().c_str());
  int sliding = 0, csa = 0, hca = 0;
  for (auto kind : c.layer_types) (kind == io::AttentionKind::Sliding ? sliding : kind == io::AttentionKind::CSA ? csa : hca)++;
  print_row("architecture", c.model_type);
  print_row("layers", fmt::format("{} ({} sliding, {} CSA, {} HCA)", c.num_hidden_layers, sliding, csa, hca));
  print_row("hidden size", std::to_string(c.hidden_size));
  print_row("attention heads", fmt::format("{} query, {} KV (shared latent), head_dim {}", c.num_attention_heads,
                                           c.num_key_value_heads, c.head_dim));
  print_row("rope dims", fmt::format("{} of {} per head", c.qk_rope_head_dim, c.head_dim));
  print_row("q / o low rank", fmt::format("q_lora {}, o_lora {} in {} groups", c.q_lora_rank, c.o_lora_rank, c.o_groups));
  print_row("sliding window", fmt::format("{} tokens", c.sliding_window));
  print_row("compress rates", fmt::format("CSA {}, HCA {}", c.compress_rate_csa, c.compress_rate_hca));
  if (csa) print_row("indexer", fmt::format("{} heads x {}, top-{} entries", c.index_n_heads, c.index_head_dim, c.index_topk));
  print_row("experts", fmt::format("{} routed (top-{}, {}, scale {:g}) + {} shared, intermediate {}", c.n_routed_experts,
                                   c.num_experts_per_tok, c.scoring_func, c.routed_scaling_factor, c.n_shared_experts,
                                   c.moe_intermediate_size));
  print_row("SwiGLU clamp", fmt::format("{:g}", c.swiglu_limit));
  print_row("hyper-connections", fmt::format("{} copies, {} Sinkhorn iterations", c.hc_mult, c.hc_sinkhorn_iters));
  std::string special = c.bos_token_id ? fmt::format("bos {}", *c.bos_token_id) : "no bos";
  for (int64_t id : c.eos_token_ids) special += fmt::format(", eos {}", id);
  print_row("vocabulary", fmt::format("{} ({})", c.vocab_size, special));
  print_row("context", fmt::format("{} positions", c.max_position_embeddings));
  print_row("rope (sliding)", rope_text(c.rope_main));
  print_row("rope (compressed)", rope_text(c.rope_compress));
  if (!c.quant_method.empty()) {
    std::string blocks;
    for (size_t i = 0; i < c.weight_block_size.size(); ++i) blocks += (i ? "x" : "") + std::to_string(c.weight_block_size[i]);
    print_row("quantization", blocks.empty() ? c.quant_method : fmt::format("{} (blocks {})", c.quant_method, blocks));
  }
  if (c.num_nextn_predict_layers > 0) print_row("MTP layers", std::to_string(c.num_nextn_predict_layers));

  std::printf("\nLayers\n  %5s  %-26s %8s  %s\n", "layer", "attention", "compress", "mlp");
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    const int64_t rate = c.compress_rate(i);
    const bool hash = i < c.mlp_layer_types.size() && c.mlp_layer_types[i] == io::MlpKind::HashMoE;
    std::printf("  %5zu  %-26s %8s  %s\n", i, attention_name(c.layer_types[i]),
                rate ? fmt::format("1/{}", rate).c_str() : "-", hash ? "hash-routed MoE" : "MoE");
  }
}

std::string read_text(const fs::path& path) { return read_text_file(path, kConfigFileLimit, "model config"); }

int run_inspect(const std::string& model_dir) {
  const fs::path dir = model_dir;
  DEEPINFER_CHECK(fs::is_directory(dir), "model folder '{}' does not exist or is not a directory", dir.string());
  if (fs::is_regular_file(dir / "config.json") &&
      io::peek_model_type(read_text(dir / "config.json"), (dir / "config.json").string()) == "deepseek_v41") {
    return inspect_deepseek_v41_folder(dir);
  }
  engine::LoadProgress progress;
  model::LoadOptions load_options = model::load_options_from_env();  // DEEPINFER_BATCH_INVARIANT
  load_options.progress = [&](size_t d, size_t t) { progress.update(d, t); };
  const auto model = model::load_model(dir, load_options);
  progress.finish();
  print_config(model->config(), dir);
  print_parameters(model->parameter_summary());
  print_state(model->state_layout(), model->config().max_position_embeddings);
  if (model->config().model_type == "deepseek_v4")
    print_released_state(model->state_layout(), model::deepseek_v4::released_formats(model->config()));
  std::fflush(stdout);
  return 0;
}

// A config.json alone (no weights): the architecture and what its state costs, e.g. for the released
// DeepSeek-V4-Flash config before downloading 160 GB.
int run_inspect_config(const std::string& config_file) {
  const fs::path path = config_file;
  DEEPINFER_CHECK(fs::is_regular_file(path), "config file '{}' does not exist or is not a file", path.string());
  const std::string text = read_text(path);
  if (io::peek_model_type(text, path.string()) == "deepseek_v41") return inspect_deepseek_v41_config(path, text);
  const io::ModelConfig config = io::parse_model_config(text, path.string());
  config.validate();
  DEEPINFER_CHECK(config.model_type == "deepseek_v4",
                  "{}: model_type '{}' is not supported (supported: deepseek_v4, deepseek_v41)", path.string(),
                  config.model_type);
  print_config(config, path);
  print_state(model::deepseek_v4::state_layout(config), config.max_position_embeddings);
  print_released_state(model::deepseek_v4::state_layout(config), model::deepseek_v4::released_formats(config));
  std::fflush(stdout);
  return 0;
}

const CommandRegistration registration{Command{
    "inspect", "Summarise a model folder (or a config.json): architecture, layers, parameters, state bytes",
    [](CLI::App& sub) -> std::function<int()> {
      auto model_dir = std::make_shared<std::string>();
      auto config_file = std::make_shared<std::string>();
      auto* model_opt = sub.add_option("--model", *model_dir, "Model folder (config.json, *.safetensors)");
      auto* config_opt =
          sub.add_option("--config", *config_file, "A config.json alone: architecture and state sizes, no weights");
      model_opt->excludes(config_opt);
      config_opt->excludes(model_opt);
      sub.require_option(1);
      return [model_dir, config_file] {
        try {
          return config_file->empty() ? run_inspect(*model_dir) : run_inspect_config(*config_file);
        } catch (const std::exception& e) {
          // One line for main(): multi-line messages (lists of missing tensors) are joined.
          std::string message = e.what();
          for (size_t pos; (pos = message.find('\n')) != std::string::npos;) message.replace(pos, 1, "; ");
          throw Error(message);
        }
      };
    }}};

}  // namespace
}  // namespace deepinfer::cli
