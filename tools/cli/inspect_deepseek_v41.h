#pragma once
// `deepinfer inspect` for DeepSeek-V4.1 (model_type deepseek_v41): the layer roles of CSA2 sharing,
// Engram and DSpark, parameters by component (from the checkpoint, or from the config alone), and
// the state accounting in the CPU pools and in the released encodings (890 B/token for V4.1-Flash).
#include <filesystem>

namespace deepinfer::cli {

// A model folder: checks the checkpoint against the config and counts what it stores.
int inspect_deepseek_v41_folder(const std::filesystem::path& dir);
// A config.json alone: parameters counted from the tensors the config implies.
int inspect_deepseek_v41_config(const std::filesystem::path& config_file, const std::string& text);

}  // namespace deepinfer::cli
