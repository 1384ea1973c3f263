#include "serve/tool_choice.h"

#include <fmt/format.h>

#include "serve/protocol/api_error.h"

namespace deepinfer::serve {

namespace {

// A JSON-ish key (a property name) as a GBNF literal: escape backslash and quote.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string forced_tool_call_grammar(encoding::ChatFormat format, const std::vector<ChatCompletionRequest::Tool>& tools,
                                     bool single) {
  std::string block, invoke, param;
  switch (format) {
    case encoding::ChatFormat::kV3_2: block = "function_calls", invoke = "invoke", param = "parameter"; break;
    case encoding::ChatFormat::kV4: block = "tool_calls", invoke = "invoke", param = "parameter"; break;
    case encoding::ChatFormat::kV4_1: block = " calls", invoke = " invoke", param = " parameter"; break;
    default:
      throw bad_request(fmt::format("tool_choice 'required' and named functions need a DSML model (V3.2, V4, V4.1); "
                                    "this model's format is {}",
                                    encoding::chat_format_name(format)),
                        "tool_choice", "unsupported_parameter");
  }
  const std::string d(encoding::tokens::kDsml);
  std::string g = fmt::format("root ::= {} call{} {}\n", literal("\n\n<" + d + block + ">\n"), single ? "" : "{1,8}",
                              literal("</" + d + block + ">"));
  std::string calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& tool = tools[i];
    calls += (calls.empty() ? "" : " | ") + fmt::format("call{}", i);
    // Parameters: declared keys (as many calls as keys), or any key when none are declared.
    std::string keys = "key";
    if (!tool.any_properties) {
      keys.clear();
      for (const auto& p : tool.properties) keys += (keys.empty() ? "" : " | ") + literal(p);
    }
    const size_t max_params = tool.any_properties ? 16 : tool.properties.size();
    g += fmt::format("call{} ::= {} ", i, literal("<" + d + invoke + " name=\"" + tool.name + "\">\n"));
    if (max_params > 0) g += fmt::format("param{}{{0,{}}} ", i, max_params);
    g += literal("</" + d + invoke + ">\n") + "\n";
    if (max_params > 0)
      g += fmt::format("param{} ::= {} ({}) {} (\"true\" | \"false\") {} value {}\n", i,
                       literal("<" + d + param + " name=\""), keys.empty() ? "key" : keys, literal("\" string=\""),
                       literal("\">"), literal("</" + d + param + ">\n"));
  }
  g += "call ::= " + calls + "\n";
  g += "key ::= [a-zA-Z0-9_.-]{1,64}\n";
  g += "value ::= [^<]{0,256}\n";
  return g;
}

}  // namespace deepinfer::serve
