#include "engine/generator.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>

#include "core/error.h"

namespace deepinfer::engine {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

const char* to_string(FinishReason reason) {
  return reason == FinishReason::Stop ? "stop" : "length"; }

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 && generated_tokens > 1 ? static_cast<double>(generated_tokens - 1) / decode_seconds : 0.0;
}

Generator::Generator(const model::CausalLM& model, const Tokenizer* tokenizer, GeneratorOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  DEEPINFER_CHECK(options_.prefill_chunk >= 1, "prefill chunk size must be >= 1, got {}", options_.prefill_chunk);
  DEEPINFER_CHECK(model_.vocab_size() > 0, "model reports vocab_size {}", model_.vocab_size());
  for (int64_t id : model_.config().eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_ && tokenizer_->eos_id()) eos_ids_.push_back(*tokenizer_->eos_id());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
}

bool Generator::stops(int32_t id, const sampling::SamplingParams& params) const {
  if (!params.ignore_eos && std::binary_search(eos_ids_.begin(), eos_ids_.end(), id)) return true;
  return std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) != params.stop_token_ids.end();
}

std::span<const float> Generator::last_row(const std::vector<float>& logits) const {
  const auto vocab = static_cast<size_t>(model_.vocab_size());
  DEEPINFER_CHECK(logits.size() >= vocab && logits.size() % vocab == 0,
                  "model returned {} logits, not a multiple of vocab_size {}", logits.size(), vocab);
  return std::span<const float>(logits).subspan(logits.size() - vocab);
}

GenerationResult Generator::generate(std::span<const int32_t> prompt, const sampling::SamplingParams& params,
                                     const TokenCallback& on_token) {
  params.validate();
  // The minimal loop samples each row as it comes; the per-sequence controls live in LLMEngine.
  DEEPINFER_CHECK(params.n == 1 && !params.has_penalties() && params.logit_bias.empty() && params.min_tokens == 0 &&
                      !params.logprobs && !params.prompt_logprobs && !params.structured_outputs.active(),
                  "the single-sequence Generator supports temperature, top_p, top_k, min_p, seed, max_tokens, "
                  "stop_token_ids and ignore_eos only: use LLMEngine for n, penalties, logit_bias, min_tokens, "
                  "logprobs and structured outputs");
  const int64_t vocab = model_.vocab_size();
  DEEPINFER_CHECK(!prompt.empty(), "the prompt is empty: at least one token id is needed");
  for (size_t i = 0; i < prompt.size(); ++i)
    DEEPINFER_CHECK(prompt[i] >= 0 && prompt[i] < vocab, "prompt token {} (at index {}) is outside the vocabulary [0, {})",
                    prompt[i], i, vocab);
  // Positions past max_position_embeddings were never trained (and RoPE tables may end there).
  const int64_t context_limit = model_.config().max_position_embeddings;
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  DEEPINFER_CHECK(context_limit <= 0 || prompt_len <= context_limit,
                  "the prompt has {} tokens but the model's context is {} positions", prompt_len, context_limit);

  GenerationResult result;
  result.stats.prompt_tokens = prompt_len;
  auto state = model_.new_sequence();
  std::vector<float> logits;

  const auto prefill_start = Clock::now();
  for (int64_t begin = 0; begin < prompt_len; begin += options_.prefill_chunk) {
    const int64_t count = std::min(options_.prefill_chunk, prompt_len - begin);
    model_.forward(*state, prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), logits);
  }
  int32_t token = sampler_.sample(last_row(logits), params, 0);
  result.stats.prefill_seconds = seconds_since(prefill_start);

  std::optional<StreamingDetokenizer> detokenizer;
  if (tokenizer_) detokenizer.emplace(*tokenizer_, options_.skip_special_tokens);

  for (int64_t index = 0;; ++index) {
    result.ids.push_back(token);
    TokenEvent event;
    event.id = token;
    event.index = index;
    event.is_stop = stops(token, params);
    // Feeding this token back would put it at position prompt_len + index.
    const bool at_limit = static_cast<int64_t>(result.ids.size()) >= params.max_tokens ||
                          (context_limit > 0 && prompt_len + index >= context_limit);
    event.is_last = event.is_stop || at_limit;
    if (detokenizer) {
      if (!event.is_stop) event.text = detokenizer->push(token);
      if (event.is_last) event.text += detokenizer->flush();  // nothing may stay held back
      result.text += event.text;
    }
    if (on_token) on_token(event);
    if (event.is_last) {
      result.finish = event.is_stop ? FinishReason::Stop : FinishReason::Length;
      break;
    }
    const auto step_start = Clock::now();
    model_.forward(*state, std::span<const int32_t>(&token, 1), logits);
    token = sampler_.sample(last_row(logits), params, static_cast<uint64_t>(index + 1));
    result.stats.decode_seconds += seconds_since(step_start);
  }
  result.stats.generated_tokens = static_cast<int64_t>(result.ids.size());
  return result;
}

std::vector<int32_t> parse_token_ids(std::string_view text, int64_t vocab_size) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  auto is_separator = [](char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'; };
  while (pos < text.size()) {
    if (is_separator(text[pos])) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && !is_separator(text[end])) ++end;
    const std::string_view word = text.substr(pos, end - pos);
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
    DEEPINFER_CHECK(ec == std::errc() && ptr == word.data() + word.size(), "token id '{}' is not an integer", word);
    DEEPINFER_CHECK(value >= 0 && value < vocab_size, "token id {} is outside the vocabulary [0, {})", value,
                    vocab_size);
    ids.push_back(static_cast<int32_t>(value));
    pos = end;
  }
  DEEPINFER_CHECK(!ids.empty(), "no token ids given (expected e.g. \"0 17 5\")");
  return ids;
}

}  // namespace deepinfer::engine
