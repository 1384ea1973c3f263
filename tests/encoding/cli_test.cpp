// `deepinfer encode` prints exactly the golden prompt (or token ids); `deepinfer parse` prints the
// parsed message; bad input gives a one-line error and a non-zero exit.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "encoding/chat_encoding.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::encoding {
namespace {

const std::string kCli = DEEPINFER_CLI_PATH;
const std::string kData = DEEPINFER_TEST_DATA_DIR;

struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};

// ctest runs each test in its own process, several at once: scratch names carry the pid so
// parallel tests never overwrite each other's files.
std::filesystem::path scratch_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("deepinfer_encode_cli_" + std::to_string(getpid()) + "_" + name);
}

RunResult run(const std::string& args, const std::string& stdin_text = "") {
  auto in_path = scratch_path("in.txt");
  auto err_path = scratch_path("err.txt");
  std::ofstream(in_path, std::ios::binary) << stdin_text;
  std::string command = kCli + " " + args + " < " + in_path.string() + " 2> " + err_path.string();
  FILE* pipe = popen(command.c_str(), "r");
  RunResult result{-1, "", ""};
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), got);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path, std::ios::binary);
  result.err.assign(std::istreambuf_iterator<char>(err), {});
  return result;
}

std::string write_temp(const std::string& name, const std::string& text) {
  auto path = scratch_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

Json golden_cases(const std::string& format) {
  std::ifstream in(kData + "/encoding/golden_" + format + ".json", std::ios::binary);
  return Json::parse(in)["cases"];
}

TEST(EncodeCli, PrintsExactlyTheGoldenPrompt) {
  int checked = 0;
  for (const std::string format : {"v3", "v3.1", "v3.2", "v4", "v4.1"}) {
    Json cases = golden_cases(format);
    for (size_t i = 0; i < cases.size() && i < 6; ++i) {
      if (cases[i].contains("error")) continue;
      SCOPED_TRACE(format + "/" + cases[i]["name"].get<std::string>());
      std::string request = write_temp("deepinfer_cli_request.json", cases[i]["request"].dump());
      std::string extra = format == "v3" ? " --tokenizer-config " + kData + "/tokenizers/deepseek-v3/tokenizer_config.json" : "";
      RunResult r = run("encode --format " + format + extra + " " + request);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, cases[i]["expected"].get<std::string>());
      ++checked;
    }
  }
  EXPECT_GE(checked, 25);
}

TEST(EncodeCli, PrintsTokenIds) {
  std::string tokenizer_path = kData + "/tokenizers/deepseek-v3/tokenizer.json";
  Json request = {{"messages", Json::array({Json{{"role", "user"}, {"content", "Hello!"}}})}};
  RunResult r = run("encode --format v4 --ids --tokenizer " + tokenizer_path + " " +
                    write_temp("deepinfer_cli_request.json", request.dump()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Tokenizer tokenizer = Tokenizer::from_file(tokenizer_path);
  std::string expected;
  for (int32_t id : tokenizer.encode(ChatEncoder(ChatFormat::kV4).render(chat_request_from_json(request)).text))
    expected += (expected.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(r.out, expected + "\n");
}

TEST(EncodeCli, BadInputIsOneLineErrorAndNonZeroExit) {
  std::string good = write_temp("deepinfer_cli_good.json", R"({"messages":[{"role":"user","content":"hi"}]})");
  std::vector<std::string> bad_args = {
      "encode --format v4 " + write_temp("deepinfer_cli_bad.json", "{not json"),
      "encode --format v4 " + write_temp("deepinfer_cli_role.json", R"({"messages":[{"role":"wizard","content":"x"}]})"),
      "encode --format v9 " + good,
      "encode --format v3 " + good,  // v3 needs its chat template
      "encode --format v4 /nonexistent/request.json",
      "parse --format v7",
  };
  for (const auto& args : bad_args) {
    SCOPED_TRACE(args);
    RunResult r = run(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(r.out.empty());
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
  }
}

TEST(ParseCli, PrintsParsedMessage) {
  std::string output =
      "Let me think.</think>Checking.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
      "<｜DSML｜ parameter name=\"city\" string=\"true\">Oslo</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n"
      "</｜DSML｜ calls><｜end▁of▁sentence｜>";
  RunResult r = run("parse --format v4.1 --thinking", output);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json message = Json::parse(r.out);
  EXPECT_EQ(message["reasoning_content"], "Let me think.");
  EXPECT_EQ(message["content"], "Checking.");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(message["finish_reason"], "tool_calls");

  RunResult deltas = run("parse --format v4 --deltas", "Hi<｜end▁of▁sentence｜>");
  ASSERT_EQ(deltas.exit_code, 0);
  EXPECT_EQ(deltas.out, "{\"content\":\"Hi\"}\n{\"role\":\"assistant\",\"content\":\"Hi\",\"finish_reason\":\"stop\"}\n");
}

}  // namespace
}  // namespace deepinfer::encoding
