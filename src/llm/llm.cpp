// The public LLM (include/deepinfer/llm.h) over the internal engine.
#include "deepinfer/llm.h"

#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "backend/backend.h"
#include "dp/data_parallel_engine.h"
#ifdef DEEPINFER_HAVE_NCCL
#include "dist/nccl/nccl_transport.h"
#endif
#include "engine/llm_engine.h"
#include "engine/public_params.h"
#include "llm/generation_run.h"
#include "llm/llm_impl.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

namespace {

bool env_batch_invariant() {
  const char* v = std::getenv("DEEPINFER_BATCH_INVARIANT");
  return v && std::string_view(v) == "1";
}

// Queues every prompt (each checked before the first step runs; a bad one names its index).
void add_prompts(const Tokenizer* tokenizer, GenerationRun& run, const std::vector<Prompt>& prompts,
                 const std::vector<SamplingParams>& params) {
  DEEPINFER_CHECK(params.size() == 1 || params.size() == prompts.size(),
                  "give one SamplingParams for all prompts or one per prompt: {} prompts, {} SamplingParams",
                  prompts.size(), params.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      const Prompt& prompt = prompts[i];
      std::vector<int32_t> ids = prompt.token_ids;
      if (prompt.text) {
        DEEPINFER_CHECK(!prompt.text->empty(), "the prompt text is empty");
        DEEPINFER_CHECK(tokenizer != nullptr, "the model folder has no tokenizer.json: give prompts as token ids");
        ids = tokenizer->encode_with_bos(*prompt.text);
      }
      run.add(std::move(ids), prompt.text, params.size() == 1 ? params[0] : params[i]);
    } catch (const std::exception& e) {
      fail("prompt {}: {}", i, e.what());
    }
  }
}

// data_parallel_size ranks as threads (dp::DataParallelEngine): a model per rank, experts shared out.
std::unique_ptr<engine::RequestEngine> data_parallel_engine(const std::filesystem::path& model_dir,
                                                            model::LoadOptions load, const Tokenizer* tokenizer,
                                                            engine::EngineOptions options, const EngineConfig& config,
                                                            int64_t& vocab_size) {
  const int64_t ranks = config.data_parallel_size;
  DEEPINFER_CHECK(ranks >= 1 && ranks <= 64, "data_parallel_size must be in [1, 64], got {}", ranks);
  // On GPUs: rank r on GPU r (a thread each), exchanging rows over NCCL. On the CPU: ranks share
  // the cores and exchange rows through host memory.
  const bool gpus = load.device != "cpu";
  dp::TransportFactory transport;
  if (gpus) {
    const int visible = backend::device_count(load.device);
    DEEPINFER_CHECK(ranks <= visible, "data_parallel_size {} puts one rank on each GPU, but {} {} device(s) are "
                    "visible (CUDA_VISIBLE_DEVICES chooses them)", ranks, visible, load.device);
#ifdef DEEPINFER_HAVE_NCCL
    transport = [id = dist::nccl_unique_id()](int rank, int world) { return dist::make_nccl_transport(rank, world, id); };
#else
    fail("data_parallel_size > 1 on {} needs NCCL, which this build has not (configure with -DDEEPINFER_CUDA=ON)",
         load.device);
#endif
  }
  DEEPINFER_CHECK(config.eplb_window_size >= 1 && config.eplb_step_interval >= 1 && config.num_redundant_experts >= 0,
                  "eplb_window_size and eplb_step_interval must be >= 1 and num_redundant_experts >= 0, got {}, {}, {}",
                  config.eplb_window_size, config.eplb_step_interval, config.num_redundant_experts);
  DEEPINFER_CHECK(config.enable_eplb || config.num_redundant_experts == 0,
                  "num_redundant_experts places extra expert replicas when EPLB re-plans: set enable_eplb too");
  std::vector<std::unique_ptr<model::CausalLM>> models;
  const auto progress = load.progress;
  for (int64_t r = 0; r < ranks; ++r) {
    // One bar over every rank's load.
    if (progress)
      load.progress = [&progress, r, ranks](size_t done, size_t total) {
        progress(static_cast<size_t>(r) * total + done, static_cast<size_t>(ranks) * total);
      };
    load.device_index = gpus ? static_cast<int>(r) : 0;
    models.push_back(model::load_model(model_dir, load));
    const io::ModelConfig& cfg = models.back()->config();
    DEEPINFER_CHECK(cfg.model_type == "deepseek_v4",
                    "data_parallel_size > 1 shares the routed experts out over the ranks, which runs DeepSeek-V4 "
                    "(model_type deepseek_v4) so far, not {}", cfg.model_type);
  }
  const io::ModelConfig& cfg = models[0]->config();
  vocab_size = models[0]->vocab_size();
  dp::DataParallelOptions dp;
  dp.engine = std::move(options);
  dp.load_window_steps = config.eplb_window_size;
  dp.rebalance_every = config.enable_eplb ? config.eplb_step_interval : 0;
  // Physical expert slots per layer: the experts plus the redundant replicas, rounded up to a
  // whole number per rank (as the starting placement is).
  dp.rebalance_slots = (cfg.n_routed_experts + config.num_redundant_experts + ranks - 1) / ranks * ranks;
  return std::make_unique<dp::DataParallelEngine>(std::move(models), tokenizer, std::move(dp), std::move(transport));
}

}  // namespace


