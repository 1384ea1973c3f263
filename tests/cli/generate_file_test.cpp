// `deepinfer generate --input requests.jsonl --output results.jsonl`: every request runs (greedy
// ones give the golden ids), results keep input order whatever the concurrency, and a bad line is
// a one-line error naming its line number before any work starts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "io/safetensors.h"
#include "testing/big_file.h"

namespace {

namespace fs = std::filesystem;
using namespace deepinfer::cli_test;
using nlohmann::json;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";
const fs::path kFixtures = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";

std::vector<int64_t> golden(const fs::path& file, const std::string& name) {
  return deepinfer::io::to_int64(deepinfer::io::Checkpoint::open_file(file).get(name));
}

class GenerateFile : public CliHarness {
 protected:
  GenerateFile() : CliHarness("deepinfer_generate_file_test_") {}

  fs::path write(const std::string& name, const std::vector<std::string>& lines) const {
    const fs::path path = scratch_ / name;
    std::ofstream out(path, std::ios::binary);
    for (const auto& l : lines) out << l << "\n";
    return path;
  }
  std::vector<json> results(const fs::path& path) const {
    std::vector<json> out;
    for (const auto& line : lines_of(read_file(path))) out.push_back(json::parse(line));
    return out;
  }
  void expect_line_error(const std::vector<std::string>& lines, const std::string& line_no,
                         const std::string& mention) const {
    const fs::path input = write("bad.jsonl", lines), output = scratch_ / "bad_out.jsonl";
    const auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string()});
    EXPECT_NE(r.exit_code, 0);
    const auto err = lines_of(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("deepinfer: error: ", 0), 0u) << err[0];
    EXPECT_NE(err[0].find("line " + line_no + ":"), std::string::npos) << err[0];
    EXPECT_NE(err[0].find(mention), std::string::npos) << "expected '" << mention << "' in: " << err[0];
    EXPECT_FALSE(fs::exists(output)) << "no work (and no output) before every line is checked";
    EXPECT_EQ(r.err.find("loaded"), std::string::npos) << "weights were loaded before the error: " << r.err;
  }
};

TEST_F(GenerateFile, RunsEveryRequestAndKeepsInputOrder) {
  const fs::path g = kKjv / "golden.safetensors";
  const json ids0 = golden(g, "prompt0.input_ids");
  std::vector<std::string> lines = {
      R"({"prompt": "Psalms 23:1 The LORD is my shepherd; I", "max_tokens": 48, "temperature": 0})",
      json{{"prompt_token_ids", ids0}, {"max_tokens", 48}, {"temperature", 0}}.dump(),
      R"({"prompt": "Psalms 23:1 The LORD is my shepherd; I", "temperature": 0, "stop": " law", "max_tokens": 48})",
      "",  // blank lines are skipped
      R"({"prompt": "And God said", "max_tokens": 5, "temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 3})",
      R"({"prompt": "And God said", "max_tokens": 7, "ignore_eos": true, "stop_token_ids": [1, 2]})",
  };
  for (int i = 0; i < 10; ++i)
    lines.push_back(json{{"prompt_token_ids", {0, 100 + i, 7, 9}}, {"max_tokens", 3 + i}, {"seed", i}, {"ignore_eos", true}}.dump());
  const fs::path input = write("in.jsonl", lines);
  const fs::path out_a = scratch_ / "a.jsonl", out_b = scratch_ / "b.jsonl";
  const auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", out_a.string(),
                      "--max-num-seqs", "3", "--max-num-batched-tokens", "16", "--seed", "42"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("15/15 requests done"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;

  const auto res = results(out_a);
  ASSERT_EQ(res.size(), 15u);
  for (size_t i = 0; i < res.size(); ++i) {
    EXPECT_EQ(res[i]["index"], i);
    for (const char* key : {"prompt_token_ids", "token_ids", "text", "finish_reason", "cached_tokens"})
      EXPECT_TRUE(res[i].contains(key)) << key;
    EXPECT_EQ(res[i].size(), 6u) << res[i].dump();
  }
  EXPECT_EQ(res[0]["prompt_token_ids"].get<std::vector<int64_t>>(), golden(g, "prompt1.input_ids"));
  EXPECT_EQ(res[0]["token_ids"].get<std::vector<int64_t>>(), golden(g, "prompt1.greedy_ids"));
  EXPECT_EQ(res[0]["finish_reason"], "length");
  EXPECT_EQ(res[0]["text"].get<std::string>().rfind(" will not forget thy law: neither", 0), 0u) << res[0]["text"];
  EXPECT_EQ(res[1]["token_ids"].get<std::vector<int64_t>>(), golden(g, "prompt0.greedy_ids"));
  EXPECT_EQ(res[2]["text"], " will not forget thy");
  EXPECT_EQ(res[2]["finish_reason"], "stop");
  EXPECT_LE(res[3]["token_ids"].size(), 5u);
  EXPECT_LE(res[4]["token_ids"].size(), 7u);
  for (size_t i = 5; i < 15; ++i) EXPECT_EQ(res[i]["token_ids"].size(), i - 5 + 3) << i;
  // Input order and the tokens do not depend on how many run at once (--seed: the base of the
  // seeds that unseeded lines get, so line 5 draws the same stream in both runs).
  const auto r2 = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", out_b.string(),
                       "--max-num-seqs", "16", "--seed", "42"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(read_file(out_a), read_file(out_b));
}

