#pragma once
// Expert-parallel load balancing (EPLB): from per-expert loads, a plan of physical expert slots
// (replicas of the hot experts) and their placement on GPUs that balances the GPUs' loads. The
// algorithm of deepseek-ai/EPLB (`eplb.rebalance_experts`), reimplemented:
//
//   hierarchical (when the nodes divide the expert groups): pack whole expert groups onto nodes
//     (balanced packing), replicate experts within each node (each extra slot goes to the expert
//     with the highest load per replica), then pack each node's slots onto its GPUs;
//   global (otherwise): the same with one group and one node.
//
// Balanced packing: items in descending load, each to the lightest pack that still has room (ties to
// the lower pack); replication and packing break ties to the lower index. Loads are float32, summed
// in the order the reference sums them, so the plans are the reference's.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::dist {

struct EplbPlan {
  int64_t layers = 0, logical_experts = 0, physical_experts = 0, max_replicas = 0;
  bool hierarchical = false;  // which policy made it
  std::vector<int32_t> phy2log;       // [layers, physical]: the logical expert each slot holds
  std::vector<int32_t> replica_rank;  // [layers, physical]: which replica of its expert the slot is
  std::vector<int32_t> replicas;      // [layers, logical]: slots per logical expert (>= 1)
  std::vector<int32_t> log2phy;       // [layers, logical, max_replicas]: the slots of each expert, -1 past its count

  int32_t logical_of(int64_t layer, int64_t slot) const { return phy2log[static_cast<size_t>(layer * physical_experts + slot)]; }
};

struct EplbShape {
  int64_t replicas = 0;  // physical expert slots per layer, a multiple of gpus
  int64_t groups = 1;    // expert groups (group-limited routing); 1 = none
  int64_t nodes = 1;     // server nodes (fast links inside a node); must divide gpus
  int64_t gpus = 1;      // GPUs in all
};

// load: [layers, experts] row-major (tokens routed to each expert, or a moving average of them).
// Fails with one line naming the constraint when the shape does not fit.
EplbPlan rebalance_experts(std::span<const float> load, int64_t layers, int64_t experts, const EplbShape& shape);

// Per-GPU load of one layer under a plan: each expert's load split evenly over its replicas, slot s
// on GPU s / (physical / gpus).
std::vector<double> gpu_loads(const EplbPlan& plan, std::span<const float> load, int64_t layer, int64_t gpus);

// max / mean of gpu_loads, the balance figure EPLB minimises (1 = perfect).
double max_over_mean(const std::vector<double>& gpu_load);

// The building blocks, exposed for tests.
struct Packing {
  std::vector<int32_t> pack, rank;  // [rows, items]
};
// rows x items weights into `packs` packs of items / packs items each, as balanced as possible.
Packing balanced_packing(std::span<const float> weight, int64_t rows, int64_t items, int64_t packs);

struct Replication {
  std::vector<int32_t> phy2log, rank, count;  // [rows, physical], [rows, physical], [rows, logical]
};
// rows x logical weights onto `physical` slots: each extra slot to the expert with the highest
// weight per replica.
Replication replicate_experts(std::span<const float> weight, int64_t rows, int64_t logical, int64_t physical);

}  // namespace deepinfer::dist
