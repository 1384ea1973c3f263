#include "encoding/output_parser.h"

#include <algorithm>

namespace deepinfer::encoding {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && is_blank(text[begin])) ++begin;
  while (end > begin && is_blank(text[end - 1])) --end;
  return std::string(text.substr(begin, end - begin));
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// Bytes at the end of `text` that start a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& text) {
  size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    size_t need = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

bool valid_json(const std::string& text) { return Json::accept(text); }

// DSML parameters back to a JSON arguments object, as DeepSeek's decode_dsml_to_arguments writes it.
std::string dsml_arguments_json(const std::vector<std::tuple<std::string, std::string, bool>>& params) {
  std::string out = "{";
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [key, value, is_string] = params[i];
    if (i) out += ", ";
    append_python_json_string(out, key);
    out += ": ";
    // string="false" values are JSON already; ones that are not still yield valid arguments.
    if (is_string || !valid_json(value))
      append_python_json_string(out, value);
    else
      out += value;
  }
  return out + "}";
}

}  // namespace

Json ParsedMessage::to_json() const {
  Json out = {{"role", "assistant"}, {"content", content}};
  if (!reasoning_content.empty()) out["reasoning_content"] = reasoning_content;
  if (!tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& call : tool_calls)
      calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    out["tool_calls"] = calls;
  }
  out["finish_reason"] = finish_reason.empty() ? Json() : Json(finish_reason);
  if (!error.empty()) out["error"] = error;
  return out;
}

