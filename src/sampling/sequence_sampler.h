#pragma once
// Everything one sequence's sampling keeps between steps, and the per-row logits pipeline:
//   1. the grammar mask (guided decoding, once the grammar is active)  -> the "raw" row
//   2. logit_bias, min_tokens (stop ids masked), penalties over the incrementally kept counts
//   3. Sampler (temperature, min_p, top_k, top_p, one draw keyed by (seed, step))
// and, after the draw, accept(): counts and grammar advance, and the next grammar mask starts on
// a worker thread so it overlaps the next forward. The engine runs this for every sampled row of
// a step; rows that need no processing are sampled straight from the model's row (no copy).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sampling/logits_processor.h"
#include "sampling/logprobs.h"
#include "sampling/penalties.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "structured/token_grammar.h"

namespace deepinfer::sampling {

struct SequenceSamplerOptions {
  // What min_tokens masks: the EOS ids (unless ignore_eos) and the stop token ids.
  std::vector<int32_t> stop_ids;
  std::shared_ptr<const structured::TokenGrammar> grammar;  // guided decoding; null = none
  // Set: the grammar waits until this token (`</think>`) has been generated, and starts after it.
  std::optional<int32_t> grammar_after_token;
};

// Scratch rows shared by every sequence of an engine (one step samples one row at a time).
struct SamplingScratch {
  std::vector<float> row, raw;
};

struct SampledToken {
  int32_t token = 0;
  std::optional<TokenLogprob> logprob;  // when params.logprobs is set
};

class SequenceSampler {
 public:
  SequenceSampler(SamplingParams params, std::span<const int32_t> prompt, SequenceSamplerOptions options);

  // Picks the token following `model_row` (this sequence's logits); `step` = tokens generated so
  // far. `raw_out` (optional) receives the row logprobs are read from (the model's, masked by the
  // grammar when it is active). Does not change the sequence's state: call accept() with the token.
  SampledToken sample(std::span<const float> model_row, uint64_t step, Sampler& sampler, SamplingScratch& scratch,
                      std::vector<float>* raw_out = nullptr);
  // Steps 1-2 alone: the row the draw is made from (model_row itself when nothing applies, else
  // a scratch row). Sampler::distribution of it is what sample() draws from (tests).
  std::span<const float> process(std::span<const float> model_row, uint64_t step, SamplingScratch& scratch);
  // Whether the token at `step` can be drawn by Backend::sample from the model's own row: nothing
  // but the grammar mask applies (no logit_bias, min_tokens or penalties) and no logprobs are asked.
  bool samples_on_backend(uint64_t step) const { return !params_.logprobs && !processes(step); }
  // Backend::sample's description of that draw; its mask (the grammar's, when active) is held here
  // until the next call. Consumes the grammar mask as sample() does.
  backend::SampleRow backend_row(uint64_t step, size_t vocab);
  // Records a generated token. Throws if the grammar rejects it (cannot happen for sampled tokens).
  void accept(int32_t token);

  bool grammar_active() const { return grammar_.has_value() && grammar_active_; }
  // The grammar accepted its stop token: the output is complete.
  bool grammar_finished() const { return grammar_active() && grammar_->is_finished(); }
  const SamplingParams& params() const { return params_; }
  const TokenCounts& counts() const { return counts_; }

 private:
  // The processing steps after the mask (bias, min_tokens, penalties) have anything to do.
  bool processes(uint64_t step) const;

  SamplingParams params_;
  TokenCounts counts_;
  std::vector<int32_t> stop_ids_;
  std::optional<GrammarLogitsProcessor> grammar_;
  std::vector<uint32_t> allowed_;  // backend_row's mask
  std::optional<int32_t> grammar_after_;
  bool grammar_active_ = false;
};

}  // namespace deepinfer::sampling
