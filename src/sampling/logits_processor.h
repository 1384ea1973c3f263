#pragma once
// Grammar-constrained decoding for one sequence: the engine calls apply() on the sequence's
// logits row before sampling (disallowed tokens become -inf), then accept() with the sampled
// token; rollback() undoes rejected speculative tokens.
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <vector>

#include "structured/matcher.h"

namespace deepinfer::sampling {

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  virtual void apply(std::span<float> logits) = 0;
  virtual bool accept(int32_t token) = 0;  // false: the token is not allowed (state unchanged)
  virtual void rollback(size_t tokens) = 0;
  virtual bool is_finished() const = 0;
};

class GrammarLogitsProcessor : public LogitsProcessor {
 public:
  explicit GrammarLogitsProcessor(std::shared_ptr<const structured::TokenGrammar> grammar);

  // Masks logits[i] to -inf for every disallowed token; ids beyond the grammar's vocabulary
  // (padding rows of the model's embedding) are always disallowed.
  void apply(std::span<float> logits) override;
  // The same mask as bits (bit i % 32 of word i / 32 set: allowed) for a model vocabulary of
  // words.size() * 32 ids, for Backend::sample; consumes the mask as apply() does.
  void allowed_bits(std::span<uint32_t> words);
  bool accept(int32_t token) override;
  void rollback(size_t tokens) override;
  // A stop token was accepted: the sequence is complete.
  bool is_finished() const override;

  // Starts computing the next mask on a worker thread (overlap with the device step); apply()
  // then uses it. accept()/rollback() wait for it first.
  void prefetch_mask();
  structured::GrammarMatcher& matcher() { return matcher_; }

 private:
  void wait_for_prefetch();
  structured::GrammarMatcher matcher_;
  std::vector<int32_t> mask_;
  std::future<void> pending_;
  bool mask_ready_ = false;
};

}  // namespace deepinfer::sampling
