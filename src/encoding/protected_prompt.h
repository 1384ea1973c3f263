#pragma once
// Chat prompts in which a message's text can never become a special token. The encoders build the
// prompt as one string, so the template's markers and the messages' text are not told apart by
// tokenizing it; this marks the byte ranges where request text that could form an added token
// (a full spelling, or the start or end of one at a string's edge) ended up, for
// Tokenizer::encode(text, plain) to tokenize as ordinary text. Structural strings (roles, types)
// never hold such text, so they are never touched.
//
// How: every such span of every request string (message fields, tool schemas, response_format,
// object keys; tool-call arguments after JSON parsing for the DSML formats, which parse them) is
// wrapped in two private-use sentinel characters that occur nowhere else, the request is rendered,
// and the sentinels are removed, recording where they were. The result must equal the plain
// rendering, or this throws: the wrapping may never change the prompt.
#include <string>
#include <utility>
#include <vector>

#include "encoding/chat_encoding.h"

namespace deepinfer::encoding {

struct ProtectedPrompt {
  std::string text;                                // exactly ChatEncoder::render(request).text
  std::vector<std::pair<size_t, size_t>> plain;    // sorted, disjoint [begin, end) byte ranges
  std::vector<std::string> images;
};

// `markers`: the texts that must not be matched inside request text (a tokenizer's added tokens).
ProtectedPrompt render_protected(const ChatEncoder& encoder, const ChatRequest& request,
                                 const std::vector<std::string>& markers);

}  // namespace deepinfer::encoding
