#include "dist/expert_placement.h"

#include "core/error.h"

namespace deepinfer::dist {

int ExpertPlacement::owner(int64_t layer, int32_t expert, int64_t token) const {
  DEEPINFER_CHECK(layer >= 0 && layer < layers && expert >= 0 && expert < experts,
                  "expert placement: layer {} / expert {} outside [{}, {}]", layer, expert, layers, experts);
  const size_t le = static_cast<size_t>(layer * experts + expert);
  const int64_t n = replicas[le];
  const int32_t slot = log2phy[le * static_cast<size_t>(max_replicas) + static_cast<size_t>(token % n)];
  return static_cast<int>(slot / slots_per_rank());
}

bool ExpertPlacement::holds(int rank, int64_t layer, int32_t expert) const {
  const int64_t per = slots_per_rank();
  for (int64_t s = rank * per; s < (rank + 1) * per; ++s)
    if (phy2log[static_cast<size_t>(layer * slots + s)] == expert) return true;
  return false;
}

ExpertPlacement placement_from_plan(const EplbPlan& plan, int64_t ranks) {
  DEEPINFER_CHECK(ranks >= 1 && plan.physical_experts % ranks == 0,
                  "expert placement: {} slots do not split over {} ranks", plan.physical_experts, ranks);
  ExpertPlacement p;
  p.layers = plan.layers;
  p.experts = plan.logical_experts;
  p.ranks = ranks;
  p.slots = plan.physical_experts;
  p.max_replicas = plan.max_replicas;
  p.phy2log = plan.phy2log;
  p.log2phy = plan.log2phy;
  p.replicas = plan.replicas;
  return p;
}

ExpertPlacement uniform_placement(int64_t layers, int64_t experts, int64_t ranks) {
  DEEPINFER_CHECK(layers >= 1 && experts >= 1 && ranks >= 1, "expert placement: {} layers, {} experts, {} ranks",
                  layers, experts, ranks);
  const int64_t slots = (experts + ranks - 1) / ranks * ranks;
  const std::vector<float> load(static_cast<size_t>(layers * experts), 1.0f);
  return placement_from_plan(rebalance_experts(load, layers, experts, {slots, 1, 1, ranks}), ranks);
}

}  // namespace deepinfer::dist
