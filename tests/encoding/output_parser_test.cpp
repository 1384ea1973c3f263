// Streaming output parser: every golden output (tests/data/encoding/output_goldens.json) parses to
// its expected message in one piece, byte by byte, in random chunks and token by token with the
// real DeepSeek tokenizer, and the deltas add up to the final message.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "encoding/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::encoding {
namespace {

struct GoldenOutput {
  std::string name;
  OutputParserOptions options;
  std::string output;
  Json expected;
};

std::vector<GoldenOutput> load_goldens() {
  std::ifstream in(std::string(DEEPINFER_TEST_DATA_DIR) + "/encoding/output_goldens.json", std::ios::binary);
  EXPECT_TRUE(in.good());
  Json data = Json::parse(in);
  std::vector<GoldenOutput> goldens;
  for (const auto& c : data["cases"]) {
    GoldenOutput g;
    g.name = c["name"].get<std::string>();
    g.options.format = parse_chat_format(c["format"].get<std::string>());
    g.options.thinking = c["thinking"].get<bool>();
    if (c.contains("stop")) g.options.stop = c["stop"].get<std::vector<std::string>>();
    g.output = c["output"].get<std::string>();
    g.expected = c["expected"];
    goldens.push_back(std::move(g));
  }
  return goldens;
}

void expect_message(const ParsedMessage& message, const Json& expected) {
  EXPECT_EQ(message.reasoning_content, expected["reasoning_content"].get<std::string>());
  EXPECT_EQ(message.content, expected["content"].get<std::string>());
  ASSERT_EQ(message.tool_calls.size(), expected["tool_calls"].size());
  for (size_t i = 0; i < message.tool_calls.size(); ++i) {
    EXPECT_EQ(message.tool_calls[i].name, expected["tool_calls"][i]["name"].get<std::string>());
    EXPECT_EQ(message.tool_calls[i].arguments, expected["tool_calls"][i]["arguments"].get<std::string>());
    EXPECT_EQ(message.tool_calls[i].id, "call_" + std::to_string(i));
  }
  EXPECT_EQ(message.finish_reason, expected["finish_reason"].is_null() ? "" : expected["finish_reason"].get<std::string>());
  EXPECT_EQ(message.error, expected["error"].get<std::string>());
}

bool same_message(const ParsedMessage& a, const ParsedMessage& b) {
  if (a.reasoning_content != b.reasoning_content || a.content != b.content || a.finish_reason != b.finish_reason ||
      a.error != b.error || a.tool_calls.size() != b.tool_calls.size())
    return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.tool_calls[i].name || a.tool_calls[i].arguments != b.tool_calls[i].arguments)
      return false;
  return true;
}

// Streams `pieces`, checks that the deltas add up to the final message, returns the message.
ParsedMessage stream(const OutputParserOptions& options, const std::vector<std::string>& pieces) {
  StreamingOutputParser parser(options);
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  auto absorb = [&](const MessageDelta& delta) {
    reasoning += delta.reasoning_content;
    content += delta.content;
    for (const auto& [index, call] : delta.tool_calls) {
      EXPECT_EQ(index, static_cast<int>(calls.size()));
      calls.push_back(call);
    }
  };
  for (const auto& piece : pieces) absorb(parser.push(piece));
  absorb(parser.finish());
  const ParsedMessage& message = parser.message();
  EXPECT_EQ(reasoning, message.reasoning_content);
  EXPECT_EQ(content, message.content);
  EXPECT_EQ(calls.size(), message.tool_calls.size());
  return message;
}

