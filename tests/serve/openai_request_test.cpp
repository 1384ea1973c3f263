// The OpenAI request parser: every field typed and range-checked, errors naming the parameter.
#include <gtest/gtest.h>

#include "core/json_depth.h"
#include "serve/protocol/api_error.h"
#include "serve/protocol/openai_request.h"

namespace deepinfer::serve {
namespace {

using encoding::Json;
constexpr int64_t kVocab = 1000;

Json chat(Json extra = Json::object()) {
  Json body = {{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The error a body produces: (status, param, code).
std::tuple<int, std::string, std::string> chat_error(const Json& body) {
  try {
    parse_chat_completion_request(body, kVocab);
  } catch (const ApiError& e) {
    return {e.status(), e.param(), e.code()};
  }
  return {0, "", ""};
}

TEST(OpenAIRequest, ChatFieldsMapToSamplingParams) {
  const auto r = parse_chat_completion_request(
      chat({{"max_completion_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"n", 2}, {"seed", 11},
            {"stop", "\n"}, {"presence_penalty", 1}, {"logit_bias", {{"5", 3}}}, {"top_k", 4}, {"min_p", 0.1},
            {"logprobs", true}, {"top_logprobs", 3}, {"stream", true},
            {"stream_options", {{"include_usage", true}}}, {"chat_template_kwargs", {{"thinking", true}}},
            {"reasoning_effort", "max"}}),
      kVocab);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_DOUBLE_EQ(r.params.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.params.top_p, 0.9);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.seed, 11u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"\n"});
  ASSERT_EQ(r.params.logit_bias.size(), 1u);
  EXPECT_EQ(r.params.logit_bias[0].first, 5);
  EXPECT_EQ(r.params.top_k, 4);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.stream.stream && r.stream.include_usage);
  EXPECT_TRUE(r.options.thinking);
  EXPECT_EQ(r.options.reasoning_effort, "max");
}

TEST(OpenAIRequest, MessagesKeepTheirKeyOrder) {
  const Json body = Json::parse(R"({"messages": [{"content": "x", "role": "user"}]})");
  const auto r = parse_chat_completion_request(body, kVocab);
  EXPECT_EQ(r.conversation.messages_json, R"([{"content":"x","role":"user"}])");
}

TEST(OpenAIRequest, ErrorsNameTheParameter) {
  EXPECT_EQ(chat_error(chat({{"temperature", "hot"}})), std::make_tuple(400, std::string("temperature"), std::string()));
  EXPECT_EQ(std::get<1>(chat_error(chat({{"temperature", 2.5}}))), "temperature");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"top_p", 0}}))), "top_p");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"n", 0}}))), "n");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"max_tokens", 2.5}}))), "max_tokens");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"logit_bias", {{"99999", 1}}}}))), "logit_bias");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"stop", Json::array({1})}}))), "stop");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"stream_options", {{"include_usage", true}}}}))), "stream_options");
  EXPECT_EQ(chat_error(chat({{"temprature", 1}})), std::make_tuple(400, std::string("temprature"), std::string("unknown_parameter")));
  EXPECT_EQ(std::get<1>(chat_error(chat({{"stream_options", {{"includeUsage", true}}}, {"stream", true}}))),
            "stream_options.includeUsage");
  EXPECT_EQ(std::get<1>(chat_error(Json{{"model", "m"}})), "messages");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"messages", Json::array({{{"role", "robot"}}})}}))), "messages[0].role");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"tools", Json::array({{{"type", "function"}}})}}))), "tools[0]");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"tool_choice", "sometimes"}}))), "tool_choice");
  EXPECT_EQ(std::get<1>(chat_error(chat({{"response_format", {{"type", "yaml"}}}}))), "response_format.type");
}

TEST(OpenAIRequest, SchemaErrorsAreTyped) {
  const Json unsupported = {{"type", "json_schema"},
                            {"json_schema", {{"name", "x"}, {"schema", {{"if", {{"type", "string"}}}, {"then", {{"minLength", 1}}}}}}}};
  EXPECT_EQ(chat_error(chat({{"response_format", unsupported}})),
            std::make_tuple(400, std::string("response_format.json_schema.schema"),
                            std::string("unsupported_schema_keyword:if")));
  const Json invalid = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", 5}}}}}};
  EXPECT_EQ(std::get<2>(chat_error(chat({{"response_format", invalid}}))), "invalid_schema");
  EXPECT_EQ(std::get<2>(chat_error(chat({{"structured_outputs", {{"regex", "("}}}}))), "invalid_schema");
}

TEST(OpenAIRequest, CompletionPromptsInEveryShape) {
  auto prompts = [](Json prompt) {
    return parse_completion_request(Json{{"prompt", prompt}}, kVocab).prompts;
  };
  EXPECT_EQ(*prompts("text")[0].text, "text");
  EXPECT_EQ(prompts(Json::array({1, 2, 3}))[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  const auto many = prompts(Json::array({"a", Json::array({4, 5})}));
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(*many[0].text, "a");
  EXPECT_EQ(many[1].token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(parse_completion_request(Json{{"prompt", "x"}}, kVocab).params.max_tokens, 16);  // OpenAI's default
  EXPECT_THROW(prompts(Json::array({1, 5000})), ApiError);
  EXPECT_THROW(prompts(""), ApiError);
  EXPECT_THROW(prompts(Json::array()), ApiError);
  EXPECT_THROW(parse_completion_request(Json{{"prompt", "x"}, {"suffix", "y"}}, kVocab), ApiError);
  const auto echo = parse_completion_request(Json{{"prompt", "x"}, {"echo", true}, {"logprobs", 2}}, kVocab);
  EXPECT_EQ(echo.params.prompt_logprobs, 2);
}

TEST(OpenAIRequest, NestingDepthIsScannedWithoutParsing) {
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": "[[[["}]})"), 3u);
  EXPECT_EQ(json_nesting_depth(std::string(100000, '[')), 100000u);
  EXPECT_EQ(json_nesting_depth(R"("\"{")"), 0u);
}

}  // namespace
}  // namespace deepinfer::serve
