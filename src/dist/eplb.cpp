#include "dist/eplb.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace deepinfer::dist {

namespace {

size_t at(int64_t row, int64_t cols, int64_t col) { return static_cast<size_t>(row * cols + col); }

// inv[perm[i]] = i, row by row.
std::vector<int32_t> inverse(const std::vector<int32_t>& perm, int64_t rows, int64_t cols) {
  std::vector<int32_t> inv(perm.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) inv[at(r, cols, perm[at(r, cols, i)])] = static_cast<int32_t>(i);
  return inv;
}

}  // namespace

Packing balanced_packing(std::span<const float> weight, int64_t rows, int64_t items, int64_t packs) {
  DEEPINFER_CHECK(packs > 0 && items % packs == 0, "EPLB: {} items do not split evenly into {} packs", items, packs);
  const int64_t per_pack = items / packs;
  Packing out{std::vector<int32_t>(static_cast<size_t>(rows * items)), std::vector<int32_t>(static_cast<size_t>(rows * items))};
  std::vector<int64_t> order(static_cast<size_t>(items));
  std::vector<float> pack_weight(static_cast<size_t>(packs));
  std::vector<int64_t> pack_items(static_cast<size_t>(packs));
  for (int64_t r = 0; r < rows; ++r) {
    if (per_pack == 1) {  // item i is pack i
      for (int64_t i = 0; i < items; ++i) {
        out.pack[at(r, items, i)] = static_cast<int32_t>(i);
        out.rank[at(r, items, i)] = 0;
      }
      continue;
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return weight[at(r, items, a)] > weight[at(r, items, b)]; });
    std::fill(pack_weight.begin(), pack_weight.end(), 0.0f);
    std::fill(pack_items.begin(), pack_items.end(), 0);
    for (const int64_t item : order) {
      int64_t best = -1;
      for (int64_t p = 0; p < packs; ++p) {  // the lightest pack with room; ties to the lower pack
        if (pack_items[static_cast<size_t>(p)] < per_pack &&
            (best < 0 || pack_weight[static_cast<size_t>(p)] < pack_weight[static_cast<size_t>(best)]))
          best = p;
      }
      out.pack[at(r, items, item)] = static_cast<int32_t>(best);
      out.rank[at(r, items, item)] = static_cast<int32_t>(pack_items[static_cast<size_t>(best)]++);
      pack_weight[static_cast<size_t>(best)] += weight[at(r, items, item)];
    }
  }
  return out;
}

Replication replicate_experts(std::span<const float> weight, int64_t rows, int64_t logical, int64_t physical) {
  DEEPINFER_CHECK(physical >= logical, "EPLB: {} physical slots cannot hold {} experts", physical, logical);
  Replication out{std::vector<int32_t>(static_cast<size_t>(rows * physical)),
                  std::vector<int32_t>(static_cast<size_t>(rows * physical)),
                  std::vector<int32_t>(static_cast<size_t>(rows * logical), 1)};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < logical; ++p) {
      out.phy2log[at(r, physical, p)] = static_cast<int32_t>(p);
      out.rank[at(r, physical, p)] = 0;
    }
    for (int64_t p = logical; p < physical; ++p) {
      int64_t best = 0;
      float best_load = 0.0f;
      for (int64_t e = 0; e < logical; ++e) {  // the highest load per replica; ties to the lower expert
        const float per_replica = weight[at(r, logical, e)] / static_cast<float>(out.count[at(r, logical, e)]);
        if (e == 0 || per_replica > best_load) {
          best = e;
          best_load = per_replica;
        }
      }
      out.phy2log[at(r, physical, p)] = static_cast<int32_t>(best);
      out.rank[at(r, physical, p)] = out.count[at(r, logical, best)]++;
    }
  }
  return out;
}

