// `deepinfer inspect` state sizes: from a config.json alone (the released DeepSeek-V4-Flash config,
// no weights) and from a model folder, against the arithmetic of tests/kv/state_layout_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kData = DEEPINFER_TEST_DATA_DIR;
const fs::path kModels = DEEPINFER_MODELS_DIR;

struct InspectRun {
  int exit_code = -1;
  std::string out, err;
};

std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

InspectRun inspect(const std::vector<std::string>& args) {
  static int counter = 0;
  const fs::path base = fs::temp_directory_path() /
                        ("deepinfer_inspect_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::string command = quote(DEEPINFER_CLI_PATH) + " inspect";
  for (const auto& a : args) command += " " + quote(a);
  command += " > " + quote(base.string() + ".out") + " 2> " + quote(base.string() + ".err") + " < /dev/null";
  const int status = std::system(command.c_str());
  InspectRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(base.string() + ".out");
  r.err = slurp(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

void expect_contains(const InspectRun& r, const std::string& text) {
  EXPECT_NE(r.out.find(text), std::string::npos) << "missing '" << text << "' in:\n" << r.out;
}

TEST(InspectState, ReleasedV4FlashConfigWithoutWeights) {
  const InspectRun r = inspect({"--config", (kData / "configs" / "deepseek-v4-flash" / "config.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_contains(r, "43 (2 sliding, 21 CSA, 20 HCA)");
  expect_contains(r, "13,760 B");      // per token
  expect_contains(r, "23,048,192 B");  // per sequence slot
  expect_contains(r, "blocks of 128 positions, 1,761,280 B each");
  EXPECT_EQ(r.out.find("Parameters"), std::string::npos) << "no weights, so no parameter table";
}

TEST(InspectState, ModelFolderAndItsConfigAgree) {
  const InspectRun folder = inspect({"--model", (kModels / "kjv-tiny-v4").string()});
  const InspectRun config = inspect({"--config", (kModels / "kjv-tiny-v4" / "config.json").string()});
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  ASSERT_EQ(config.exit_code, 0) << config.err;
  for (const InspectRun* r : {&folder, &config}) {
    expect_contains(*r, "224 B");        // per token
    expect_contains(*r, "133,120 B");    // per sequence slot
    expect_contains(*r, "blocks of 64 positions, 14,336 B each");
  }
  const auto state = [](const std::string& out) { return out.substr(out.find("Sequence state")); };
  EXPECT_EQ(state(folder.out), state(config.out));
}

TEST(InspectState, FlagErrorsAreOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"--model", (kModels / "kjv-tiny-v4").string(), "--config", (kModels / "kjv-tiny-v4" / "config.json").string()},
           {"--config", (kData / "configs" / "no-such" / "config.json").string()}}) {
    const InspectRun r = inspect(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
