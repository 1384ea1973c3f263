// libFuzzer: config.json parsing (DeepSeek-V4 and V4.1) never crashes on any text; a bad config is
// a typed Error naming the key, whatever the nesting, types or sizes in it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/deepseek_v41_config.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    deepinfer::io::parse_model_config(text, "fuzz/config.json");
  } catch (const deepinfer::Error&) {
  }
  try {
    deepinfer::io::parse_deepseek_v41_config(text, "fuzz/config.json");
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
