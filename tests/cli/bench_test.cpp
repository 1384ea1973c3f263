// `deepinfer bench` on the CPU with the v4_tiny_a fixture: every requested row comes back with a
// floor, the copied decode state gives sequence 0's logits, and the byte counts follow the routing
// (batch 1 touches exactly top-k experts per layer). No timing is checked: speed is the benchmark's
// output, not a test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.h"

namespace {

namespace fs = std::filesystem;
using namespace deepinfer::cli_test;
using nlohmann::json;

const fs::path kFixture = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures" / "v4_tiny_a";

class BenchCommand : public CliHarness {
 protected:
  BenchCommand() : CliHarness("deepinfer_bench_test_") {}
};

TEST_F(BenchCommand, CpuRunReportsEveryRowWithItsFloor) {
  const fs::path out = scratch_ / "bench.json";
  const RunResult r = run({"bench", "--model", kFixture.string(), "--device", "cpu", "--batch", "1,4", "--context",
                           "64", "--prefill", "32", "--steps", "1", "--warmup", "1", "--prefill-runs", "1", "--greedy",
                           "4", "--json", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("copied to the other 3 sequences"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| decode B=4, ctx 64 |"), std::string::npos) << r.out;

  json j = json::parse(std::ifstream(out));
  json config = json::parse(std::ifstream(kFixture / "config.json"));
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["greedy_ids"].size(), 4u);
  EXPECT_GT(j["copy_bytes_per_s"].get<double>(), 0.0);
  for (const auto& row : j["rows"]) {
    EXPECT_GT(row["floor_s"].get<double>(), 0.0) << row.dump();
    EXPECT_GT(row["weight_bytes"].get<double>(), 0.0) << row.dump();
    EXPECT_GT(row["flops"].get<double>(), 0.0) << row.dump();
  }
  const json& b1 = j["rows"][0];
  const json& b4 = j["rows"][1];
  EXPECT_EQ(b1["kind"], "decode");
  EXPECT_DOUBLE_EQ(b1["experts_per_layer"].get<double>(), config["num_experts_per_tok"].get<double>());
  EXPECT_GT(b4["experts_per_layer"].get<double>(), b1["experts_per_layer"].get<double>());
  EXPECT_GT(b4["weight_bytes"].get<double>(), b1["weight_bytes"].get<double>());
  EXPECT_DOUBLE_EQ(b4["state_bytes"].get<double>(), 4 * b1["state_bytes"].get<double>());
  // The same token in every copied sequence gives exactly sequence 0's logits.
  EXPECT_EQ(b4["copy_check_max_logit_diff"].get<double>(), 0.0);
  EXPECT_EQ(j["rows"][2]["kind"], "prefill");
}

// The batch-invariant mode is timed when asked for by flag or by DEEPINFER_BATCH_INVARIANT=1 (the
// variable every other command reads, which the settings line echoes), and reported as such.
TEST_F(BenchCommand, BatchInvariantModeByFlagOrEnvironment) {
  const fs::path out = scratch_ / "bench.json";
  auto run_mode = [&](bool flag, bool env) {
    std::vector<std::string> args = {"bench", "--model", kFixture.string(), "--device", "cpu", "--batch", "1",
                                     "--context", "16", "--prefill", "none", "--steps", "1", "--warmup", "0",
                                     "--json", out.string()};
    if (flag) args.push_back("--batch-invariant");
    if (env) ::setenv("DEEPINFER_BATCH_INVARIANT", "1", 1);
    const RunResult r = run(args);
    if (env) ::unsetenv("DEEPINFER_BATCH_INVARIANT");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::make_pair(r.out, json::parse(std::ifstream(out)));
  };
  for (const auto& [flag, env] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    const auto [text, j] = run_mode(flag, env);
    const bool invariant = flag || env;
    EXPECT_EQ(j["batch_invariant"].get<bool>(), invariant) << "flag " << flag << " env " << env;
    EXPECT_EQ(j["ties"].get<std::string>(), invariant ? "lower" : "reference");
    EXPECT_NE(text.find(invariant ? "batch-invariant (deterministic) mode" : "default (not batch-invariant) mode"),
              std::string::npos)
        << text;
  }
}

TEST_F(BenchCommand, BadListIsOneLineError) {
  const RunResult r = run({"bench", "--model", kFixture.string(), "--device", "cpu", "--batch", "1,0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
}

}  // namespace