TEST_F(GenerateFile, FixtureWithoutTokenizerTakesTokenIds) {
  const fs::path dir = kFixtures / "v4_tiny_a";
  std::vector<std::string> lines;
  for (const std::string p : {"p0", "p1"})
    lines.push_back(json{{"prompt_token_ids", golden(dir / "golden.safetensors", p + ".input_ids")},
                         {"max_tokens", 13},
                         {"temperature", 0}}
                        .dump());
  const fs::path input = write("in.jsonl", lines);
  const auto r = run({"generate", "--model", dir.string(), "--input", input.string(), "--output", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 2u) << r.out;
  EXPECT_EQ(json::parse(out[0])["token_ids"].get<std::vector<int64_t>>(), golden(dir / "golden.safetensors", "p0.generated_ids"));
  EXPECT_EQ(json::parse(out[1])["token_ids"].get<std::vector<int64_t>>(), golden(dir / "golden.safetensors", "p1.generated_ids"));
  EXPECT_EQ(json::parse(out[1])["text"], "");

  const fs::path text = write("text.jsonl", {lines[0], R"({"prompt": "hello"})"});
  const auto bad = run({"generate", "--model", dir.string(), "--input", text.string(), "--output", "-"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("line 2:"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("prompt_token_ids"), std::string::npos) << bad.err;
}

TEST_F(GenerateFile, BadLinesAreErrorsNamingTheLine) {
  const std::string good = R"({"prompt": "In the beginning"})";
  expect_line_error({good, R"({"prompt": "x")"}, "2", "invalid JSON");
  expect_line_error({good, good, R"({"prompt": "x", "temprature": 0})"}, "3", "unknown field 'temprature'");
  expect_line_error({good, R"({"prompt": "x", "max_tokens": "5"})"}, "2", "max_tokens");
  expect_line_error({good, R"({"prompt": "x", "max_tokens": 2.5})"}, "2", "max_tokens");
  expect_line_error({good, R"({"prompt": "x", "max_tokens": 0})"}, "2", "max_tokens");
  expect_line_error({good, R"({"prompt": "x", "top_p": 1.5})"}, "2", "top_p");
  expect_line_error({good, R"({"prompt": "x", "temperature": -1})"}, "2", "temperature");
  expect_line_error({good, R"({"prompt": "x", "top_k": -2})"}, "2", "top_k");
  expect_line_error({good, R"({"prompt": "x", "seed": -4})"}, "2", "seed");
  expect_line_error({good, R"({"prompt": "x", "ignore_eos": 1})"}, "2", "ignore_eos");
  expect_line_error({good, R"({"prompt": "x", "stop": [""]})"}, "2", "stop");
  expect_line_error({good, R"({"prompt": "x", "stop": 5})"}, "2", "stop");
  expect_line_error({good, R"({"prompt": "x", "stop_token_ids": [1, 99999]})"}, "2", "99999");
  expect_line_error({good, R"({"prompt": ""})"}, "2", "empty");
  expect_line_error({good, R"({"prompt_token_ids": []})"}, "2", "empty");
  expect_line_error({good, R"({"prompt_token_ids": [0, 4096]})"}, "2", "4096");
  expect_line_error({good, R"({"prompt_token_ids": "0 1"})"}, "2", "prompt_token_ids");
  expect_line_error({good, R"({"prompt": "x", "prompt_token_ids": [0]})"}, "2", "exactly one");
  expect_line_error({good, R"({"max_tokens": 3})"}, "2", "exactly one");
  expect_line_error({"", good, R"([1, 2])"}, "3", "object");
  expect_line_error({good, json{{"prompt_token_ids", std::vector<int>(5000, 3)}}.dump()}, "2", "context");
  // Found by fuzz_generate_request: a number past double's range is nlohmann's out_of_range, not
  // a parse_error; and nesting that recursive JSON code could not survive.
  expect_line_error({good, R"({"prompt": "x", "temperature": 9e999999})"}, "2", "invalid JSON");
  expect_line_error({good, "{\"prompt\": \"x\", \"structured_outputs\": {\"json\": " + std::string(100000, '[') + "}}"}, "2",
                    "levels deep");
}

// Crafted huge inputs (sparse files, so they cost no disk): a 2 GB line without a newline stops at
// the line limit, a 2 GB generation_config.json is refused from its size; one line each, no work.
TEST_F(GenerateFile, HugeInputsAreOneLineErrors) {
  auto expect_error = [&](const RunResult& r, const std::string& mention) {
    EXPECT_NE(r.exit_code, 0);
    const auto err = lines_of(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_NE(err[0].find(mention), std::string::npos) << "expected '" << mention << "' in: " << err[0];
    EXPECT_EQ(r.err.find("loaded"), std::string::npos) << "weights were loaded before the error: " << r.err;
  };
  const fs::path input = scratch_ / "huge.jsonl", output = scratch_ / "huge_out.jsonl";
  deepinfer::testing_util::write_sparse_file(input, "{\"prompt\": \"");
  expect_error(run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string()}),
               "huge.jsonl: line 1 is longer than the 256 MB limit for one line");
  EXPECT_FALSE(fs::exists(output));

  const fs::path model = scratch_ / "model";
  fs::create_directories(model);
  for (const auto& entry : fs::directory_iterator(kKjv)) {
    if (entry.path().filename() != "generation_config.json") {
      fs::create_symlink(fs::absolute(entry.path()), model / entry.path().filename());
    }
  }
  deepinfer::testing_util::write_sparse_file(model / "generation_config.json", "{\"temperature\": \"");
  expect_error(run({"generate", "--model", model.string(), "--prompt", "In the beginning", "--max-tokens", "2"}),
               "generation_config.json (generation config) is 2.0 GB, over the 16 MB limit");
}

TEST_F(GenerateFile, FlagErrorsAndHelp) {
  const fs::path input = write("in.jsonl", {R"({"prompt": "a"})"});
  auto r = run({"generate", "--model", kKjv.string(), "--input", input.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--output"), std::string::npos) << r.err;
  r = run({"generate", "--model", kKjv.string(), "--prompt", "a", "--output", (scratch_ / "o").string()});
  EXPECT_NE(r.exit_code, 0);
  r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--prompt", "a"});
  EXPECT_NE(r.exit_code, 0);
  r = run({"generate", "--model", kKjv.string(), "--input", (scratch_ / "missing.jsonl").string(), "--output", "-"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing.jsonl"), std::string::npos) << r.err;
  r = run({"generate", "--model", kKjv.string(), "--input", write("empty.jsonl", {"", " "}).string(), "--output", "-"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no requests"), std::string::npos) << r.err;
  r = run({"generate", "--model", kKjv.string(), "--prompt", "a", "--kv-memory", "lots"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'lots'"), std::string::npos) << r.err;
  r = run({"generate", "--model", kKjv.string(), "--prompt", "a", "--kv-memory", "1K"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("budget"), std::string::npos) << r.err;
  EXPECT_EQ(lines_of(r.err).back().rfind("deepinfer: error: ", 0), 0u) << r.err;

  r = run({"generate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--input", "--output", "--kv-memory", "--max-num-seqs", "--max-num-batched-tokens",
                           "prompt_token_ids", "finish_reason", "line number", "fraction of RAM"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
}

// --data-parallel-size: the requests spread over ranks (threads, experts shared out) give the
// results one engine gives, line for line (batch-invariant numerics: a rank's batch differs from
// one engine's), with EPLB re-planning every few steps too.
TEST_F(GenerateFile, DataParallelRanksGiveOneEnginesResults) {
  std::vector<std::string> lines;
  for (int i = 0; i < 9; ++i) {
    json line{{"prompt", i % 2 ? "And God said" : "The LORD is my shepherd;"}, {"max_tokens", 4 + 3 * i},
              {"ignore_eos", true}};
    if (i % 3 == 0) line["temperature"] = 0;
    else line["seed"] = i;  // sampled lines carry seeds: unseeded ones draw per-rank streams
    lines.push_back(line.dump());
  }
  const fs::path input = write("in.jsonl", lines);
  setenv("DEEPINFER_BATCH_INVARIANT", "1", 1);
  std::vector<std::string> outputs;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--data-parallel-size", "2"},
        {"--data-parallel-size", "3", "--enable-eplb", "--eplb-step-interval", "4", "--num-redundant-experts", "3"}}) {
    const fs::path out = scratch_ / ("out" + std::to_string(outputs.size()) + ".jsonl");
    std::vector<std::string> args = {"generate", "--model", kKjv.string(), "--input", input.string(),
                                     "--output", out.string(), "--max-num-seqs", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("9/9 requests done"), std::string::npos) << r.err;
    outputs.push_back(read_file(out));
  }
  unsetenv("DEEPINFER_BATCH_INVARIANT");
  ASSERT_EQ(results(scratch_ / "out0.jsonl").size(), 9u);
  EXPECT_EQ(outputs[1], outputs[0]);
  EXPECT_EQ(outputs[2], outputs[0]);

  auto r = run({"generate", "--model", kKjv.string(), "--prompt", "a", "--enable-eplb"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--data-parallel-size N"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("loaded"), std::string::npos) << "refused before the weights load: " << r.err;
  r = run({"generate", "--model", kKjv.string(), "--prompt", "a", "--data-parallel-size", "0"});
  EXPECT_NE(r.exit_code, 0);
  r = run({"generate", "--model", (kFixtures / "v41_tiny_fp8").string(), "--prompt-ids", "0 17 5",
           "--data-parallel-size", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("DeepSeek-V4 (model_type deepseek_v4) so far"), std::string::npos) << r.err;
  r = run({"serve", "--help"});
  for (const char* flag : {"--data-parallel-size", "--enable-eplb", "--eplb-window-size", "--eplb-step-interval",
                           "--num-redundant-experts"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST_F(GenerateFile, SmallKvMemoryStillCompletesEveryRequest) {
  std::vector<std::string> lines;
  for (int i = 0; i < 12; ++i)
    lines.push_back(json{{"prompt", "In the beginning God created the heaven and the earth. And the earth was "
                                    "without form, and void; and darkness was upon the face of the deep."},
                         {"max_tokens", 80},
                         {"temperature", 0},
                         {"ignore_eos", true}}
                        .dump());
  const fs::path input = write("in.jsonl", lines);
  const fs::path small = scratch_ / "small.jsonl", big = scratch_ / "big.jsonl";
  // 8 slots and 11 blocks (and the pool's scratch slot and block): each request (~110 positions,
  // 2 blocks) fits alone, not all.
  auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", small.string(),
                "--max-num-seqs", "8", "--kv-memory", "1340K"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find(" 0 preemptions"), std::string::npos) << r.err;
  r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", big.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(small), read_file(big));
}

TEST_F(GenerateFile, PrefixCacheHitsAreReportedAsCachedTokens) {
  // Two requests with the same 200-token prompt, one at a time: the second is served 192 tokens
  // (3 full blocks of 64; the last token is always computed) from the first one's blocks.
  json ids = json::array();
  for (int i = 0; i < 200; ++i) ids.push_back(i == 0 ? 0 : 3 + (i * 37) % 4000);
  const std::string line = json{{"prompt_token_ids", ids}, {"max_tokens", 4}, {"temperature", 0}}.dump();
  const fs::path input = write("in.jsonl", {line, line});
  for (const std::string keep : {"140", "0"}) {
    const fs::path output = scratch_ / ("cached_" + keep + ".jsonl");
    const auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string(),
                        "--max-num-seqs", "1", "--swa-replay-keep", keep});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = results(output);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0]["cached_tokens"], 0);
    EXPECT_EQ(got[1]["cached_tokens"], 192) << "--swa-replay-keep " << keep;
    EXPECT_NE(r.err.find("192 of 400 prompt tokens cached"), std::string::npos) << r.err;
    if (keep == "0") EXPECT_EQ(got[1]["token_ids"], got[0]["token_ids"]) << "exact mode changes nothing";
  }
  const fs::path output = scratch_ / "uncached.jsonl";
  auto r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string(),
                "--max-num-seqs", "1", "--no-prefix-caching"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(results(output)[1]["cached_tokens"], 0);
  r = run({"generate", "--model", kKjv.string(), "--input", input.string(), "--output", output.string(),
           "--swa-replay-keep", "10"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("swa_replay_keep must be 0 (exact) or >= the model's sliding window (64)"), std::string::npos)
      << r.err;
}

}  // namespace
