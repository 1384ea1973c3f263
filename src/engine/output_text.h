#pragma once
// The text of one request as it is generated, with OpenAI's stop-string rule: generation stops
// at the first occurrence of any stop string, and neither the stop string (unless
// include_stop_str_in_output) nor anything after it is ever part of the output. Text that could
// still turn out to be the start of a stop string is held back from deltas until the next tokens
// decide it; text is always complete UTF-8. As in vLLM, stop strings are looked for only once
// more than min_tokens tokens were pushed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

class OutputText {
 public:
  // Without a tokenizer there is no text (and no stop strings are allowed).
  OutputText(const Tokenizer* tokenizer, bool skip_special_tokens, std::vector<std::string> stop,
             bool include_stop_str_in_output = false, int64_t min_tokens = 0);

  // Appends a generated token's text. Returns true when a stop string completed: the text then
  // ends right before it and further pushes are ignored.
  bool push(int32_t id);
  // Generation ended: releases bytes held back by the detokenizer (a stop string may still
  // complete in them; push's return value rule applies).
  bool flush();
  // Text that became final since the last call.
  std::string take_delta();

  const std::string& text() const { return text_; }
  bool stopped() const { return matched_.has_value(); }
  const std::optional<std::string>& matched_stop() const { return matched_; }

 private:
  bool append(const std::string& piece);
  size_t held_back() const;  // bytes at the end of text_ that may begin a stop string

  std::optional<StreamingDetokenizer> detokenizer_;
  std::vector<std::string> stop_;
  bool include_stop_ = false;
  int64_t min_tokens_ = 0, pushed_ = 0;
  std::string text_;
  size_t emitted_ = 0;
  bool ended_ = false;
  std::optional<std::string> matched_;
};

}  // namespace deepinfer::engine
