// A null content renders as empty in every format (the reference encoders print "None" for a
// null tool result): the prompt equals the one with "" and never contains "None".
#include <gtest/gtest.h>

#include "encoding/chat_encoding.h"

namespace deepinfer::encoding {
namespace {

const std::string kDataDir = DEEPINFER_TEST_DATA_DIR;

ChatEncoder encoder_for(ChatFormat format) {
  if (format != ChatFormat::kV3) return ChatEncoder(format);
  return ChatEncoder(format, jinja_source_from_tokenizer_config(kDataDir + "/tokenizers/deepseek-v3/tokenizer_config.json"));
}

Json conversation(const Json& tool_content, const Json& user_content) {
  Json call = {{"id", "call_0"}, {"type", "function"},
               {"function", {{"name", "lookup"}, {"arguments", R"({"q": "x"})"}}}};
  Json body = Json::parse(R"({"tools": [{"type": "function", "function": {"name": "lookup",
      "description": "Look up", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]})");
  body["messages"] = Json::array({
      {{"role", "user"}, {"content", "find x"}},
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}},
      {{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", tool_content}},
      {{"role", "user"}, {"content", user_content}},
  });
  return body;
}

class NullContent : public testing::TestWithParam<ChatFormat> {};

TEST_P(NullContent, RendersAsEmpty) {
  const ChatEncoder encoder = encoder_for(GetParam());
  const std::string with_null = encoder.render(chat_request_from_json(conversation(nullptr, nullptr))).text;
  const std::string with_empty = encoder.render(chat_request_from_json(conversation("", ""))).text;
  EXPECT_EQ(with_null, with_empty);
  EXPECT_EQ(with_null.find("None"), std::string::npos) << with_null;
  // The tool result itself is still rendered (an empty result, not a dropped message).
  const std::string with_text = encoder.render(chat_request_from_json(conversation("42", "ok"))).text;
  EXPECT_NE(with_text.find("42"), std::string::npos);
}

TEST(NullContentParts, V41ToolResultPartsWithNullText) {
  Json request = conversation(Json::array({{{"type", "text"}, {"text", nullptr}}}), "ok");
  const std::string text = ChatEncoder(ChatFormat::kV4_1).render(chat_request_from_json(request)).text;
  EXPECT_EQ(text.find("None"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_result></tool_result>"), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, NullContent,
                         testing::Values(ChatFormat::kV3, ChatFormat::kV3_1, ChatFormat::kV3_2, ChatFormat::kV4,
                                         ChatFormat::kV4_1),
                         [](const auto& info) {
                           std::string name(chat_format_name(info.param));
                           std::erase(name, '.');
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::encoding
