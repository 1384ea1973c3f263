// Encode throughput (MB/s) of deepinfer::Tokenizer on a realistic text mix, next to the
// Hugging Face `tokenizers` npm package measured in the same run on the same documents.
// Text mix: the parity corpus (prose, code, CJK, other scripts, emoji, numbers, whitespace,
// special tokens; lines over 1 KiB, the artificial long runs, left out) joined with newlines into
// documents of >= 4 KiB, one encode() per document.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

const std::filesystem::path kDataDir = DEEPINFER_TEST_DATA_DIR;
const std::filesystem::path kModelsDir = DEEPINFER_MODELS_DIR;
const std::filesystem::path kRepoRoot = kDataDir.parent_path().parent_path();

constexpr size_t kMaxLineBytes = 1024;

std::vector<std::string> bench_documents() {
  std::ifstream file(kDataDir / "tokenizer" / "corpus.jsonl");
  std::vector<std::string> documents;
  std::string line, current;
  while (std::getline(file, line)) {
    if (line.empty()) continue;
    const std::string text = nlohmann::json::parse(line).get<std::string>();
    if (text.size() > kMaxLineBytes) continue;  // the corpus's artificial long runs are not typical text
    current += text;
    current += '\n';
    if (current.size() >= 4096) documents.push_back(std::move(current)), current.clear();
  }
  if (!current.empty()) documents.push_back(std::move(current));
  return documents;
}

const std::vector<std::string>& documents() {
  static const std::vector<std::string> docs = bench_documents();
  return docs;
}

// Runs tools/tokenizer_oracle/bench.js on the same documents; nullopt (with a message) when
// node or the npm package is missing.
std::optional<double> oracle_mb_per_s(const std::filesystem::path& tokenizer_json) {
  static std::map<std::string, std::optional<double>> cache;
  if (const auto it = cache.find(tokenizer_json.string()); it != cache.end()) return it->second;
  std::optional<double> result;
  const auto script = kRepoRoot / "tools" / "tokenizer_oracle" / "bench.js";
  const auto package = kRepoRoot / "tools" / "tokenizer_oracle" / "node_modules" / "tokenizers";
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    std::cerr << "HF oracle skipped: `node` is not on PATH\n";
  } else if (!std::filesystem::exists(package)) {
    std::cerr << "HF oracle skipped: run `npm install` in tools/tokenizer_oracle first\n";
  } else {
    const std::string command = "node '" + script.string() + "' '" + tokenizer_json.string() + "' 3";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      std::string output;
      char buffer[4096];
      while (fgets(buffer, sizeof(buffer), pipe)) output += buffer;
      if (pclose(pipe) == 0) {
        const auto report = nlohmann::json::parse(output);
        result = report.at("mb_per_s").get<double>();
        std::cerr << "HF tokenizers (npm) " << tokenizer_json.filename().string() << ": " << *result
                  << " MB/s on " << report.at("bytes") << " bytes in " << report.at("documents") << " documents\n";
      } else {
        std::cerr << "HF oracle skipped: `" << command << "` failed\n";
      }
    }
  }
  cache[tokenizer_json.string()] = result;
  return result;
}

void encode_benchmark(benchmark::State& state, const std::filesystem::path& model_dir) {
  const deepinfer::Tokenizer tokenizer = deepinfer::Tokenizer::from_model_dir(model_dir);
  const auto& docs = documents();
  size_t bytes = 0, tokens = 0;
  for (const auto& doc : docs) bytes += doc.size(), tokens += tokenizer.encode(doc).size();  // warm-up
  for (auto _ : state) {
    for (const auto& doc : docs) benchmark::DoNotOptimize(tokenizer.encode(doc));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["tokens_per_doc_pass"] = static_cast<double>(tokens);
  if (const auto hf = oracle_mb_per_s(model_dir / "tokenizer.json")) state.counters["hf_MB_per_s"] = *hf;
}

void BM_EncodeDeepSeekV3(benchmark::State& state) { encode_benchmark(state, kDataDir / "tokenizers" / "deepseek-v3"); }
void BM_EncodeKjvTinyV4(benchmark::State& state) { encode_benchmark(state, kModelsDir / "kjv-tiny-v4"); }

// Cold path: a fresh tokenizer per iteration would measure loading; instead measure encode of
// text never seen before (word cache misses) by appending a running counter to each document.
void BM_EncodeDeepSeekV3Uncached(benchmark::State& state) {
  const deepinfer::Tokenizer tokenizer = deepinfer::Tokenizer::from_model_dir(kDataDir / "tokenizers" / "deepseek-v3");
  const auto& docs = documents();
  size_t bytes = 0;
  uint64_t counter = 0;
  for (auto _ : state) {
    for (const auto& doc : docs) {
      std::string text = doc;
      // Make every word unique so the BPE cache never hits.
      for (char& c : text)
        if (c == ' ') c = static_cast<char>('a' + (counter++ % 26));
      bytes += text.size();
      benchmark::DoNotOptimize(tokenizer.encode(text));
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_LoadDeepSeekV3(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(deepinfer::Tokenizer::from_model_dir(kDataDir / "tokenizers" / "deepseek-v3"));
  }
}

}  // namespace

// Wall-clock rates, like the oracle's, so the two MB/s figures compare like with like.
BENCHMARK(BM_EncodeDeepSeekV3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EncodeKjvTinyV4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EncodeDeepSeekV3Uncached)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoadDeepSeekV3)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_MAIN();
