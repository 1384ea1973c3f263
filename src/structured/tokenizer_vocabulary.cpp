// TokenizerIndex from the engine's tokenizer: raw token bytes, special tokens excluded from
// grammar text, EOS as the stop token.
#include "structured/token_index.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::structured {

std::shared_ptr<const TokenizerIndex> TokenizerIndex::from_tokenizer(const Tokenizer& tokenizer) {
  Vocabulary v;
  const size_t n = tokenizer.vocab_size();
  v.tokens.resize(n);
  v.special.resize(n, 0);
  for (size_t id = 0; id < n; ++id) {
    auto i = static_cast<int32_t>(id);
    v.tokens[id] = tokenizer.token_bytes(i);
    v.special[id] = tokenizer.is_special(i) ? 1 : 0;
  }
  if (auto eos = tokenizer.eos_id()) v.stop_tokens.push_back(*eos);
  return std::make_shared<const TokenizerIndex>(std::move(v));
}

}  // namespace deepinfer::structured
