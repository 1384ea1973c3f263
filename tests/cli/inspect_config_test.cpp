// `deepinfer inspect` state sizes: from a config.json alone (the released DeepSeek-V4-Flash config,
// no weights) and from a model folder, against the arithmetic of tests/kv/state_layout_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace {

namespace fs = std::filesystem;
using namespace deepinfer::cli_test;

const fs::path kData = DEEPINFER_TEST_DATA_DIR;
const fs::path kModels = DEEPINFER_MODELS_DIR;

class InspectState : public CliHarness {
 protected:
  InspectState() : CliHarness("deepinfer_inspect_test_") {}

  // `deepinfer inspect args...`
  RunResult inspect(std::vector<std::string> args) const {
    args.insert(args.begin(), "inspect");
    return run(args);
  }
};

void expect_contains(const RunResult& r, const std::string& text) {
  EXPECT_NE(r.out.find(text), std::string::npos) << "missing '" << text << "' in:\n" << r.out;
}

TEST_F(InspectState, ReleasedV4FlashConfigWithoutWeights) {
  const RunResult r = inspect({"--config", (kData / "configs" / "deepseek-v4-flash" / "config.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_contains(r, "43 (2 sliding, 21 CSA, 20 HCA)");
  expect_contains(r, "13,760 B");      // per token
  expect_contains(r, "23,048,192 B");  // per sequence slot
  expect_contains(r, "blocks of 128 positions, 1,761,280 B each");
  EXPECT_EQ(r.out.find("Parameters"), std::string::npos) << "no weights, so no parameter table";
}

TEST_F(InspectState, ModelFolderAndItsConfigAgree) {
  const RunResult folder = inspect({"--model", (kModels / "kjv-tiny-v4").string()});
  const RunResult config = inspect({"--config", (kModels / "kjv-tiny-v4" / "config.json").string()});
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  ASSERT_EQ(config.exit_code, 0) << config.err;
  for (const RunResult* r : {&folder, &config}) {
    expect_contains(*r, "224 B");        // per token
    expect_contains(*r, "133,120 B");    // per sequence slot
    expect_contains(*r, "blocks of 64 positions, 14,336 B each");
  }
  const auto state = [](const std::string& out) { return out.substr(out.find("Sequence state")); };
  EXPECT_EQ(state(folder.out), state(config.out));
}

TEST_F(InspectState, FlagErrorsAreOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"--model", (kModels / "kjv-tiny-v4").string(), "--config", (kModels / "kjv-tiny-v4" / "config.json").string()},
           {"--config", (kData / "configs" / "no-such" / "config.json").string()}}) {
    const RunResult r = inspect(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
