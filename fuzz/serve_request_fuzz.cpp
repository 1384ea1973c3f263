// libFuzzer: HTTP request bodies through the server's request parser, as the handlers run it
// (nesting checked on the raw text, then JSON, then the chat or completions parser). Every bad
// body is an ApiError (OpenAI-shaped 4xx); nothing crashes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json_depth.h"
#include "serve/protocol/api_error.h"
#include "serve/protocol/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  const std::string body(reinterpret_cast<const char*>(data), size);
  if (deepinfer::json_nesting_depth(body) > 64) return 0;  // refused with 400 before parsing
  deepinfer::encoding::Json json;
  try {
    json = deepinfer::encoding::Json::parse(body);
  } catch (const deepinfer::encoding::Json::exception&) {  // the server answers 400 (read_json_body)
    return 0;
  }
  for (int endpoint = 0; endpoint < 2; ++endpoint) {
    try {
      if (endpoint == 0) deepinfer::serve::parse_chat_completion_request(json, 1000);
      else deepinfer::serve::parse_completion_request(json, 1000);
    } catch (const deepinfer::serve::ApiError&) {
    }
  }
  return 0;
}
