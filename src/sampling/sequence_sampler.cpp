#include "sampling/sequence_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace deepinfer::sampling {

namespace {
constexpr float kMasked = -std::numeric_limits<float>::infinity();
}

SequenceSampler::SequenceSampler(SamplingParams params, std::span<const int32_t> prompt,
                                 SequenceSamplerOptions options)
    : params_(std::move(params)), stop_ids_(std::move(options.stop_ids)), grammar_after_(options.grammar_after_token) {
  params_.validate();
  if (params_.repetition_penalty != 1.0) counts_.add_prompt(prompt);
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
  if (options.grammar) {
    grammar_.emplace(std::move(options.grammar));
    grammar_active_ = !grammar_after_.has_value();
    if (grammar_active_) grammar_->prefetch_mask();  // the first mask overlaps the prefill
  }
}

bool SequenceSampler::processes(uint64_t step) const {
  return !params_.logit_bias.empty() || params_.has_penalties() ||
         (static_cast<int64_t>(step) < params_.min_tokens && !stop_ids_.empty());
}

std::span<const float> SequenceSampler::process(std::span<const float> model_row, uint64_t step,
                                                SamplingScratch& scratch) {
  std::span<const float> raw = model_row;
  if (grammar_active()) {
    scratch.raw.assign(model_row.begin(), model_row.end());
    grammar_->apply(scratch.raw);
    raw = scratch.raw;
  }
  if (!processes(step)) return raw;
  scratch.row.assign(raw.begin(), raw.end());
  std::span<float> r(scratch.row);
  for (const auto& [id, bias] : params_.logit_bias)
    if (static_cast<size_t>(id) < r.size()) r[static_cast<size_t>(id)] = static_cast<float>(r[static_cast<size_t>(id)] + bias);
  if (static_cast<int64_t>(step) < params_.min_tokens) {
    // When the stop ids are all that is left (a grammar that must end now), masking them would
    // leave nothing to sample: the grammar's end wins over min_tokens.
    bool other = false;
    for (size_t i = 0; i < r.size() && !other; ++i)
      other = r[i] != kMasked && !std::binary_search(stop_ids_.begin(), stop_ids_.end(), static_cast<int32_t>(i));
    if (other)
      for (int32_t id : stop_ids_)
        if (static_cast<size_t>(id) < r.size()) r[static_cast<size_t>(id)] = kMasked;
  }
  if (params_.has_penalties()) apply_penalties(r, params_, counts_);
  return r;
}

SampledToken SequenceSampler::sample(std::span<const float> model_row, uint64_t step, Sampler& sampler,
                                     SamplingScratch& scratch, std::vector<float>* raw_out) {
  const std::span<const float> row = process(model_row, step, scratch);
  // process() leaves the raw row (grammar-masked or the model's own) in scratch.raw or model_row.
  const std::span<const float> raw = grammar_active() ? std::span<const float>(scratch.raw) : model_row;
  if (raw_out) raw_out->assign(raw.begin(), raw.end());
  SampledToken out;
  out.token = sampler.sample(row, params_, step);
  if (params_.logprobs) out.logprob = token_logprob(raw, out.token, *params_.logprobs);
  return out;
}

backend::SampleRow SequenceSampler::backend_row(uint64_t step, size_t vocab) {
  backend::SampleRow row = sample_row(params_, step);
  if (grammar_active()) {
    allowed_.assign((vocab + 31) / 32, 0u);
    grammar_->allowed_bits(allowed_);
    row.allowed = allowed_;
  }
  return row;
}

void SequenceSampler::accept(int32_t token) {
  if (params_.has_penalties()) counts_.add_output(token);
  if (!grammar_) return;
  if (!grammar_active_) {
    if (grammar_after_ && token == *grammar_after_) {
      grammar_active_ = true;
      grammar_->prefetch_mask();
    }
    return;
  }
  DEEPINFER_CHECK(grammar_->accept(token), "internal error: the grammar rejected token {}, which its mask allowed",
                  token);
  // The next mask is computed on a worker while the next forward runs; apply() waits for it.
  if (!grammar_->is_finished()) grammar_->prefetch_mask();
}

}  // namespace deepinfer::sampling
