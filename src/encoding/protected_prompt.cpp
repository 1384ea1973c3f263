#include "encoding/protected_prompt.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "core/error.h"

namespace deepinfer::encoding {

namespace {

using Span = std::pair<size_t, size_t>;

std::string utf8(char32_t code_point) {
  std::string out;
  if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
  }
  out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
  out += static_cast<char>(0x80 | (code_point & 0x3F));
  return out;
}

// The markers as a byte trie (occurrences and tails in one walk per position), plus what the
// edge checks need.
class MarkerSet {
 public:
  explicit MarkerSet(const std::vector<std::string>& markers) : markers_(markers) {
    nodes_.emplace_back();
    for (const std::string& m : markers_) {
      if (m.empty()) continue;
      max_size_ = std::max(max_size_, m.size());
      last_byte_[static_cast<unsigned char>(m.back())] = true;
      int32_t node = 0;
      for (unsigned char byte : m) {
        int32_t next = child(node, byte);
        if (next == 0) {
          next = static_cast<int32_t>(nodes_.size());
          nodes_[node].children.emplace_back(byte, next);
          nodes_.emplace_back();
        }
        node = next;
      }
      nodes_[node].terminal = true;
    }
  }

  // Spans of `s` that could take part in a marker: every occurrence, a tail that begins a marker
  // and a head that ends one (template text next to it could complete them). A string lying
  // wholly inside a marker is left alone: that would need template text that is a marker's
  // fragment on both sides, which no encoder writes, and it would wrap structural strings
  // ("tool" is inside "<｜tool▁sep｜>"). Sorted and merged.
  std::vector<Span> spans(std::string_view s) const {
    std::vector<Span> out;
    if (max_size_ == 0) return out;
    for (size_t p = 0; p < s.size(); ++p) {
      int32_t node = child(0, static_cast<unsigned char>(s[p]));
      size_t end = 0;
      for (size_t q = p + 1; node != 0; ++q) {
        if (nodes_[node].terminal) end = q;
        if (q == s.size()) {  // s ends inside a marker's spelling
          end = q;
          break;
        }
        node = child(node, static_cast<unsigned char>(s[q]));
      }
      if (end > p) out.emplace_back(p, end);
    }
    const size_t head_limit = std::min(max_size_ - 1, s.size());
    for (size_t k = head_limit; k > 0; --k) {
      if (!last_byte_[static_cast<unsigned char>(s[k - 1])]) continue;
      const std::string_view head = s.substr(0, k);
      if (std::any_of(markers_.begin(), markers_.end(),
                      [&](const std::string& m) { return m.size() > k && std::string_view(m).ends_with(head); })) {
        out.emplace_back(0, k);
        break;
      }
    }
    std::sort(out.begin(), out.end());
    std::vector<Span> merged;
    for (const Span& span : out) {
      if (!merged.empty() && span.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, span.second);
      else
        merged.push_back(span);
    }
    return merged;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // few per node: a list is enough
    bool terminal = false;
  };
  int32_t child(int32_t node, unsigned char byte) const {  // 0 = none (the root is never a child)
    for (const auto& [edge, target] : nodes_[node].children)
      if (edge == byte) return target;
    return 0;
  }
  const std::vector<std::string>& markers_;
  std::vector<Node> nodes_;
  std::array<bool, 256> last_byte_{};
  size_t max_size_ = 0;
};

class Wrapper {
 public:
  Wrapper(const MarkerSet& markers, std::string open, std::string close, bool parse_arguments)
      : markers_(markers), open_(std::move(open)), close_(std::move(close)), parse_arguments_(parse_arguments) {}

  std::string wrap_string(const std::string& s) const {
    const std::vector<Span> spans = markers_.spans(s);
    if (spans.empty()) return s;
    std::string out;
    size_t at = 0;
    for (const auto& [begin, end] : spans) {
      out.append(s, at, begin - at);
      out += open_;
      out.append(s, begin, end - begin);
      out += close_;
      at = end;
    }
    out.append(s, at, std::string::npos);
    return out;
  }

  // `arguments`: a tool call's function.arguments, which the DSML encoders JSON-parse: wrapping
  // the parsed strings keeps a marker written with JSON escapes from slipping through.
  Json wrap(const Json& value, bool arguments = false) const {
    switch (value.type()) {
      case Json::value_t::string:
        if (arguments && parse_arguments_) {
          const std::string& text = value.get_ref<const std::string&>();
          if (Json::accept(text)) return python_json_dumps(wrap(Json::parse(text)));
        }
        return wrap_string(value.get<std::string>());
      case Json::value_t::array: {
        Json out = Json::array();
        for (const auto& item : value) out.push_back(wrap(item));
        return out;
      }
      case Json::value_t::object: {
        Json out = Json::object();
        for (const auto& [key, item] : value.items()) out[wrap_string(key)] = wrap(item);
        return out;
      }
      default: return value;
    }
  }

