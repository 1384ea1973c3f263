#pragma once
// Checkpoint tensor names. The model asks for tensors by their released-checkpoint name
// ("layers.3.attn.wq_a.weight"); the resolver also finds them under the names transformers 5 writes
// (a hybrid: "model.layers.3.attn.wq_a.weight", "model.embed_tokens.weight") and under transformers'
// in-memory names ("model.layers.3.self_attn.q_a_proj.weight"). It records what was used so that
// missing and unexpected tensors are reported together, in one error.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace deepinfer::io {

// Candidate checkpoint names for a released-checkpoint name, most likely first.
std::vector<std::string> tensor_name_aliases(std::string_view released_name);

class TensorResolver {
 public:
  explicit TensorResolver(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  // The tensor under any alias of `released_name`, or nullptr (recorded as missing) when absent.
  // `expected_shape` (if not empty) is checked; a mismatch is recorded, not thrown.
  const TensorView* require(std::string_view released_name, std::vector<int64_t> expected_shape = {});
  // Like require() but absence is not an error.
  const TensorView* optional(std::string_view released_name);
  // Marks a checkpoint tensor as consumed without reading it (e.g. known-ignorable tensors).
  void mark_used(const std::string& checkpoint_name) { used_.insert(checkpoint_name); }

  // Throws one Error listing every missing, mis-shaped and unexpected tensor (up to a limit each).
  // Tensors whose names start with one of `ignored_prefixes` are never unexpected.
  void finish(const std::vector<std::string>& ignored_prefixes = {}) const;

  const Checkpoint& checkpoint() const { return checkpoint_; }

 private:
  const TensorView* find(std::string_view released_name);
  const Checkpoint& checkpoint_;
  std::set<std::string> used_;
  std::vector<std::string> missing_;
  std::vector<std::string> misshaped_;
};

}  // namespace deepinfer::io
