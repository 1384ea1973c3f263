// The public LLM (include/deepinfer/llm.h) over the internal engine.
#include "deepinfer/llm.h"

#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/public_params.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

namespace {

bool env_batch_invariant() {
  const char* v = std::getenv("DEEPINFER_BATCH_INVARIANT");
  return v && std::string_view(v) == "1";
}

TokenLogprob to_public(const sampling::TokenLogprob& t) {
  TokenLogprob out{t.token_id, t.logprob, t.rank, {}};
  out.top.reserve(t.top.size());
  for (const auto& l : t.top) out.top.push_back({l.token_id, l.logprob});
  return out;
}

}  // namespace

engine::RequestParams to_request_params(const SamplingParams& p) {
  DEEPINFER_CHECK(p.top_k >= -1, "invalid sampling parameter: top_k must be >= -1 (0 or -1 = off), got {}", p.top_k);
  engine::RequestParams r;
  r.sampling.n = p.n;
  r.sampling.temperature = p.temperature;
  r.sampling.top_p = p.top_p;
  r.sampling.top_k = p.top_k < 0 ? 0 : p.top_k;
  r.sampling.min_p = p.min_p;
  r.sampling.presence_penalty = p.presence_penalty;
  r.sampling.frequency_penalty = p.frequency_penalty;
  r.sampling.repetition_penalty = p.repetition_penalty;
  r.sampling.logit_bias = p.logit_bias;
  r.sampling.max_tokens = p.max_tokens;
  r.sampling.min_tokens = p.min_tokens;
  r.sampling.stop_token_ids = p.stop_token_ids;
  r.sampling.ignore_eos = p.ignore_eos;
  r.sampling.logprobs = p.logprobs;
  r.sampling.prompt_logprobs = p.prompt_logprobs;
  const StructuredOutputs& so = p.structured_outputs;
  r.sampling.structured_outputs = {so.json, so.regex, so.choice, so.grammar, so.json_object, so.disable_any_whitespace};
  r.sampling.validate();
  r.seed = p.seed;
  r.stop = p.stop;
  r.include_stop_str_in_output = p.include_stop_str_in_output;
  r.skip_special_tokens = p.skip_special_tokens;
  r.return_logits = p.return_logits;
  return r;
}

struct LLM::Impl {
  bool batch_invariant = false;
  std::unique_ptr<model::CausalLM> model;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<engine::LLMEngine> engine;

  const Tokenizer& need_tokenizer() const {
    DEEPINFER_CHECK(tokenizer.has_value(), "the model folder has no tokenizer.json: give prompts as token ids");
    return *tokenizer;
  }
};

