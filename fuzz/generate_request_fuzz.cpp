// libFuzzer: one `generate --input` line through the same checks the CLI runs before any weights
// load (fields typed and in range, prompt tokenized, guided-decoding spec compiled). A bad line
// is a typed Error; nothing crashes, however deep, long or oddly typed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "cli/generate_request.h"
#include "core/error.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  static const std::optional<deepinfer::Tokenizer> tokenizer =
      deepinfer::Tokenizer::from_model_dir(DEEPINFER_MODELS_DIR "/kjv-tiny-v4");
  static const deepinfer::io::ModelConfig config = deepinfer::io::load_model_config(DEEPINFER_MODELS_DIR "/kjv-tiny-v4");
  const std::string line(reinterpret_cast<const char*>(data), size);
  try {
    deepinfer::cli::parse_request(line, deepinfer::SamplingParams{}, config, tokenizer);
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
