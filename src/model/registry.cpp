// Architecture registry: config.json `model_type` -> loader.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"
#include "model/model.h"

namespace deepinfer::model {

std::string LoadOptions::default_device() {
  const char* v = std::getenv("DEEPINFER_DEVICE");
  return v && *v ? std::string(v) : std::string("cpu");
}

LoadOptions load_options_from_env() {
  LoadOptions options;
  if (const char* v = std::getenv("DEEPINFER_BATCH_INVARIANT"); v && std::string_view(v) == "1") {
    options.top_k_ties = TopKTies::LowerIndex;
    options.batch_invariant = true;
  }
  return options;
}

std::unique_ptr<CausalLM> load_model(const std::filesystem::path& dir, const LoadOptions& options) {
  DEEPINFER_CHECK(std::filesystem::is_directory(dir), "model folder '{}' does not exist or is not a directory",
                  dir.string());
  if (io::load_deepseek_v41_config_if_v41(dir)) return deepseek_v41::load(dir, options);
  io::ModelConfig config = io::load_model_config(dir);
  if (config.model_type == "deepseek_v4") {
    auto weights = deepseek_v4::load_weights(dir, config, options.progress);
    return std::make_unique<deepseek_v4::DeepseekV4>(std::move(config), std::move(weights), options);
  }
  fail("{}: model_type '{}' is not supported (supported: deepseek_v4, deepseek_v41)", (dir / "config.json").string(),
       config.model_type);
}

}  // namespace deepinfer::model
