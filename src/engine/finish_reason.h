#pragma once
#include <cstdint>

namespace deepinfer::engine {

// Why generation ended, with OpenAI's names: a stop condition (EOS, a stop token id, a stop
// string) or a length limit (max_tokens, the context).
enum class FinishReason : uint8_t { Stop, Length };
const char* to_string(FinishReason reason);  // "stop" / "length"

}  // namespace deepinfer::engine