EplbPlan rebalance_experts(std::span<const float> load, int64_t layers, int64_t experts, const EplbShape& shape) {
  DEEPINFER_CHECK(layers > 0 && experts > 0, "EPLB: needs at least one layer and one expert (got {} x {})", layers,
                  experts);
  DEEPINFER_CHECK(static_cast<int64_t>(load.size()) == layers * experts,
                  "EPLB: {} load values for {} layers x {} experts", load.size(), layers, experts);
  for (size_t i = 0; i < load.size(); ++i) {
    DEEPINFER_CHECK(std::isfinite(load[i]) && load[i] >= 0.0f, "EPLB: load of layer {} expert {} is {} (needs a finite value >= 0)",
                    static_cast<int64_t>(i) / experts, static_cast<int64_t>(i) % experts, load[i]);
  }
  DEEPINFER_CHECK(shape.gpus > 0 && shape.nodes > 0 && shape.groups > 0, "EPLB: gpus, nodes and groups must be positive");
  DEEPINFER_CHECK(shape.gpus % shape.nodes == 0, "EPLB: {} GPUs do not split evenly over {} nodes", shape.gpus,
                  shape.nodes);
  DEEPINFER_CHECK(shape.replicas % shape.gpus == 0, "EPLB: {} expert slots do not split evenly over {} GPUs",
                  shape.replicas, shape.gpus);
  DEEPINFER_CHECK(shape.replicas >= experts, "EPLB: {} expert slots cannot hold {} experts", shape.replicas, experts);
  DEEPINFER_CHECK(experts % shape.groups == 0, "EPLB: {} experts do not split evenly into {} groups", experts,
                  shape.groups);
  // The nodes must divide the groups for the hierarchical policy; else one group on one node.
  const bool hierarchical = shape.groups % shape.nodes == 0;
  const int64_t groups = hierarchical ? shape.groups : 1, nodes = hierarchical ? shape.nodes : 1;
  const int64_t group_size = experts / groups, groups_per_node = groups / nodes;
  const int64_t per_node = experts / nodes, phy_per_node = shape.replicas / nodes;
  DEEPINFER_CHECK(shape.replicas % nodes == 0 && phy_per_node >= per_node,
                  "EPLB: {} slots over {} nodes cannot hold {} experts a node", shape.replicas, nodes, per_node);
  const int64_t gpus_per_node = shape.gpus / nodes, phy_per_gpu = shape.replicas / shape.gpus;

  // 1. Whole groups onto nodes.
  std::vector<float> group_load(static_cast<size_t>(layers * groups), 0.0f);
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < group_size; ++j) group_load[at(l, groups, g)] += load[at(l, experts, g * group_size + j)];
  const Packing group_pack = balanced_packing(group_load, layers, groups, nodes);
  // log2mlog: logical expert -> its index in node-major order (the node's groups, in rank order).
  std::vector<int32_t> log2mlog(static_cast<size_t>(layers * experts));
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t slot = group_pack.pack[at(l, groups, g)] * groups_per_node + group_pack.rank[at(l, groups, g)];
      for (int64_t j = 0; j < group_size; ++j)
        log2mlog[at(l, experts, g * group_size + j)] = static_cast<int32_t>(slot * group_size + j);
    }
  const std::vector<int32_t> mlog2log = inverse(log2mlog, layers, experts);

  // 2. Replicas within each node: rows (layer, node) of per_node experts.
  const int64_t rows = layers * nodes;
  std::vector<float> node_load(static_cast<size_t>(rows * per_node));
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t m = 0; m < experts; ++m) node_load[at(l, experts, m)] = load[at(l, experts, mlog2log[at(l, experts, m)])];
  const Replication rep = replicate_experts(node_load, rows, per_node, phy_per_node);

  // 3. Each node's slots onto its GPUs, by load per replica.
  std::vector<float> slot_load(static_cast<size_t>(rows * phy_per_node));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < phy_per_node; ++p) {
      const int32_t m = rep.phy2log[at(r, phy_per_node, p)];
      slot_load[at(r, phy_per_node, p)] =
          node_load[at(r, per_node, m)] / static_cast<float>(rep.count[at(r, per_node, m)]);
    }
  const Packing gpu_pack = balanced_packing(slot_load, rows, phy_per_node, gpus_per_node);
  std::vector<int32_t> phy2pphy(static_cast<size_t>(rows * phy_per_node));
  for (size_t i = 0; i < phy2pphy.size(); ++i)
    phy2pphy[i] = static_cast<int32_t>(gpu_pack.pack[i] * phy_per_gpu + gpu_pack.rank[i]);
  const std::vector<int32_t> pphy2phy = inverse(phy2pphy, rows, phy_per_node);

  EplbPlan plan;
  plan.layers = layers;
  plan.logical_experts = experts;
  plan.physical_experts = shape.replicas;
  plan.hierarchical = hierarchical;
  plan.phy2log.resize(static_cast<size_t>(layers * shape.replicas));
  plan.replica_rank.resize(plan.phy2log.size());
  plan.replicas.resize(static_cast<size_t>(layers * experts));
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t node = 0; node < nodes; ++node) {
      const int64_t r = l * nodes + node;
      for (int64_t q = 0; q < phy_per_node; ++q) {
        const int32_t p = pphy2phy[at(r, phy_per_node, q)];
        const int64_t mlog = rep.phy2log[at(r, phy_per_node, p)] + node * per_node;
        const size_t slot = at(l, shape.replicas, node * phy_per_node + q);
        plan.phy2log[slot] = mlog2log[at(l, experts, mlog)];
        plan.replica_rank[slot] = rep.rank[at(r, phy_per_node, p)];
      }
    }
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t mlog = log2mlog[at(l, experts, e)];
      plan.replicas[at(l, experts, e)] = rep.count[at(l * nodes + mlog / per_node, per_node, mlog % per_node)];
    }
  }
  plan.max_replicas = *std::max_element(plan.replicas.begin(), plan.replicas.end());
  plan.log2phy.assign(static_cast<size_t>(layers * experts * plan.max_replicas), -1);
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t q = 0; q < shape.replicas; ++q) {
      const size_t slot = at(l, shape.replicas, q);
      plan.log2phy[static_cast<size_t>((l * experts + plan.phy2log[slot]) * plan.max_replicas + plan.replica_rank[slot])] =
          static_cast<int32_t>(q);
    }
  return plan;
}

std::vector<double> gpu_loads(const EplbPlan& plan, std::span<const float> load, int64_t layer, int64_t gpus) {
  DEEPINFER_CHECK(gpus > 0 && plan.physical_experts % gpus == 0, "EPLB: {} slots do not split over {} GPUs",
                  plan.physical_experts, gpus);
  const int64_t per_gpu = plan.physical_experts / gpus;
  std::vector<double> out(static_cast<size_t>(gpus), 0.0);
  for (int64_t q = 0; q < plan.physical_experts; ++q) {
    const int32_t e = plan.logical_of(layer, q);
    out[static_cast<size_t>(q / per_gpu)] += static_cast<double>(load[at(layer, plan.logical_experts, e)]) /
                                             plan.replicas[at(layer, plan.logical_experts, e)];
  }
  return out;
}

double max_over_mean(const std::vector<double>& gpu_load) {
  if (gpu_load.empty()) return 1.0;
  const double sum = std::accumulate(gpu_load.begin(), gpu_load.end(), 0.0);
  const double mean = sum / static_cast<double>(gpu_load.size());
  return mean > 0 ? *std::max_element(gpu_load.begin(), gpu_load.end()) / mean : 1.0;
}

}  // namespace deepinfer::dist
