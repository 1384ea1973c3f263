#include "cli/engine_flags.h"

#include "core/error.h"
#include "engine/memory_budget.h"

namespace deepinfer::cli {

void add_engine_flags(CLI::App& sub, EngineFlags& flags) {
  sub.add_option("--threads", flags.threads, "CPU threads (default: all cores, or DEEPINFER_THREADS)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--device", flags.device,
                 "Backend to run on: cpu or cuda (cuda needs a build with -DDEEPINFER_CUDA=ON and a GPU). "
                 "Default: DEEPINFER_DEVICE, else cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub.add_option("--prefill-chunk", flags.prefill_chunk, "Most prompt tokens of one sequence per step")
      ->default_val(512)
      ->check(CLI::PositiveNumber);
  sub.add_option("--kv-memory", flags.kv_memory,
                 "Memory for the model state of running sequences: bytes with an optional K/M/G/T suffix (2G, "
                 "512M) or a fraction of RAM (0.3 or 30%). Default: 25% of RAM, never more than --max-num-seqs "
                 "sequences at full context need. Reserved, not touched until used");
  sub.add_option("--max-num-seqs", flags.max_num_seqs,
                 "Most sequences running at once (each holds one state slot); more requests wait their turn")
      ->default_val(64)
      ->check(CLI::PositiveNumber);
  sub.add_option("--max-num-batched-tokens", flags.max_num_batched_tokens,
                 "Tokens per engine step: the decodes of running sequences first, then chunks of waiting prompts")
      ->default_val(2048)
      ->check(CLI::PositiveNumber);
  sub.add_flag("--no-prefix-caching", flags.no_prefix_caching,
               "Turn off automatic prefix caching (on by default: requests that start with the tokens of an "
               "earlier one reuse its state, in blocks of 64 positions on kjv, 128 on V4-Flash, reported as "
               "\"cached_tokens\")");
  sub.add_option("--swa-replay-keep", flags.swa_replay_keep,
                 "Sliding-window state after a prefix-cache hit: recompute this many tokens before the hit with "
                 "the window clamped there (bounded replay; must be >= the model's sliding window), or 0 for "
                 "exact: window-state snapshots are cached too and outputs equal uncached ones. On DeepSeek-V4.1 it also "
                 "bounds prefill: the decoder layers run over only the last N prompt tokens (0: over all of them)")
      ->default_val(140)
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--data-parallel-size", flags.data_parallel_size,
                 "Attention data parallelism with expert parallelism: this many ranks, each with its own model "
                 "instance, scheduler, state pool (--kv-memory and --max-num-seqs are per rank) and prefix cache, "
                 "stepping together; the routed experts are shared out over the ranks and tokens travel to them. "
                 "Ranks are threads (DeepSeek-V4): on the CPU they share the cores, with --device cuda rank r runs on "
                 "GPU r and rows travel over NCCL. With DEEPINFER_BATCH_INVARIANT=1 outputs equal "
                 "one engine's bit for bit")
      ->default_val(1)
      ->check(CLI::Range(1, 64));
  sub.add_flag("--enable-eplb", flags.enable_eplb,
               "Expert load balancing across the data-parallel ranks: re-plan expert placement every "
               "--eplb-step-interval steps from the routed-token counts of the last --eplb-window-size steps");
  sub.add_option("--eplb-window-size", flags.eplb_window_size, "Steps of expert load EPLB plans from")
      ->default_val(1000)
      ->check(CLI::PositiveNumber);
  sub.add_option("--eplb-step-interval", flags.eplb_step_interval, "Steps between EPLB re-plans")
      ->default_val(3000)
      ->check(CLI::PositiveNumber);
  sub.add_option("--num-redundant-experts", flags.num_redundant_experts,
                 "Extra replicas of hot experts per layer when EPLB re-plans (with --enable-eplb)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--enforce-eager", flags.enforce_eager,
               "Never record CUDA graphs: every decode step launches its kernels one by one (--device cuda)");
  sub.add_option("--cuda-graph-sizes", flags.cuda_graph_sizes,
                 "Decode batch sizes recorded as CUDA graphs and replayed (--device cuda): one value N = 1, 2, 4 "
                 "and every multiple of 8 up to N (default 512); several values = exactly those. A batch between "
                 "two sizes runs padded up to the next one; past the largest, kernel by kernel")
      ->check(CLI::PositiveNumber)
      ->expected(1, 1024);
}

void check_engine_flags(const EngineFlags& flags) {
  if (flags.kv_memory) engine::parse_memory_size(*flags.kv_memory);
  DEEPINFER_CHECK(!flags.enable_eplb || flags.data_parallel_size > 1,
                  "--enable-eplb balances experts across data-parallel ranks: give --data-parallel-size N (N > 1)");
  DEEPINFER_CHECK(flags.num_redundant_experts == 0 || flags.enable_eplb,
                  "--num-redundant-experts places replicas when EPLB re-plans: give --enable-eplb too");
}

EngineConfig engine_config(const EngineFlags& flags, std::optional<uint64_t> seed,
                           std::function<void(size_t, size_t)> progress) {
  EngineConfig config;
  config.kv_memory_bytes = flags.kv_memory ? engine::parse_memory_size(*flags.kv_memory) : 0;
  config.max_num_seqs = flags.max_num_seqs;
  config.enable_prefix_caching = !flags.no_prefix_caching;
  config.swa_replay_keep = flags.swa_replay_keep;
  config.max_num_batched_tokens = flags.max_num_batched_tokens;
  config.max_prefill_chunk = flags.prefill_chunk;
  config.threads = flags.threads;
  config.device = flags.device;
  config.seed = seed;
  config.data_parallel_size = flags.data_parallel_size;
  config.enable_eplb = flags.enable_eplb;
  config.eplb_window_size = flags.eplb_window_size;
  config.eplb_step_interval = flags.eplb_step_interval;
  config.num_redundant_experts = flags.num_redundant_experts;
  config.enforce_eager = flags.enforce_eager;
  config.cuda_graph_sizes = flags.cuda_graph_sizes;
  config.load_progress = std::move(progress);
  return config;
}

}  // namespace deepinfer::cli
