#pragma once
// The pre-tokenizer chain of a tokenizer.json: Split (regex or literal, five delimiter
// behaviours, invert) and ByteLevel (add_prefix_space, use_regex), alone or in a Sequence.
// Each step is applied to every piece produced by the previous step, as HF does.
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace deepinfer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  Regex regex;
  SplitBehavior behavior;
  bool invert;
};

struct ByteLevelStep {
  bool add_prefix_space;
  bool use_regex;
};

class PreTokenizer {
 public:
  // `config` is the "pre_tokenizer" value (may be null). Throws Error on unsupported types.
  static PreTokenizer from_json(const nlohmann::json& config);

  // Splits `text` into pieces. Views point into `text` or into `storage` (strings created by
  // add_prefix_space); both must outlive the pieces. Empty pieces are dropped.
  void split(std::string_view text, std::vector<std::string_view>& pieces, std::deque<std::string>& storage) const;

  // True when a ByteLevel step maps bytes to the GPT-2 alphabet before the model sees them.
  bool byte_level() const { return byte_level_.has_value(); }

 private:
  std::vector<SplitStep> splits_;  // applied in order, before the ByteLevel step (checked at load)
  std::optional<ByteLevelStep> byte_level_;
  std::optional<Regex> byte_level_regex_;  // GPT-2 pattern, used when use_regex is set
};

// Applies one split pattern to `piece` with HF's delimiter behaviour, appending non-empty pieces.
void split_with_behavior(const Regex& regex, SplitBehavior behavior, bool invert, std::string_view piece,
                         std::vector<std::string_view>& out);

}  // namespace deepinfer
