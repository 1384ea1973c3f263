#pragma once
// tool_choice "required" / a named function: a GBNF grammar that admits only a tool-call block in
// the model's own DSML format (V3.2 function_calls, V4 tool_calls, V4.1 calls), of the allowed
// function names, with any parameters. Guided decoding then makes the reply a tool call, which
// the output parser reads back as tool_calls.
#include <string>
#include <vector>

#include "encoding/chat_encoding.h"
#include "serve/protocol/openai_request.h"

namespace deepinfer::serve {

// Each call names one of `tools` and passes up to as many parameters as it declares, by its keys (any
// key when it declares none), values up to 256 bytes; at most 8 calls, exactly one when `single`
// (a named function). Names are OpenAI function names (checked by the request parser). Throws
// ApiError for formats without DSML tool calls (V3, V3.1).
std::string forced_tool_call_grammar(encoding::ChatFormat format, const std::vector<ChatCompletionRequest::Tool>& tools,
                                     bool single);

}  // namespace deepinfer::serve
