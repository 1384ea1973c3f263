#pragma once
// The engine flags `generate` and `serve` share (vLLM's names where vLLM has them): memory,
// batching, prefix caching, device, threads, data parallelism and EPLB.
#include <CLI/CLI.hpp>
#include <deepinfer/llm.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct EngineFlags {
  int64_t threads = 0;
  std::string device;
  int64_t prefill_chunk = 512;
  std::optional<std::string> kv_memory;
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 2048;
  bool no_prefix_caching = false;
  int64_t swa_replay_keep = 140;
  int64_t data_parallel_size = 1;
  bool enable_eplb = false;
  int64_t eplb_window_size = 1000;
  int64_t eplb_step_interval = 3000;
  int64_t num_redundant_experts = 0;
  bool enforce_eager = false;
  std::vector<int64_t> cuda_graph_sizes;
};

void add_engine_flags(CLI::App& sub, EngineFlags& flags);
// Checks what can be checked before the weights load (the --kv-memory spelling).
void check_engine_flags(const EngineFlags& flags);
EngineConfig engine_config(const EngineFlags& flags, std::optional<uint64_t> seed,
                           std::function<void(size_t, size_t)> progress);

}  // namespace deepinfer::cli
