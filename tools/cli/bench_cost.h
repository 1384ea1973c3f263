#pragma once
// What a decode step or a prefill must move and compute at least, for `deepinfer bench`'s floors:
// bytes of the weights and state it touches (stored dtypes as they are: FP8 1 B + block scales,
// packed FP4 0.5 B + E8M0 scales, only the routed experts the step's tokens pick) and its FLOPs
// (every matrix product and attention score / value product). Activations are not counted.
#include <cstdint>
#include <string>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/state_layout.h"

namespace deepinfer::cli {

// The checkpoint's tensors, sorted by how a step touches them.
struct WeightCensus {
  double row_gathered = 0;    // bytes of tables read one row per token (embedding, tid2eid)
  int64_t gathered_rows = 1;  // rows of those tables (vocabulary)
  double head = 0;            // lm_head bytes: read whole whenever logits are wanted
  double routed = 0;          // routed experts of all layers, weights + scales
  double other = 0;           // everything else (attention, compressors, indexer, router, shared, mHC, norms)
  double dense_macs = 0;      // multiply-adds per token of every matrix outside routed experts and lm_head
  double routed_macs = 0;     // multiply-adds per token if a token used every routed expert
  std::string dtypes;         // "FP8 x 1.23 GB, FP4 (packed) x ..., BF16 x ..." for the header
  double total() const { return row_gathered + head + routed + other; }
};

WeightCensus weight_census(const io::Checkpoint& checkpoint);

// Routed experts a step of `tokens` tokens touches per layer when each picks k of e uniformly: the
// expectation e * (1 - (1 - k/e)^tokens) (exactly k for one token).
double expected_distinct_experts(int64_t experts, int64_t k, int64_t tokens);

struct StepCost {
  double weight_bytes = 0, state_bytes = 0, flops = 0;
  double experts_per_layer = 0;
  double bytes() const { return weight_bytes + state_bytes; }
};

// One decode step of `batch` sequences that each hold `context` tokens.
StepCost decode_cost(const WeightCensus& w, const io::ModelConfig& c, const kv::StateLayout& layout, int64_t batch,
                     int64_t context);
// A prefill of `tokens` tokens into an empty sequence (logits of the last token only).
StepCost prefill_cost(const WeightCensus& w, const io::ModelConfig& c, const kv::StateLayout& layout, int64_t tokens);

}  // namespace deepinfer::cli
