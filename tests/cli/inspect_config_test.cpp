// `deepinfer inspect` state sizes: from a config.json alone (the released DeepSeek-V4-Flash and
// DeepSeek-V4.1-Flash configs, no weights) and from a model folder, against the arithmetic of
// tests/kv/state_layout_test.cpp and tests/kv/state_accounting_test.cpp.
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
  // The released encodings: 21 x (584/4 + 68/4) + 20 x 584/128.
  expect_contains(r, "global KV per token    3,514.25 B");
  expect_contains(r, "indexer keys         357 B (68 B per entry");
}

TEST_F(InspectState, ReleasedV41FlashConfigWithoutWeights) {
  const RunResult r = inspect({"--config", (kData / "configs" / "deepseek-v4.1-flash" / "config.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_contains(r, "deepseek_v41 (DeepSeek-V4.1)");
  expect_contains(r, "kv sources             2, 8, 14, 20");
  expect_contains(r, "layers 21-39 hold window state only");
  expect_contains(r, "     24       1/1  Reindex (own top-k)        filters by candidates");
  // Parameters by component, from the tensors the config implies.
  expect_contains(r, "routed experts           FP4 (packed I8)   543,581,798,400");
  expect_contains(r, "Engram tables            F8_E4M3           196,613,849,600");
  expect_contains(r, "total parameters: 786,283,046,754 (786.28B), 509,315,423,064 bytes");
  // F32 pools: 3 x (512 + 128) / 2 + (512 + 128) floats per token.
  expect_contains(r, "per token              6,400 B");
  // The released encodings: 3 x 288/2 + 288 + 3 x 68/2 + 68.
  expect_contains(r, "global KV per token    890 B");
  expect_contains(r, "compressed KV        720 B (288 B per entry");
  expect_contains(r, "indexer keys         170 B (68 B per entry");
}

TEST_F(InspectState, V41FixtureFolderAndItsConfigAgree) {
  const fs::path dir = kData / "fixtures" / "v41_tiny_fp8";
  const RunResult folder = inspect({"--model", dir.string()});
  const RunResult config = inspect({"--config", (dir / "config.json").string()});
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  ASSERT_EQ(config.exit_code, 0) << config.err;
  for (const RunResult* r : {&folder, &config}) {
    expect_contains(*r, "per token              576 B");    // (64 + 32) / 2 + (64 + 32) floats
    expect_contains(*r, "global KV per token    79.5 B");  // 36/2 + 36 + 17/2 + 17
  }
  const auto from = [](const std::string& out, const char* heading) { return out.substr(out.find(heading)); };
  EXPECT_EQ(from(folder.out, "Parameters"), from(config.out, "Parameters"));  // the checkpoint is what the config implies
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
