#include "structured/stack_set.h"

#include <string>

namespace deepinfer::structured {
namespace {
constexpr uint32_t kEmptySlot = 0xFFFFFFFFu;
inline size_t hash_pair(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 32) | b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<size_t>(x);
}
[[noreturn]] void too_ambiguous(size_t stacks) {
  throw_unsupported("ambiguity", "the grammar is too ambiguous to match: more than " + std::to_string(stacks) +
                                     " parser stacks at once (a rule calling itself after optional items?)");
}
}  // namespace

void NodePool::grow() {
  size_t capacity = table_.empty() ? 1024 : table_.size() * 2;
  table_.assign(capacity, kEmptySlot);
  mask_ = capacity - 1;
  for (uint32_t id = 0; id < nodes_.size(); ++id) {
    size_t slot = hash_pair(nodes_[id].state, nodes_[id].parent) & mask_;
    while (table_[slot] != kEmptySlot) slot = (slot + 1) & mask_;
    table_[slot] = id;
  }
}

uint32_t NodePool::get(uint32_t state, uint32_t parent) {
  if ((nodes_.size() + 1) * 2 > table_.size()) grow();
  size_t slot = hash_pair(state, parent) & mask_;
  while (true) {
    uint32_t id = table_[slot];
    if (id == kEmptySlot) break;
    if (nodes_[id].state == state && nodes_[id].parent == parent) return id;
    slot = (slot + 1) & mask_;
  }
  auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({state, parent});
  table_[slot] = id;
  return id;
}

void StackEngine::new_epoch() {
  if (++epoch_ == 0) {
    std::fill(marks_.begin(), marks_.end(), 0);
    epoch_ = 1;
  }
}

bool StackEngine::mark(uint32_t node) {
  if (node >= marks_.size()) marks_.resize(std::max<size_t>(pool_.size(), node + 1) * 2, 0);
  if (marks_[node] == epoch_) return false;
  marks_[node] = epoch_;
  return true;
}

StackEngine::ClosureFlags StackEngine::closure(std::span<const uint32_t> origins,
                                               std::vector<uint32_t>& expanded) {
  ClosureFlags flags;
  expanded.clear();
  new_epoch();
  work_.clear();
  for (uint32_t n : origins) {
    if (mark(n)) work_.push_back(n);
  }
  const auto& states = grammar_->states();
  const auto& calls = grammar_->calls();
  while (!work_.empty()) {
    uint32_t n = work_.back();
    work_.pop_back();
    expanded.push_back(n);
    if (expanded.size() > kMaxStacks) too_ambiguous(kMaxStacks);
    const auto node = pool_[n];
    const auto& st = states[node.state];
    for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
      uint32_t ret = pool_.get(calls[c].target, node.parent);
      uint32_t child = pool_.get(grammar_->rule_start(calls[c].rule), ret);
      if (mark(child)) work_.push_back(child);
    }
    if (st.final) {
      if (node.parent == NodePool::kRoot) {
        flags.can_end = true;
      } else if (node.parent == NodePool::kBoundary) {
        flags.exited = true;
      } else if (mark(node.parent)) {
        work_.push_back(node.parent);
      }
    }
  }
  return flags;
}

bool StackEngine::step(std::span<const uint32_t> expanded, uint8_t byte, std::vector<uint32_t>& next) {
  next.clear();
  new_epoch();
  const auto& states = grammar_->states();
  const auto& edges = grammar_->edges();
  for (uint32_t n : expanded) {
    const auto node = pool_[n];
    const auto& st = states[node.state];
    for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
      if (edges[e].lo <= byte && byte <= edges[e].hi) {
        uint32_t child = pool_.get(edges[e].target, node.parent);
        if (mark(child)) next.push_back(child);
        if (next.size() > kMaxStacks) too_ambiguous(kMaxStacks);
      }
    }
  }
  return !next.empty();
}

void StackSet::reset() {
  origins_.assign(1, engine_.pool().get(engine_.grammar().root_start(), NodePool::kRoot));
}

bool StackSet::advance(uint8_t byte) {
  engine_.closure(origins_, expanded_);
  return engine_.step(expanded_, byte, origins_);
}

bool StackSet::can_end() { return engine_.closure(origins_, expanded_).can_end; }

}  // namespace deepinfer::structured
