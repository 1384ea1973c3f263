// End-to-end checks of the `deepinfer` binary: golden greedy ids, seeded sampling, inspect output,
// and that every failure is one line on stderr with a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace deepinfer::cli_test;

const fs::path kModels = DEEPINFER_MODELS_DIR;
const fs::path kFixtures = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";
const fs::path kKjv = kModels / "kjv-tiny-v4";

std::string join_ids(const std::vector<int64_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? " " : "") + std::to_string(ids[i]);
  return text;
}

std::vector<int64_t> golden_ids(const fs::path& file, const std::string& name) {
  const auto checkpoint = deepinfer::io::Checkpoint::open_file(file);
  return deepinfer::io::to_int64(checkpoint.get(name));
}

// Each test gets its own scratch folder (removed afterwards) for outputs and fixture copies.
class Cli : public CliHarness {
 protected:
  Cli() : CliHarness("deepinfer_cli_test_") {}

  fs::path copy_fixture(const std::string& name) const {
    const fs::path target = scratch_ / name;
    fs::copy(kFixtures / name, target, fs::copy_options::recursive);
    return target;
  }

  // A failure must be exactly one "deepinfer: error: ..." line and a non-zero exit.
  void expect_one_line_error(const RunResult& r, const std::string& must_mention = "") const {
    EXPECT_NE(r.exit_code, 0);
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << "stderr was:\n" << r.err;
    EXPECT_EQ(lines[0].rfind("deepinfer: error: ", 0), 0u) << lines[0];
    if (!must_mention.empty()) {
      EXPECT_NE(lines[0].find(must_mention), std::string::npos) << lines[0];
    }
  }
};

