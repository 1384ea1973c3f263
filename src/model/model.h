#pragma once
// The model interface the engine sees: load a folder, open per-sequence state, run tokens.
// Architectures register under their config `model_type` (see registry.cpp).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace deepinfer::model {

// Per-sequence incremental state (KV rings, compressor buffers, compressed entries). Tokens are
// appended in order; prefill may arrive in chunks of any size and decode one token at a time.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t length() const = 0;  // tokens consumed so far (= position of the next token)
  virtual size_t bytes() const = 0;    // memory held by this state
};

struct ParameterGroup {
  std::string component;  // "embed", "attention", "compressor", "indexer", "routed experts", ...
  std::string dtype;      // stored dtype name
  int64_t count = 0;      // parameters (elements, FP4 counts two per byte)
  int64_t bytes = 0;
};

// Bytes a sequence's state needs: `per_token` grows with every token (compressed entries amortised),
// `fixed` is bounded (sliding-window rings, compressor buffers), both summed over layers.
struct StateFootprint {
  double per_token = 0;
  double fixed = 0;
  std::vector<std::string> notes;  // one line per layer kind, for `deepinfer inspect`
};

// How top-k selections (MoE experts, indexer entries) break exact ties.
enum class TopKTies {
  // Exactly as the reference (torch.topk on the CPU, see cpu::torch_top_k_indices). Which of equal
  // scores survives then depends on how many candidates the forward call ranks, so a chunked
  // prefill can differ from a one-shot prefill where an exact tie sits at the k-th place.
  Reference,
  // The lower index wins, ranking only the candidates each token may see: independent of chunking
  // and batching. Chosen by DEEPINFER_BATCH_INVARIANT=1.
  LowerIndex,
};

struct LoadOptions {
  // Called as weights are prepared: (bytes done, bytes total).
  std::function<void(size_t, size_t)> progress;
  TopKTies top_k_ties = TopKTies::Reference;
};

// LoadOptions with the settings the environment asks for (DEEPINFER_BATCH_INVARIANT=1).
LoadOptions load_options_from_env();

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const io::ModelConfig& config() const = 0;
  virtual std::unique_ptr<SequenceState> new_sequence() const = 0;
  // Runs `tokens` at positions state.length() ... and appends them to the state. `logits` receives
  // vocab_size floats per token when all_logits is true, else only the last token's row.
  virtual void forward(SequenceState& state, std::span<const int32_t> tokens, std::vector<float>& logits,
                       bool all_logits = false) const = 0;
  virtual std::vector<ParameterGroup> parameter_summary() const = 0;
  virtual StateFootprint state_footprint() const = 0;
  int64_t vocab_size() const { return config().vocab_size; }
};

// Reads DIR/config.json, picks the architecture by model_type, loads the weights. Throws Error.
std::unique_ptr<CausalLM> load_model(const std::filesystem::path& dir, const LoadOptions& options = {});

}  // namespace deepinfer::model