LLM::LLM(const std::filesystem::path& model_dir, EngineConfig config) : impl_(std::make_unique<Impl>()) {
  DEEPINFER_CHECK(config.threads >= 0, "threads must be >= 0 (0 = all cores), got {}", config.threads);
  // Read when the CPU thread pool starts, i.e. by the first model loaded in the process.
  if (config.threads > 0) setenv("DEEPINFER_THREADS", std::to_string(config.threads).c_str(), 1);
  DEEPINFER_CHECK(std::filesystem::is_directory(model_dir), "model folder '{}' does not exist or is not a directory",
                  model_dir.string());
  impl_->batch_invariant = config.batch_invariant.value_or(env_batch_invariant());
  model::LoadOptions load = model::load_options_from_env();
  load.batch_invariant = impl_->batch_invariant;
  load.top_k_ties = impl_->batch_invariant ? model::TopKTies::LowerIndex : model::TopKTies::Reference;
  load.progress = config.load_progress;
  if (!config.device.empty()) load.device = config.device;
  if (std::filesystem::exists(model_dir / "tokenizer.json")) impl_->tokenizer.emplace(Tokenizer::from_model_dir(model_dir));
  impl_->model = model::load_model(model_dir, load);

  engine::EngineOptions options;
  options.limits.max_num_seqs = config.max_num_seqs;
  options.limits.max_num_batched_tokens = config.max_num_batched_tokens;
  options.limits.max_prefill_chunk = config.max_prefill_chunk;
  options.kv_memory_bytes = config.kv_memory_bytes;
  options.seed = config.seed;
  options.enable_prefix_caching = config.enable_prefix_caching;
  options.swa_replay_keep = config.swa_replay_keep;
  impl_->engine = std::make_unique<engine::LLMEngine>(
      *impl_->model, impl_->tokenizer ? &*impl_->tokenizer : nullptr, std::move(options));
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
  DEEPINFER_CHECK(params.size() == 1 || params.size() == prompts.size(),
                  "give one SamplingParams for all prompts or one per prompt: {} prompts, {} SamplingParams",
                  prompts.size(), params.size());
  engine::LLMEngine& eng = *impl_->engine;
  std::vector<RequestOutput> outputs(prompts.size());
  std::unordered_map<uint64_t, size_t> index_of;
  auto abort_all = [&] {
    for (const auto& [id, index] : index_of) eng.abort(id);
  };

  // Every request is checked (and queued) before the first step runs.
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      const Prompt& prompt = prompts[i];
      RequestOutput& out = outputs[i];
      out.index = i;
      out.finished = false;
      out.prompt = prompt.text;
      if (prompt.text) {
        DEEPINFER_CHECK(!prompt.text->empty(), "the prompt text is empty");
        out.prompt_token_ids = impl_->need_tokenizer().encode_with_bos(*prompt.text);
      } else {
        out.prompt_token_ids = prompt.token_ids;
      }
      const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
      const uint64_t id = eng.add_request(out.prompt_token_ids, to_request_params(p));
      index_of.emplace(id, i);
      out.outputs.resize(static_cast<size_t>(p.n));
      for (size_t k = 0; k < out.outputs.size(); ++k) {
        out.outputs[k].index = k;
        if (p.logprobs) out.outputs[k].cumulative_logprob = 0.0;
      }
    } catch (const std::exception& e) {
      abort_all();
      fail("prompt {}: {}", i, e.what());
    }
  }

  try {
    // Completions still running per request.
    std::vector<size_t> open(outputs.size());
    for (const auto& out : outputs) open[out.index] = out.outputs.size();
    size_t unfinished = index_of.size();
    while (unfinished > 0) {
      for (engine::RequestDelta& d : eng.step()) {
        const auto it = index_of.find(d.id);
        if (it == index_of.end()) continue;  // not ours (cannot happen: one generate() at a time)
        RequestOutput& out = outputs[it->second];
        CompletionOutput& c = out.outputs.at(d.index);
        c.seed = d.seed;
        c.token_ids.insert(c.token_ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
        c.text += d.text;
        c.logits.insert(c.logits.end(), d.logits.begin(), d.logits.end());
        std::vector<TokenLogprob> logprobs;
        for (const auto& l : d.logprobs) {
          logprobs.push_back(to_public(l));
          *c.cumulative_logprob += l.logprob;
        }
        c.logprobs.insert(c.logprobs.end(), logprobs.begin(), logprobs.end());
        std::vector<std::optional<TokenLogprob>> prompt_logprobs;
        for (const auto& l : d.prompt_logprobs)
          prompt_logprobs.push_back(l ? std::optional<TokenLogprob>(to_public(*l)) : std::nullopt);
        if (!prompt_logprobs.empty()) out.prompt_logprobs = prompt_logprobs;
        bool request_done = false;
        if (d.finished) {
          out.num_cached_tokens = std::max(out.num_cached_tokens, d.num_cached_tokens);
          c.finish_reason = engine::to_string(d.finish_reason);
          c.stop_string = d.stop_string;
          c.stop_token_id = d.stop_token;
          if (--open[out.index] == 0) {  // the request's metrics are those of its last completion
            out.metrics.time_to_first_token = d.time_to_first_token;
            out.metrics.total_time = d.total_time;
            out.finished = request_done = true;
            index_of.erase(it);
            --unfinished;
          }
        }
        if (on_event) {
          StreamEvent event;
          event.index = out.index;
          event.output_index = d.index;
          event.new_token_ids = std::move(d.new_token_ids);
          event.text = std::move(d.text);
          event.logprobs = std::move(logprobs);
          event.prompt_logprobs = std::move(prompt_logprobs);
          event.finished = d.finished;
          if (d.finished) event.finish_reason = c.finish_reason;
          event.request_finished = request_done;
          if (request_done) event.num_cached_tokens = out.num_cached_tokens;
          on_event(event);
        }
      }
    }
  } catch (...) {
    abort_all();
    throw;
  }
  return outputs;
}

bool LLM::has_tokenizer() const { return impl_->tokenizer.has_value(); }
std::vector<int32_t> LLM::encode(const std::string& text) const { return impl_->need_tokenizer().encode_with_bos(text); }
std::string LLM::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->need_tokenizer().decode(ids, skip_special_tokens);
}
int64_t LLM::vocab_size() const { return impl_->model->vocab_size(); }
int64_t LLM::context_limit() const { return impl_->engine->context_limit(); }
size_t LLM::kv_memory_bytes() const { return impl_->engine->pool().allocated_bytes(); }
int64_t LLM::kv_num_blocks() const { return impl_->engine->pool().num_blocks(); }
int64_t LLM::kv_block_tokens() const { return impl_->engine->pool().layout().block_tokens; }
bool LLM::batch_invariant() const { return impl_->batch_invariant; }

EngineStats LLM::stats() const {
  const auto& s = impl_->engine->stats();
  EngineStats out{s.steps, s.preemptions, s.scheduled_tokens, s.prompt_tokens, s.generated_tokens};
  out.computed_prompt_tokens = s.computed_prompt_tokens;
  out.cached_prompt_tokens = s.cached_prompt_tokens;
  out.replayed_tokens = s.replayed_tokens;
  if (const kv::PrefixCache* cache = impl_->engine->prefix_cache()) {
    out.prefix_cache_hit_rate = cache->stats().hit_rate();
    out.prefix_cache_evicted_blocks = cache->stats().evicted_blocks;
  }
  return out;
}

}  // namespace deepinfer