const Tokenizer& deepseek_tokenizer() {
  static const Tokenizer tokenizer =
      Tokenizer::from_file(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3/tokenizer.json");
  return tokenizer;
}

TEST(OutputParser, GoldensParseInOnePiece) {
  auto goldens = load_goldens();
  ASSERT_GE(goldens.size(), 40u);
  for (const auto& g : goldens) {
    SCOPED_TRACE(g.name);
    expect_message(parse_output(g.output, g.options), g.expected);
  }
}

TEST(OutputParser, ByteByByteAndRandomChunksMatchOnePiece) {
  std::mt19937 rng(1234);
  for (const auto& g : load_goldens()) {
    SCOPED_TRACE(g.name);
    ParsedMessage whole = parse_output(g.output, g.options);
    std::vector<std::string> bytes;
    for (char c : g.output) bytes.emplace_back(1, c);
    EXPECT_TRUE(same_message(stream(g.options, bytes), whole));
    for (int round = 0; round < 5; ++round) {
      std::vector<std::string> chunks;
      for (size_t i = 0; i < g.output.size();) {
        size_t n = std::uniform_int_distribution<size_t>(1, 12)(rng);
        chunks.push_back(g.output.substr(i, n));
        i += n;
      }
      EXPECT_TRUE(same_message(stream(g.options, chunks), whole));
    }
  }
}

TEST(OutputParser, TokenByTokenWithDeepSeekTokenizerMatchesOnePiece) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  size_t tokens_seen = 0;
  for (const auto& g : load_goldens()) {
    SCOPED_TRACE(g.name);
    ParsedMessage whole = parse_output(g.output, g.options);
    std::vector<int32_t> ids = tokenizer.encode(g.output);
    ASSERT_EQ(tokenizer.decode(ids), g.output);
    // Raw token bytes: pieces may end inside a UTF-8 character or a marker.
    std::vector<std::string> raw;
    for (int32_t id : ids) raw.push_back(tokenizer.token_bytes(id));
    EXPECT_TRUE(same_message(stream(g.options, raw), whole));
    // Detokenized text as a server streams it.
    StreamingDetokenizer detokenizer(tokenizer);
    std::vector<std::string> text;
    for (int32_t id : ids) text.push_back(detokenizer.push(id));
    text.push_back(detokenizer.flush());
    EXPECT_TRUE(same_message(stream(g.options, text), whole));
    tokens_seen += ids.size();
  }
  EXPECT_GT(tokens_seen, 1000u);
}

TEST(OutputParser, EncodedAssistantTurnsRoundTrip) {
  // The assistant part of a rendered prompt is what the model writes: parsing it gives the turn back.
  for (ChatFormat format : {ChatFormat::kV3_2, ChatFormat::kV4, ChatFormat::kV4_1}) {
    ChatRequest request;
    request.thinking = true;
    request.messages = Json::parse(R"([
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "Checking.", "reasoning_content": "Use the tool.",
       "tool_calls": [{"id": "1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 3}"}}]}])");
    std::string prompt = ChatEncoder(format).render(request).text;
    std::string marker = std::string(tokens::kAssistant) + std::string(tokens::kThinkStart);
    size_t start = prompt.find(marker);
    ASSERT_NE(start, std::string::npos);
    OutputParserOptions options;
    options.format = format;
    options.thinking = true;
    ParsedMessage message = parse_output(prompt.substr(start + marker.size()), options);
    EXPECT_EQ(message.reasoning_content, "Use the tool.");
    EXPECT_EQ(message.content, "Checking.");
    ASSERT_EQ(message.tool_calls.size(), 1u);
    EXPECT_EQ(message.tool_calls[0].name, "get_weather");
    EXPECT_EQ(message.tool_calls[0].arguments, "{\"city\": \"Oslo\", \"days\": 3}");
    EXPECT_EQ(message.finish_reason, "tool_calls");
    EXPECT_TRUE(message.error.empty());
  }
}

TEST(OutputParser, DeltasAreOpenAIShaped) {
  OutputParserOptions options;
  options.format = ChatFormat::kV4;
  StreamingOutputParser parser(options);
  MessageDelta first = parser.push("Hel");
  EXPECT_EQ(first.to_json().dump(), R"({"content":"Hel"})");
  MessageDelta held = parser.push("lo\n");  // the newline could start a tool-call block: held back
  EXPECT_EQ(held.content, "lo");
  MessageDelta call = parser.push(
      "\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"false\">1"
      "</｜DSML｜parameter>\n</｜DSML｜invoke>");
  Json json = call.to_json();
  ASSERT_EQ(json["tool_calls"].size(), 1u);
  EXPECT_EQ(json["tool_calls"][0]["index"], 0);
  EXPECT_EQ(json["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(json["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");
  parser.push("\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>");
  EXPECT_TRUE(parser.done());
  EXPECT_TRUE(parser.push("ignored").empty());
  EXPECT_EQ(parser.message().finish_reason, "tool_calls");
  EXPECT_EQ(parser.message().to_json()["tool_calls"][0]["id"], "call_0");
}

TEST(OutputParser, IncompleteUtf8IsHeldBack) {
  OutputParserOptions options;
  options.format = ChatFormat::kV4;
  StreamingOutputParser parser(options);
  std::string euro = "€";  // 3 bytes
  EXPECT_EQ(parser.push(euro.substr(0, 1)).content, "");
  EXPECT_EQ(parser.push(euro.substr(1, 1)).content, "");
  EXPECT_EQ(parser.push(euro.substr(2)).content, euro);
}

}  // namespace
}  // namespace deepinfer::encoding