  Json wrap_messages(const Json& messages) const {
    Json out = Json::array();
    for (const auto& message : messages) {
      Json wrapped = wrap(message);
      if (message.is_object() && message.contains("tool_calls") && message["tool_calls"].is_array()) {
        Json calls = Json::array();
        for (const auto& call : message["tool_calls"]) {
          Json w = wrap(call);
          if (call.is_object() && call.contains("function") && call["function"].is_object() &&
              call["function"].contains("arguments"))
            w["function"]["arguments"] = wrap(call["function"]["arguments"], true);
          calls.push_back(std::move(w));
        }
        wrapped["tool_calls"] = std::move(calls);
      }
      out.push_back(std::move(wrapped));
    }
    return out;
  }

 private:
  const MarkerSet& markers_;
  std::string open_, close_;
  bool parse_arguments_;
};

// Every string of the request that is rendered (values and keys).
void collect_strings(const Json& value, std::vector<std::string_view>& out) {
  if (value.is_string()) {
    out.push_back(value.get_ref<const std::string&>());
  } else if (value.is_array()) {
    for (const auto& item : value) collect_strings(item, out);
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      out.push_back(key);
      collect_strings(item, out);
    }
  }
}

std::string strip(std::string text, const std::string& open, const std::string& close) {
  for (const std::string* s : {&open, &close})
    for (size_t at = text.find(*s); at != std::string::npos; at = text.find(*s, at)) text.erase(at, s->size());
  return text;
}

}  // namespace

ProtectedPrompt render_protected(const ChatEncoder& encoder, const ChatRequest& request,
                                 const std::vector<std::string>& markers) {
  RenderedPrompt plain = encoder.render(request);
  ProtectedPrompt out;
  const MarkerSet marker_set(markers);

  // Sentinels: a pair of private-use characters found in no request string and not in the prompt.
  std::vector<std::string_view> strings;
  collect_strings(request.messages, strings);
  collect_strings(request.tools, strings);
  collect_strings(request.response_format, strings);
  strings.push_back(plain.text);
  std::string open, close;
  for (char32_t cp = 0xF0000; cp + 1 <= 0xFFFFD && open.empty(); cp += 2) {
    std::string a = utf8(cp), b = utf8(cp + 1);
    if (std::none_of(strings.begin(), strings.end(), [&](std::string_view s) {
          return s.find(a) != std::string_view::npos || s.find(b) != std::string_view::npos;
        })) {
      open = std::move(a);
      close = std::move(b);
    }
  }
  DEEPINFER_CHECK(!open.empty(), "chat request: its text uses every supplementary private-use character");

  const bool dsml = encoder.format() == ChatFormat::kV3_2 || encoder.format() == ChatFormat::kV4 ||
                    encoder.format() == ChatFormat::kV4_1;
  const Wrapper wrapper(marker_set, open, close, dsml);
  ChatRequest wrapped = request;
  wrapped.messages = wrapper.wrap_messages(request.messages);
  wrapped.tools = wrapper.wrap(request.tools);
  wrapped.response_format = wrapper.wrap(request.response_format);
  const RenderedPrompt marked = encoder.render(wrapped);

  // Sentinels out, their positions kept. A renderer that cut a wrapped span (V3.1 keeps what
  // follows "</think>" in old turns) leaves a lone sentinel: it is dropped.
  const std::string& m = marked.text;
  constexpr size_t kClosed = std::string::npos;
  size_t opened = kClosed;
  out.text.reserve(m.size());
  for (size_t i = 0; i < m.size();) {
    if (m.compare(i, open.size(), open) == 0) {
      opened = out.text.size();
      i += open.size();
    } else if (m.compare(i, close.size(), close) == 0) {
      if (opened != kClosed && opened < out.text.size()) out.plain.emplace_back(opened, out.text.size());
      opened = kClosed;
      i += close.size();
    } else {
      out.text += m[i++];
    }
  }
  DEEPINFER_CHECK(out.text == plain.text,
                  "internal error: marking message text changed the {} prompt (cannot keep special tokens out of it)",
                  chat_format_name(encoder.format()));
  for (const std::string& image : marked.images) out.images.push_back(strip(image, open, close));
  return out;
}

}  // namespace deepinfer::encoding