Json MessageDelta::to_json() const {
  Json out = Json::object();
  if (!reasoning_content.empty()) out["reasoning_content"] = reasoning_content;
  if (!content.empty()) out["content"] = content;
  if (!tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& [index, call] : tool_calls)
      calls.push_back({{"index", index}, {"id", call.id}, {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    out["tool_calls"] = calls;
  }
  return out;
}

StreamingOutputParser::StreamingOutputParser(OutputParserOptions options) : options_(std::move(options)) {
  mode_ = options_.thinking ? Mode::kReasoning : Mode::kContent;
  const std::string d(tokens::kDsml);
  auto dsml = [&](const std::string& block, const std::string& invoke, const std::string& param) {
    Markers m;
    m.block_open = {"\n\n<" + d + block + ">", "\n<" + d + block + ">", "<" + d + block + ">"};
    m.block_close = "</" + d + block + ">";
    m.call_open = "<" + d + invoke;
    m.call_close = "</" + d + invoke + ">";
    m.param_open = "<" + d + param;
    m.param_close = "</" + d + param + ">";
    return m;
  };
  switch (options_.format) {
    case ChatFormat::kV3:
    case ChatFormat::kV3_1:
      markers_.block_open = {"<｜tool▁calls▁begin｜>"};
      markers_.block_close = "<｜tool▁calls▁end｜>";
      markers_.call_open = "<｜tool▁call▁begin｜>";
      markers_.call_close = "<｜tool▁call▁end｜>";
      markers_.dsml = false;
      markers_.fenced_json = options_.format == ChatFormat::kV3;
      break;
    case ChatFormat::kV3_2: markers_ = dsml("function_calls", "invoke", "parameter"); break;
    case ChatFormat::kV4: markers_ = dsml("tool_calls", "invoke", "parameter"); break;
    case ChatFormat::kV4_1: markers_ = dsml(" calls", " invoke", " parameter"); break;
  }
}

MessageDelta StreamingOutputParser::push(std::string_view text) {
  MessageDelta delta;
  if (mode_ == Mode::kDone) return delta;
  pending_.append(text);
  process(false, delta);
  return delta;
}

MessageDelta StreamingOutputParser::finish() {
  MessageDelta delta;
  if (mode_ != Mode::kDone) process(true, delta);
  if (mode_ == Mode::kToolBlock) fail_block("unterminated tool-call block", delta);
  if (!pending_.empty() && mode_ != Mode::kDone) emit_text(std::move(pending_), delta);
  pending_.clear();
  mode_ = Mode::kDone;
  return delta;
}

void StreamingOutputParser::process(bool final, MessageDelta& delta) {
  while (mode_ != Mode::kDone && step(final, delta)) {
  }
}

bool StreamingOutputParser::step(bool final, MessageDelta& delta) {
  if (mode_ == Mode::kToolBlock) return step_block(final, delta);
  return step_text(final, delta);
}

size_t StreamingOutputParser::held_prefix(const std::vector<std::string>& markers) const {
  // Longest suffix of pending_ that could still grow into a marker.
  size_t longest = 0;
  for (const auto& marker : markers)
    for (size_t len = std::min(marker.size() - 1, pending_.size()); len > longest; --len)
      if (pending_.compare(pending_.size() - len, len, marker, 0, len) == 0) {
        longest = len;
        break;
      }
  return longest;
}

int StreamingOutputParser::find_marker(const std::vector<std::string>& markers, bool final, size_t& position) const {
  int best = -1;
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < markers.size(); ++i) {
    if (markers[i].empty()) continue;
    size_t pos = pending_.find(markers[i]);
    if (pos != std::string::npos && (pos < best_pos || (pos == best_pos && markers[i].size() > markers[best].size()))) {
      best = static_cast<int>(i);
      best_pos = pos;
    }
  }
  if (best < 0) return -1;
  // A marker starting earlier might still complete with more input: then wait, so that streaming
  // decides exactly like a one-piece parse.
  // The same holds for a longer marker starting where the found one starts (stop "\n\n" versus
  // "\n\n<｜DSML｜...").
  if (!final) {
    for (size_t q = 0; q <= best_pos; ++q) {
      std::string_view rest(pending_.data() + q, pending_.size() - q);
      for (const auto& marker : markers)
        if (rest.size() < marker.size() && starts_with(marker, rest) &&
            (q < best_pos || marker.size() > markers[best].size()))
          return -2;
    }
  }
  position = best_pos;
  return best;
}

void StreamingOutputParser::emit_text(std::string text, MessageDelta& delta) {
  if (text.empty()) return;
  if (mode_ == Mode::kReasoning) {
    message_.reasoning_content += text;
    delta.reasoning_content += text;
  } else {
    message_.content += text;
    delta.content += text;
  }
}

bool StreamingOutputParser::step_text(bool final, MessageDelta& delta) {
  const std::string eos(tokens::kEos);
  if (at_start_ && mode_ == Mode::kReasoning) {
    // Tolerate a model that opens its reasoning itself although the prompt already did.
    const std::string think(tokens::kThinkStart);
    if (!final && pending_.size() < think.size() && starts_with(think, pending_)) return false;
    if (starts_with(pending_, think)) pending_.erase(0, think.size());
  }
  at_start_ = false;

  // Markers that end the current run of text; their index says what to do.
  std::vector<std::string> markers = {eos};
  for (const auto& stop : options_.stop) markers.push_back(stop);
  size_t special_begin = markers.size();
  if (mode_ == Mode::kReasoning) {
    markers.push_back(std::string(tokens::kThinkEnd));
  } else if (!tools_disabled_) {
    for (const auto& open : markers_.block_open) markers.push_back(open);
  }

  size_t position = 0;
  int found = find_marker(markers, final, position);
  if (found == -2) return false;
  if (found < 0) {
    size_t hold = final ? 0 : held_prefix(markers);
    std::string ready = pending_.substr(0, pending_.size() - hold);
    size_t partial = final ? 0 : incomplete_utf8_tail(ready);
    ready.resize(ready.size() - partial);
    pending_.erase(0, ready.size());
    emit_text(std::move(ready), delta);
    return false;
  }
  emit_text(pending_.substr(0, position), delta);
  const std::string& marker = markers[found];
  pending_.erase(0, position + marker.size());
  auto index = static_cast<size_t>(found);
  if (index < special_begin) {  // EOS or a stop string
    message_.finish_reason = message_.tool_calls.empty() ? "stop" : "tool_calls";
    mode_ = Mode::kDone;
    pending_.clear();
    return false;
  }
  if (mode_ == Mode::kReasoning) {
    mode_ = Mode::kContent;
  } else {
    mode_ = Mode::kToolBlock;
    in_call_ = false;
    block_raw_ = marker;
  }
  return true;
}

bool StreamingOutputParser::step_block(bool final, MessageDelta& delta) {
  if (!in_call_) {
    size_t blanks = 0;
    while (blanks < pending_.size() && is_blank(pending_[blanks])) ++blanks;
    block_raw_ += pending_.substr(0, blanks);
    pending_.erase(0, blanks);
    if (pending_.empty()) return false;
    for (const std::string* marker : {&markers_.call_open, &markers_.block_close}) {
      if (starts_with(pending_, *marker)) {
        block_raw_ += *marker;
        pending_.erase(0, marker->size());
        if (marker == &markers_.block_close) {
          mode_ = Mode::kContent;
          block_raw_.clear();
        } else {
          in_call_ = true;
          call_text_.clear();
        }
        return true;
      }
      if (!final && pending_.size() < marker->size() && starts_with(*marker, pending_)) return false;
    }
    fail_block("unexpected text in tool-call block", delta);
    return true;
  }
  size_t close = pending_.find(markers_.call_close);
  if (close == std::string::npos) {
    // Keep a possible partial closing marker in pending_, move the rest into the call body.
    size_t keep = std::min(pending_.size(), markers_.call_close.size() - 1);
    call_text_ += pending_.substr(0, pending_.size() - keep);
    block_raw_ += pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return false;
  }
  call_text_ += pending_.substr(0, close);
  block_raw_ += pending_.substr(0, close + markers_.call_close.size());
  pending_.erase(0, close + markers_.call_close.size());
  in_call_ = false;
  finish_call(call_text_, delta);
  return true;
}

void StreamingOutputParser::finish_call(const std::string& body, MessageDelta& delta) {
  ToolCall call;
  std::string why;
  if (markers_.dsml) {
    // body: ` name="NAME">\n<param ...>VALUE</param>\n...`
    std::string_view rest = body;
    auto expect = [&](std::string_view token) {
      if (!starts_with(rest, token)) return false;
      rest.remove_prefix(token.size());
      return true;
    };
    auto skip_blanks = [&] {
      while (!rest.empty() && is_blank(rest.front())) rest.remove_prefix(1);
    };
    auto quoted_until = [&](std::string_view end, std::string& out) {
      size_t at = rest.find(end);
      if (at == std::string_view::npos) return false;
      out = std::string(rest.substr(0, at));
      rest.remove_prefix(at + end.size());
      return true;
    };
    std::vector<std::tuple<std::string, std::string, bool>> params;
    skip_blanks();
    if (!expect("name=\"") || !quoted_until("\">", call.name)) {
      why = "bad invoke header";
    } else {
      while (why.empty()) {
        skip_blanks();
        if (rest.empty()) break;
        std::string key, flag, value;
        if (!expect(markers_.param_open) || !expect(" name=\"") || !quoted_until("\" string=\"", key) ||
            !quoted_until("\">", flag) || (flag != "true" && flag != "false") ||
            !quoted_until(markers_.param_close, value)) {
          why = "bad parameter";
          break;
        }
        for (const auto& existing : params)
          if (std::get<0>(existing) == key) why = "duplicate parameter '" + key + "'";
        params.emplace_back(key, value, flag == "true");
      }
      if (why.empty()) call.arguments = dsml_arguments_json(params);
    }
  } else {
    const std::string sep = "<｜tool▁sep｜>";
    size_t at = body.find(sep);
    if (at == std::string::npos) {
      why = "missing <｜tool▁sep｜>";
    } else if (markers_.fenced_json) {
      // V3: type<sep>name\n```json\n{...}\n```
      std::string rest = body.substr(at + sep.size());
      size_t newline = rest.find('\n');
      call.name = trim(rest.substr(0, newline));
      std::string fenced = newline == std::string::npos ? "" : trim(rest.substr(newline + 1));
      if (!starts_with(fenced, "```json") || fenced.size() < 10 || fenced.compare(fenced.size() - 3, 3, "```") != 0) {
        why = "tool arguments are not a ```json block";
      } else {
        call.arguments = trim(std::string_view(fenced).substr(7, fenced.size() - 10));
      }
    } else {
      call.name = trim(std::string_view(body).substr(0, at));
      call.arguments = trim(std::string_view(body).substr(at + sep.size()));
    }
    if (why.empty() && !Json::accept(call.arguments)) why = "tool arguments are not valid JSON";
  }
  if (why.empty() && call.name.empty()) why = "tool call without a name";
  if (!why.empty()) {
    fail_block(why, delta);
    return;
  }
  int index = static_cast<int>(message_.tool_calls.size());
  call.id = "call_" + std::to_string(index);
  message_.tool_calls.push_back(call);
  delta.tool_calls.emplace_back(index, std::move(call));
  block_raw_.clear();
}

void StreamingOutputParser::fail_block(const std::string& why, MessageDelta& delta) {
  if (message_.error.empty()) message_.error = why;
  // Everything since the last good call goes out as content; no more tool parsing.
  std::string raw = std::move(block_raw_);
  block_raw_.clear();
  call_text_.clear();
  in_call_ = false;
  tools_disabled_ = true;
  mode_ = Mode::kContent;
  emit_text(std::move(raw), delta);
}

ParsedMessage parse_output(std::string_view text, const OutputParserOptions& options) {
  StreamingOutputParser parser(options);
  parser.push(text);
  parser.finish();
  return parser.message();
}

}  // namespace deepinfer::encoding