TEST_F(Cli, GreedyKjvMatchesGoldenIds) {
  const auto expected = golden_ids(kKjv / "golden.safetensors", "prompt1.greedy_ids");
  ASSERT_EQ(expected.size(), 48u);
  const auto r = run({"generate", "--model", kKjv.string(), "--prompt", "Psalms 23:1 The LORD is my shepherd; I",
                      "--max-tokens", "48", "--temperature", "0", "--print-ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = r.out_lines();
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines.back(), join_ids(expected));
  // The streamed text is the continuation the model's README quotes.
  EXPECT_EQ(r.out.rfind(" will not forget thy law: neither will I abhor them any more for ever.\nPsalms 23:2", 0), 0u)
      << r.out;
  EXPECT_NE(r.err.find("prompt tokens: 13"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST_F(Cli, PromptIdsOnKjvMatchGoldenToo) {
  const fs::path golden = kKjv / "golden.safetensors";
  const auto r = run({"generate", "--model", kKjv.string(), "--prompt-ids",
                      join_ids(golden_ids(golden, "prompt0.input_ids")), "--max-tokens", "48", "--temperature", "0",
                      "--print-ids", "--threads", "2", "--prefill-chunk", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out_lines().empty());
  EXPECT_EQ(r.out_lines().back(), join_ids(golden_ids(golden, "prompt0.greedy_ids")));
}

TEST_F(Cli, GreedyFixturesMatchGoldenIds) {
  for (const std::string fixture : {"v4_tiny_a", "v4_tiny_b"}) {
    const fs::path dir = copy_fixture(fixture);
    for (const std::string prompt : {"p0", "p1"}) {
      const auto input = golden_ids(dir / "golden.safetensors", prompt + ".input_ids");
      const auto expected = golden_ids(dir / "golden.safetensors", prompt + ".generated_ids");
      ASSERT_EQ(expected.size(), 13u);
      const auto r = run({"generate", "--model", dir.string(), "--prompt-ids", join_ids(input), "--max-tokens", "13",
                          "--temperature", "0", "--print-ids"});
      ASSERT_EQ(r.exit_code, 0) << fixture << " " << prompt << ": " << r.err;
      // No tokenizer: the ids stream as the only stdout line, --print-ids does not repeat them.
      ASSERT_EQ(r.out_lines().size(), 1u) << r.out;
      EXPECT_EQ(r.out_lines().back(), join_ids(expected)) << fixture << " " << prompt;
      EXPECT_NE(r.err.find("generated: 13 (length)"), std::string::npos) << r.err;
    }
  }
}

TEST_F(Cli, GenerationConfigDoSampleFalseMeansGreedy) {
  const fs::path dir = copy_fixture("v4_tiny_b");
  std::ofstream(dir / "generation_config.json") << R"({"do_sample": false, "temperature": 0.7, "eos_token_id": 1})";
  const auto input = golden_ids(dir / "golden.safetensors", "p0.input_ids");
  const auto r = run({"generate", "--model", dir.string(), "--prompt-ids", join_ids(input), "--max-tokens", "13"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out_lines().size(), 1u) << r.out;
  EXPECT_EQ(r.out_lines()[0], join_ids(golden_ids(dir / "golden.safetensors", "p0.generated_ids")));
  EXPECT_NE(r.err.find("greedy"), std::string::npos) << r.err;
}

TEST_F(Cli, SeededSamplingIsReproducible) {
  auto sample = [&](const std::string& seed) {
    const auto r = run({"generate", "--model", kKjv.string(), "--prompt", "Genesis 1:1 In the beginning",
                        "--max-tokens", "32", "--temperature", "1.0", "--top-p", "0.95", "--top-k", "50", "--seed",
                        seed, "--print-ids", "--ignore-eos"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out_lines().empty());
    return r.out_lines().empty() ? std::string() : r.out_lines().back();
  };
  const std::string first = sample("11");
  EXPECT_EQ(lines_of(first).size(), 1u);
  EXPECT_EQ(sample("11"), first);
  EXPECT_NE(sample("12"), first);
}

TEST_F(Cli, InspectPrintsParameterTotals) {
  int64_t total = 0;
  size_t bytes = 0;
  const auto checkpoint = deepinfer::io::Checkpoint::open(kKjv);
  for (const auto& [name, tensor] : checkpoint.tensors()) total += tensor.numel(), bytes += tensor.nbytes;
  auto with_commas = [](uint64_t value) {
    std::string digits = std::to_string(value);
    for (int pos = static_cast<int>(digits.size()) - 3; pos > 0; pos -= 3) digits.insert(size_t(pos), ",");
    return digits;
  };

  const auto r = run({"inspect", "--model", kKjv.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("total parameters: " + with_commas(uint64_t(total))), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(with_commas(bytes) + " bytes"), std::string::npos) << "byte total " << bytes << "\n" << r.out;
  for (const char* expected : {"deepseek_v4", "6 (2 sliding, 2 CSA, 2 HCA)", "HCA (heavily compressed)", "1/16",
                               "routed experts", "per token", "128K tokens", "vocabulary"})
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
}

TEST_F(Cli, HelpWorksForGenerateAndInspect) {
  auto r = run({"generate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model", "--prompt", "--prompt-ids", "--max-tokens", "--temperature", "--top-p", "--top-k",
                           "--seed", "--print-ids", "--threads"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  r = run({"inspect", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
}

TEST_F(Cli, MissingModelFolderIsOneLineError) {
  expect_one_line_error(run({"generate", "--model", (scratch_ / "nope").string(), "--prompt-ids", "0 5"}), "nope");
  expect_one_line_error(run({"inspect", "--model", (scratch_ / "nope").string()}), "nope");
}

TEST_F(Cli, BadFlagIsOneLineError) {
  const auto r = run({"generate", "--model", kKjv.string(), "--prompt", "x", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r, "--no-such-flag");
  expect_one_line_error(run({"generate", "--model", kKjv.string(), "--prompt", "x", "--max-tokens", "many"}));
}

TEST_F(Cli, CorruptWeightsAreOneLineError) {
  const fs::path dir = copy_fixture("v4_tiny_a");
  const fs::path weights = dir / "model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  expect_one_line_error(run({"generate", "--model", dir.string(), "--prompt-ids", "0 5 9", "--temperature", "0"}));
  expect_one_line_error(run({"inspect", "--model", dir.string()}));
}

TEST_F(Cli, WrongLayerCountIsOneLineError) {
  const fs::path dir = copy_fixture("v4_tiny_a");
  const std::string config = read_file(dir / "config.json");
  const std::string field = "\"num_hidden_layers\": 5";
  ASSERT_NE(config.find(field), std::string::npos);
  auto write_config = [&](const std::string& text) { std::ofstream(dir / "config.json", std::ios::binary) << text; };

  // num_hidden_layers disagrees with layer_types.
  std::string mismatched = config;
  mismatched.replace(mismatched.find(field), field.size(), "\"num_hidden_layers\": 4");
  write_config(mismatched);
  expect_one_line_error(run({"generate", "--model", dir.string(), "--prompt-ids", "0 5 9"}), "num_hidden_layers");

  // A consistent config that asks for a sixth layer the weights do not have.
  std::string six = config;
  six.replace(six.find(field), field.size(), "\"num_hidden_layers\": 6");
  for (const std::string list : {"\"layer_types\": [", "\"mlp_layer_types\": ["}) {
    const size_t at = six.find(list);
    ASSERT_NE(at, std::string::npos);
    six.insert(at + list.size(), list == "\"layer_types\": [" ? "\"sliding_attention\", " : "\"moe\", ");
  }
  write_config(six);
  expect_one_line_error(run({"generate", "--model", dir.string(), "--prompt-ids", "0 5 9", "--temperature", "0"}));
  expect_one_line_error(run({"inspect", "--model", dir.string()}));
}

TEST_F(Cli, PromptArgumentErrors) {
  const std::string kjv = kKjv.string();
  expect_one_line_error(run({"generate", "--model", kjv}), "--prompt");                                  // neither
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt", "a", "--prompt-ids", "0 5"}));       // both
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt-ids", "0 five 9"}), "five");          // not a number
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt-ids", "0 4096"}), "4096");            // past vocab
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt-ids", "0 -3"}));                      // negative
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt-ids", " "}));                         // empty
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt", "a", "--temperature", "-1"}), "temperature");
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt", "a", "--top-p", "1.5"}), "top_p");
  expect_one_line_error(run({"generate", "--model", kjv, "--prompt", "a", "--top-k", "-2"}), "top_k");
  const fs::path fixture = copy_fixture("v4_tiny_b");
  expect_one_line_error(run({"generate", "--model", fixture.string(), "--prompt", "hello"}), "--prompt-ids");
}

}  // namespace
