// Runs the built `deepinfer grammar check` for each exit code: 0 match, 1 reject, 2 bad grammar.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

const std::string kTokenizer = std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizers/deepseek-v3/tokenizer.json";

struct RunResult {
  int exit_code;
  std::string output;
};

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

RunResult run(const std::string& args) {
  std::string command = std::string(DEEPINFER_CLI_PATH) + " grammar check --tokenizer " + quote(kTokenizer) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 512> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string write_temp(const std::string& name, const std::string& content) {
  auto path = std::filesystem::temp_directory_path() / ("deepinfer_cli_test_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path) << content;
  return path.string();
}

TEST(GrammarCli, SchemaMatchRejectAndUnsupported) {
  std::string schema = write_temp("schema.json", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name"]})");
  auto ok = run("--schema " + quote(schema) + " --text " + quote(R"({"name": "Ada", "age": 36})"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  auto bad = run("--schema " + quote(schema) + " --text " + quote(R"({"name": "Ada", "age": -1})"));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("byte offset"), std::string::npos) << bad.output;
  std::string unsupported = write_temp("unsupported.json", R"({"type":"array","uniqueItems":true})");
  auto err = run("--schema " + quote(unsupported) + " --text '[]'");
  EXPECT_EQ(err.exit_code, 2) << err.output;
  EXPECT_NE(err.output.find("unsupported"), std::string::npos) << err.output;
  EXPECT_NE(err.output.find("uniqueItems"), std::string::npos) << err.output;
}

TEST(GrammarCli, RegexAndEbnf) {
  EXPECT_EQ(run("--regex '[0-9]{3}-[0-9]{4}' --text 555-1234").exit_code, 0);
  auto incomplete = run("--regex '[0-9]{3}-[0-9]{4}' --text 555-12");
  EXPECT_EQ(incomplete.exit_code, 1) << incomplete.output;
  EXPECT_NE(incomplete.output.find("incomplete"), std::string::npos) << incomplete.output;
  EXPECT_EQ(run("--regex '(a' --text a").exit_code, 2);
  std::string grammar = write_temp("g.gbnf", "root ::= \"yes\" | \"no\"\n");
  EXPECT_EQ(run("--ebnf " + quote(grammar) + " --text yes").exit_code, 0);
  auto wrong = run("--ebnf " + quote(grammar) + " --text maybe");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("token 0"), std::string::npos) << wrong.output;
  std::string broken = write_temp("broken.gbnf", "root ::= missing\n");
  EXPECT_EQ(run("--ebnf " + quote(broken) + " --text yes").exit_code, 2);
}

}  // namespace
