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

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/state_pool.h"
#include "model/forward_batch.h"
#include "model/moe_executor.h"

namespace deepinfer::model {

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

using TopKTies = backend::TopKTies;

struct LoadOptions {
  // Called as weights are prepared: (bytes done, bytes total).
  std::function<void(size_t, size_t)> progress;
  TopKTies top_k_ties = TopKTies::Reference;
  // Every op computes each row with the same arithmetic whatever else is in the step (and top-k
  // ties go to the lower index): results do not depend on batching or chunking.
  bool batch_invariant = false;
  // The backend the forward runs on: "cpu" or "cuda" (backend::available_backends()). Default:
  // DEEPINFER_DEVICE from the environment, else "cpu".
  std::string device = default_device();
  static std::string default_device();
  // DeepSeek-V4.1 decoder bounded replay (MODELS.md): in a step that ends a prompt (a sequence with
  // a logits row and more than `keep` tokens), the layers after the last kv source run only over its
  // last `keep` tokens, window attention clamped there (approximate). 0: over every token (exact).
  int64_t decoder_replay_keep = 0;
  // Which device of that backend (GPU index; data-parallel ranks take one each).
  int device_index = 0;
  // Decode steps recorded and replayed (CUDA graphs; backend::BackendOptions).
  std::vector<int64_t> cuda_graph_sizes = backend::BackendOptions::default_cuda_graph_sizes(512);
  bool enforce_eager = false;
  // How device backends spread sparse attention over the GPU (the same bits every way; benchmarks).
  backend::AttentionSchedule attention_schedule = backend::AttentionSchedule::Auto;
  backend::BackendOptions backend_options() const {
    return {.batch_invariant = batch_invariant,
            .attention_schedule = attention_schedule,
            .device_index = device_index,
            .cuda_graph_sizes = cuda_graph_sizes,
            .enforce_eager = enforce_eager};
  }
};

// LoadOptions with the settings the environment asks for (DEEPINFER_BATCH_INVARIANT=1).
LoadOptions load_options_from_env();

class CausalLM;

// One sequence's state in a pool of its own (one slot, blocks added as it grows): the convenience
// path for tests and tools that run a single sequence. It goes through the same batched forward.
class SequenceState {
 public:
  // Host pools grow a block at a time; device pools (other allocators) are sized once for
  // `max_positions` tokens.
  SequenceState(const kv::StateLayout& layout, Allocator& allocator, int64_t max_positions);
  ~SequenceState();
  int64_t length() const { return length_; }
  size_t bytes() const;  // pool memory this state holds

 private:
  friend class CausalLM;
  std::unique_ptr<kv::StatePool> pool_;
  int32_t slot_ = 0;
  std::vector<int32_t> blocks_;
  int64_t length_ = 0;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const io::ModelConfig& config() const = 0;
  // Where this model keeps per-sequence state (slots) and compressed entries (blocks).
  virtual const kv::StateLayout& state_layout() const = 0;
  // Runs every token of `batch` at its position, appending it to its sequence's state in `pool`.
  // `logits` receives vocab_size floats per row of batch.logit_rows, in that order. Not reentrant:
  // one forward at a time per model.
  virtual void forward(const ForwardBatch& batch, kv::StatePool& pool, std::vector<float>& logits) const = 0;
  // forward(), then tokens[r] = the token Backend::sample draws from logits row r by rows[r]: on a
  // device backend the logits never leave the device. The default samples forward()'s host rows
  // with the same arithmetic (cpu/sample_rows.h), so every model gives the same tokens either way.
  virtual void forward_sampled(const ForwardBatch& batch, kv::StatePool& pool, std::span<const backend::SampleRow> rows,
                               std::vector<int32_t>& tokens) const;
  virtual std::vector<ParameterGroup> parameter_summary() const = 0;
  virtual StateFootprint state_footprint() const = 0;
  // The backend the forward runs on; state pools for this model allocate from its allocator().
  virtual backend::Backend& backend() const = 0;
  int64_t vocab_size() const { return config().vocab_size; }

  // Routes the MoE layers' experts through `executor` (expert parallelism; null: every expert here,
  // the default). Not owned; set between forwards. DeepSeek-V4 only so far: V4.1's forward refuses one.
  void set_moe_executor(MoeExecutor* executor) { moe_executor_ = executor; }
  MoeExecutor* moe_executor() const { return moe_executor_; }
  // A step without tokens on this rank: calls the executor for every MoE layer with no rows, so
  // the rank serves the routed rows other ranks send its experts. Needs an executor.
  virtual void moe_idle_step() const;

  // Single-sequence convenience: runs `tokens` at positions state.length() ... and appends them.
  // `logits` receives vocab_size floats per token when all_logits is true, else the last row.
  std::unique_ptr<SequenceState> new_sequence() const;
  void forward(SequenceState& state, std::span<const int32_t> tokens, std::vector<float>& logits,
               bool all_logits = false) const;

 private:
  MoeExecutor* moe_executor_ = nullptr;
};

// Reads DIR/config.json, picks the architecture by model_type, loads the weights. Throws Error.
std::unique_ptr<CausalLM> load_model(const std::filesystem::path& dir, const LoadOptions& options = {});

}  // namespace deepinfer::model
