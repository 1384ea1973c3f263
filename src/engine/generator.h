#pragma once
// Minimal single-sequence generation loop: chunked prefill, then one token at a time until a stop
// token, max_tokens or the model's context limit. Each token is streamed through a callback together
// with its text (complete UTF-8 only, via StreamingDetokenizer). This is the seed of the batched
// scheduler: the sampler is stateless per step, so moving to batches does not change the tokens.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/finish_reason.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {


struct GeneratorOptions {
  int64_t prefill_chunk = 512;        // prompt tokens per forward call during prefill
  bool skip_special_tokens = false;   // drop special tokens from the streamed text
};

struct TokenEvent {
  int32_t id = 0;
  int64_t index = 0;  // 0 for the first generated token
  std::string text;   // newly completed text (may be empty; stop tokens never add their own text)
  bool is_stop = false;
  bool is_last = false;
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // prompt forwards plus the first token's sampling
  double decode_seconds = 0;   // forwards and sampling of the tokens after the first
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // (generated - 1) / decode_seconds; 0 if nothing was decoded
};

struct GenerationResult {
  std::vector<int32_t> ids;  // generated ids; a stop token that ended generation is included (as HF does)
  std::string text;          // concatenated streamed text (empty without a tokenizer)
  FinishReason finish = FinishReason::Length;
  GenerationStats stats;
};

class Generator {
 public:
  // `tokenizer` may be null (models without tokenizer.json): events then carry ids only. Both must
  // outlive the Generator.
  explicit Generator(const model::CausalLM& model, const Tokenizer* tokenizer = nullptr, GeneratorOptions options = {});

  // Throws Error for an empty prompt, ids outside the vocabulary, a prompt longer than the model's
  // context, or invalid sampling parameters.
  GenerationResult generate(std::span<const int32_t> prompt, const sampling::SamplingParams& params,
                            const TokenCallback& on_token = {});

  // EOS ids from the model config plus the tokenizer's EOS (deduplicated).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 private:
  bool stops(int32_t id, const sampling::SamplingParams& params) const;
  std::span<const float> last_row(const std::vector<float>& logits) const;

  const model::CausalLM& model_;
  const Tokenizer* tokenizer_;
  GeneratorOptions options_;
  std::vector<int32_t> eos_ids_;
  sampling::Sampler sampler_;
};

// Parses "0 17 5" (spaces, commas or newlines between ids) into token ids, each checked against
// [0, vocab_size). Throws Error naming the offending entry.
std::vector<int32_t> parse_token_ids(std::string_view text, int64_t vocab_size);

}  // namespace deepinfer::engine
