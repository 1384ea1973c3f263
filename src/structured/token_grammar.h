#pragma once
// A grammar compiled against one vocabulary: for every automaton state a parser stack can rest
// in, the tokens decided without knowing the rest of the stack are precomputed (the adaptive
// token mask cache of xgrammar): "accepted" tokens are read entirely inside the state's rule,
// "rejected" ones fail inside it, and the few "uncertain" ones, which leave the rule partway
// through and continue in a caller, are re-checked at run time against the real stack.
#include <cstdint>
#include <memory>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/token_index.h"

namespace deepinfer::structured {

struct StateTokenMasks {
  std::vector<int32_t> accepted_ids;     // sparse form
  std::vector<uint32_t> accepted_bits;   // dense form (vocab bits), used when many are accepted
  std::vector<int32_t> uncertain;        // in trie order
  std::vector<uint16_t> uncertain_lcp;   // common prefix length with the previous uncertain token
};

class TokenGrammar {
 public:
  // threads: workers for the per-state precomputation (0 = one per hardware thread).
  TokenGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenizerIndex> vocab,
               size_t threads = 0);

  const CompiledGrammar& grammar() const { return *grammar_; }
  const TokenizerIndex& vocab() const { return *vocab_; }
  const StateTokenMasks& masks(uint32_t state) const { return masks_[mask_of_state_[state]]; }

  struct Stats {
    size_t states_cached = 0;  // distinct mask entries computed
    size_t accepted = 0, uncertain = 0;  // summed over cached states
  };
  const Stats& stats() const { return stats_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenizerIndex> vocab_;
  // States that no token can tell apart (same behaviour for as many bytes as the longest token
  // has) share one entry: the positions of a long maxLength string, say.
  std::vector<uint32_t> mask_of_state_;
  std::vector<StateTokenMasks> masks_;
  Stats stats_;
};

}  // namespace deepinfer::structured
