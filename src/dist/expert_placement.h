#pragma once
// Which rank runs each expert of each MoE layer: an EPLB plan's physical slots split evenly over the
// ranks (slot s on rank s / slots_per_rank), plus the rule that picks one replica per routed row.
#include <cstdint>
#include <span>
#include <vector>

#include "dist/eplb.h"

namespace deepinfer::dist {

struct ExpertPlacement {
  int64_t layers = 0, experts = 0, ranks = 1;
  int64_t slots = 0;           // physical expert slots per layer, a multiple of ranks
  int64_t max_replicas = 1;
  std::vector<int32_t> phy2log;   // [layers, slots]
  std::vector<int32_t> log2phy;   // [layers, experts, max_replicas], -1 past an expert's replicas
  std::vector<int32_t> replicas;  // [layers, experts]

  int64_t slots_per_rank() const { return slots / ranks; }
  // The rank that runs `expert` of `layer` for a rank's routed row of local token `token`: replica
  // token % replicas (fixed by the plan and the token's place, never by timing).
  int owner(int64_t layer, int32_t expert, int64_t token) const;
  // True when `rank` holds a slot of `expert` in `layer`.
  bool holds(int rank, int64_t layer, int32_t expert) const;
};

// The plan's slots over `ranks` ranks (plan.physical_experts a multiple of ranks).
ExpertPlacement placement_from_plan(const EplbPlan& plan, int64_t ranks);

// The starting placement before any load is known: EPLB over equal loads with the fewest slots that
// hold every expert and split evenly (experts rounded up to a multiple of ranks; the extra slots are
// replicas).
ExpertPlacement uniform_placement(int64_t layers, int64_t experts, int64_t ranks);

}  // namespace deepinfer::dist