LLM::LLM(const std::filesystem::path& model_dir, EngineConfig config) : impl_(std::make_unique<Impl>()) {
  DEEPINFER_CHECK(config.threads >= 0, "threads must be >= 0 (0 = all cores), got {}", config.threads);
  // Read when the CPU thread pool starts, i.e. by the first model loaded in the process.
  if (config.threads > 0) setenv("DEEPINFER_THREADS", std::to_string(config.threads).c_str(), 1);
  DEEPINFER_CHECK(std::filesystem::is_directory(model_dir), "model folder '{}' does not exist or is not a directory",
                  model_dir.string());
  impl_->model_dir = model_dir;
  impl_->batch_invariant = config.batch_invariant.value_or(env_batch_invariant());
  model::LoadOptions load = model::load_options_from_env();
  load.batch_invariant = impl_->batch_invariant;
  load.top_k_ties = impl_->batch_invariant ? model::TopKTies::LowerIndex : model::TopKTies::Reference;
  load.progress = config.load_progress;
  load.decoder_replay_keep = config.swa_replay_keep;  // V4.1: the decoder's share of prefill (0 = exact)
  if (!config.device.empty()) load.device = config.device;
  load.enforce_eager = config.enforce_eager;
  for (int64_t size : config.cuda_graph_sizes)
    DEEPINFER_CHECK(size >= 1, "cuda_graph_sizes: batch sizes must be >= 1, got {}", size);
  if (config.cuda_graph_sizes.size() == 1)
    load.cuda_graph_sizes = backend::BackendOptions::default_cuda_graph_sizes(config.cuda_graph_sizes[0]);
  else if (!config.cuda_graph_sizes.empty())
    load.cuda_graph_sizes = config.cuda_graph_sizes;
  if (std::filesystem::exists(model_dir / "tokenizer.json")) impl_->tokenizer.emplace(Tokenizer::from_model_dir(model_dir));
  const Tokenizer* tokenizer = impl_->tokenizer ? &*impl_->tokenizer : nullptr;

  engine::EngineOptions options;
  options.limits.max_num_seqs = config.max_num_seqs;
  options.limits.max_num_batched_tokens = config.max_num_batched_tokens;
  options.limits.max_prefill_chunk = config.max_prefill_chunk;
  options.kv_memory_bytes = config.kv_memory_bytes;
  options.seed = config.seed;
  options.enable_prefix_caching = config.enable_prefix_caching;
  options.swa_replay_keep = config.swa_replay_keep;
  if (config.data_parallel_size == 1) {
    DEEPINFER_CHECK(!config.enable_eplb, "enable_eplb balances experts across data-parallel ranks: it needs "
                                         "data_parallel_size > 1");
    impl_->model = model::load_model(model_dir, load);
    impl_->vocab_size = impl_->model->vocab_size();
    impl_->engine = std::make_unique<engine::LLMEngine>(*impl_->model, tokenizer, std::move(options));
    return;
  }
  impl_->engine = data_parallel_engine(model_dir, load, tokenizer, std::move(options), config, impl_->vocab_size);
}

LLM::~LLM() = default;
LLM::LLM(LLM&&) noexcept = default;
LLM& LLM::operator=(LLM&&) noexcept = default;

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts, const SamplingParams& params,
                                         const StreamCallback& on_event) {
  return generate(prompts, std::vector<SamplingParams>{params}, on_event);
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                         const StreamCallback& on_event) {
  const Tokenizer* tokenizer = impl_->tokenizer ? &*impl_->tokenizer : nullptr;
  GenerationRun run(*impl_->engine, tokenizer, impl_->busy);
  add_prompts(tokenizer, run, prompts, params);
  return run.run(on_event);
}

GenerationStream LLM::generate_stream(const std::vector<Prompt>& prompts, const SamplingParams& params) {
  return generate_stream(prompts, std::vector<SamplingParams>{params});
}

GenerationStream LLM::generate_stream(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params) {
  const Tokenizer* tokenizer = impl_->tokenizer ? &*impl_->tokenizer : nullptr;
  auto run = std::make_unique<GenerationRun>(*impl_->engine, tokenizer, impl_->busy);
  add_prompts(tokenizer, *run, prompts, params);
  return GenerationStream(std::move(run));
}

bool LLM::has_tokenizer() const { return impl_->tokenizer.has_value(); }
std::vector<int32_t> LLM::encode(const std::string& text) const { return impl_->need_tokenizer().encode_with_bos(text); }
std::string LLM::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->need_tokenizer().decode(ids, skip_special_tokens);
}
int64_t LLM::vocab_size() const { return impl_->vocab_size; }
int64_t LLM::context_limit() const { return impl_->engine->context_limit(); }
size_t LLM::kv_memory_bytes() const { return impl_->engine->usage().pool_bytes; }
int64_t LLM::kv_num_blocks() const { return impl_->engine->usage().blocks_total; }
int64_t LLM::kv_block_tokens() const { return impl_->engine->usage().block_tokens; }
bool LLM::batch_invariant() const { return impl_->batch_invariant; }

EngineStats LLM::stats() const {
  const engine::EngineStats s = impl_->engine->stats();
  EngineStats out{s.steps, s.preemptions, s.scheduled_tokens, s.prompt_tokens, s.generated_tokens};
  out.computed_prompt_tokens = s.computed_prompt_tokens;
  out.cached_prompt_tokens = s.cached_prompt_tokens;
  out.replayed_tokens = s.replayed_tokens;
  out.backend_sampled_steps = s.backend_sampled_steps;
  if (const engine::EngineUsage u = impl_->engine->usage(); u.prefix_caching) {
    out.prefix_cache_hit_rate = u.prefix.hit_rate();
    out.prefix_cache_evicted_blocks = u.prefix.evicted_blocks;
  }
  return out;
}

}  // namespace deepinfer
