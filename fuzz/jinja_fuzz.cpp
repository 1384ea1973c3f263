// Fuzzes the Jinja subset: arbitrary template text is parsed and rendered against a small
// chat-like context. Errors (deepinfer::Error) are fine; crashes, hangs and sanitizer reports are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "encoding/jinja/template.h"

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // keep each run fast; structure matters more than length
  std::string source(reinterpret_cast<const char*>(data), size);
  static const jinja::ValueDict context = {
      {"messages", jinja::Value::from_json(encoding::Json::parse(
                       R"([{"role":"system","content":"s"},{"role":"user","content":"hi"},
                           {"role":"assistant","content":null,"tool_calls":[{"type":"function",
                            "function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r"}])"))},
      {"bos_token", jinja::Value::string("<s>")},
      {"add_generation_prompt", jinja::Value::boolean(true)},
      {"n", jinja::Value::integer(3)},
  };
  try {
    jinja::Template tmpl = jinja::Template::parse(source);
    (void)tmpl.render(context);
  } catch (const Error&) {
  }
  return 0;
}
