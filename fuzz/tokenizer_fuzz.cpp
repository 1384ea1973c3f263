// libFuzzer: tokenizer.json + tokenizer_config.json loading, then encode/decode of fuzzed text.
// Input: tokenizer.json, '\x01', tokenizer_config.json (empty: none), '\x01', text. A bad file is
// a typed Error; encoding any bytes (invalid UTF-8 included) and decoding any ids never crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t a = input.find('\x01');
  if (a == std::string_view::npos) return 0;
  const size_t b = input.find('\x01', a + 1);
  const std::string_view json = input.substr(0, a);
  const std::string_view config = b == std::string_view::npos ? std::string_view() : input.substr(a + 1, b - a - 1);
  const std::string_view text = b == std::string_view::npos ? input.substr(a + 1) : input.substr(b + 1);
  try {
    deepinfer::Tokenizer tokenizer = deepinfer::Tokenizer::from_json(json, "fuzz/tokenizer.json");
    if (!config.empty()) tokenizer.apply_config(config, "fuzz/tokenizer_config.json");
    const std::vector<int32_t> ids = tokenizer.encode(text);
    tokenizer.encode_with_bos(text);
    const std::vector<deepinfer::Tokenizer::Range> plain = {{0, text.size() / 2}};
    tokenizer.encode(text, plain);
    tokenizer.decode(ids, /*skip_special_tokens=*/true);
    // Ids the text did not produce: every id in range and a few past it.
    std::vector<int32_t> any;
    for (size_t i = 0; i < text.size() && i < 64; ++i)
      any.push_back(static_cast<int32_t>(static_cast<uint8_t>(text[i])) * 37 % static_cast<int32_t>(tokenizer.vocab_size() + 3));
    tokenizer.decode(any, false);
    for (int32_t id : any) {
      tokenizer.token_bytes(id);
      tokenizer.token_string(id);
      tokenizer.is_special(id);
    }
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
