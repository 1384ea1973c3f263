// test_backend_ops: the DeepSeek-V4.1 state ops and experts of every backend against the CPU
// backend on fresh random inputs (the seed is printed): three sequences at once (a decode token, a
// chunk above a window floor, a fresh prompt), ring rows and compressed entries from earlier steps,
// -1 holes in the selections, the indexer's candidate source and filter, FP8 / FP4 experts with
// quantised activations. On the CPU this compares the backend with itself; on CUDA it is the
// kernels against the reference ops.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend_ops_util.h"
#include "kv/state_layout.h"
#include "kv/state_pool.h"

namespace deepinfer::backend_ops_test {
namespace {

using backend::SeqSlice;

constexpr int64_t kW = 8, kHd = 32, kRate = 2, kBlockTokens = 8;

// The same pool layout, allocation and contents on the tested backend and on a CPU backend.
struct TwinPools {
  kv::StateLayout layout;
  std::unique_ptr<backend::Backend> cpu;
  kv::StatePool pool, cpu_pool;
  std::vector<std::vector<int32_t>> blocks;  // per sequence (the same ids in both pools)
  std::vector<int32_t> slots;

  TwinPools(backend::Backend& be, std::span<const int64_t> blocks_per_seq)
      : layout(kv::plan_layout({{kW, kHd, kv::CompressorSpec{kRate, kHd, false}, kv::CompressorSpec{kRate, kHd, false}}},
                               kBlockTokens)),
        cpu(backend::make_cpu_backend()),
        pool(layout, static_cast<int64_t>(blocks_per_seq.size()), 16, be.allocator()),
        cpu_pool(layout, static_cast<int64_t>(blocks_per_seq.size()), 16, cpu->allocator()) {
    for (int64_t n : blocks_per_seq) {
      slots.push_back(*pool.allocate_slot());
      EXPECT_EQ(*cpu_pool.allocate_slot(), slots.back());
      std::vector<int32_t> a, b;
      EXPECT_TRUE(pool.allocate_blocks(n, a));
      EXPECT_TRUE(cpu_pool.allocate_blocks(n, b));
      EXPECT_EQ(a, b);
      blocks.push_back(a);
    }
  }
  // Both pools' slots and blocks from `value()`.
  template <typename F>
  void fill(backend::Backend& be, F value) {
    const backend::StateStorage s = pool.storage(), c = cpu_pool.storage();
    std::vector<float> slot_host(static_cast<size_t>(s.slot_elems * pool.num_slots()));
    std::vector<float> block_host(static_cast<size_t>(s.block_elems * pool.num_blocks()));
    for (auto& v : slot_host) v = value();
    for (auto& v : block_host) v = value();
    be.copy_to_backend(s.slots, slot_host.data(), slot_host.size() * sizeof(float));
    be.copy_to_backend(s.blocks, block_host.data(), block_host.size() * sizeof(float));
    std::copy(slot_host.begin(), slot_host.end(), c.slots);
    std::copy(block_host.begin(), block_host.end(), c.blocks);
  }
  const backend::WindowLayout& window() const { return layout.layers[0].window; }
  const backend::CompressorLayout& comp() const { return *layout.layers[0].compressor; }
  const backend::CompressorLayout& index_keys() const { return *layout.layers[0].indexer; }
};

// Three sequences: a decode token, a chunk whose window starts at a floor, a fresh prompt.
struct Slices {
  std::vector<SeqSlice> seqs;
  int64_t tokens = 0;
  std::vector<int64_t> positions;  // of every step token
};
Slices three_sequences(const TwinPools& P) {
  Slices s;
  const int64_t starts[3] = {40, 17, 0}, counts[3] = {1, 6, 5}, floors[3] = {0, 12, 0};
  for (size_t i = 0; i < 3; ++i) {
    SeqSlice q{s.tokens, counts[i], starts[i], P.slots[i], P.blocks[i]};
    q.window_floor = floors[i];
    s.seqs.push_back(q);
    for (int64_t j = 0; j < counts[i]; ++j) s.positions.push_back(starts[i] + j);
    s.tokens += counts[i];
  }
  return s;
}
constexpr int64_t kBlocksPerSeq[3] = {6, 3, 1};

// A multiple of 1/8 in [-1, 1], never zero: dot products of these over 32 channels are exact in
// float32 in any order, so the bf16 index scores are the same bits on every backend.
float eighths(std::mt19937_64& rng) {
  const float m = static_cast<float>(1 + rng() % 8) / 8.0f;
  return rng() & 1 ? m : -m;
}

TEST_P(BackendOps, IndexerV41MatchesTheCpuBackend) {
  TwinPools P(*be, kBlocksPerSeq);
  P.fill(*be, [&] { return eighths(rng); });
  const Slices S = three_sequences(P);
  // 4 heads (one group of the CUDA kernel) and 20 (a second, partial group).
  for (const int64_t nh : {4, 20}) {
    SCOPED_TRACE(std::to_string(nh) + " heads");
    const int64_t T = S.tokens, K = 6, CB = 3;
    std::vector<float> q(static_cast<size_t>(T * nh * kHd)), w(static_cast<size_t>(T * nh));
    for (auto& v : q) v = eighths(rng);
    for (auto& v : w) v = eighths(rng);
    backend::IndexerV41Params p;
    p.top_k = K;
    p.candidate_blocks = CB;
    p.candidate_block_size = 2;
    auto dq = on_device(q), dw = on_device(w);
    std::vector<int32_t> source_candidates;  // the filter reads the source's rows, on both sides
    for (const auto role : {backend::CandidateRole::None, backend::CandidateRole::Source, backend::CandidateRole::Filter}) {
      p.candidates = role;
      auto cand = role == backend::CandidateRole::Filter ? on_device(source_candidates)
                                                        : DeviceI32::filled(*be, static_cast<size_t>(T * CB), -7);
      std::vector<int32_t> cand_cpu = role == backend::CandidateRole::Filter
                                          ? source_candidates
                                          : std::vector<int32_t>(static_cast<size_t>(T * CB), -7);
      auto sel = DeviceI32::filled(*be, static_cast<size_t>(T * K), -7);
      std::vector<int32_t> sel_cpu(static_cast<size_t>(T * K), -7);
      be->indexer_select_v41(P.index_keys(), dq.view({T, nh, kHd}), dw.view({T, nh}), p, S.seqs, P.pool.storage(),
                             cand.view({T, CB}), sel.view({T, K}));
      P.cpu->indexer_select_v41(P.index_keys(), TensorView::f32(q.data(), {T, nh, kHd}), TensorView::f32(w.data(), {T, nh}),
                                p, S.seqs, P.cpu_pool.storage(), TensorView::i32(cand_cpu.data(), {T, CB}),
                                TensorView::i32(sel_cpu.data(), {T, K}));
      const int r = static_cast<int>(role);
      EXPECT_EQ(sel.download(), sel_cpu) << "role " << r;
      if (role == backend::CandidateRole::Source) {
        EXPECT_EQ(cand.download(), cand_cpu);
        source_candidates = cand_cpu;
        // Not a vacuous filter: some token keeps fewer candidate blocks than it has.
        EXPECT_TRUE(std::any_of(cand_cpu.begin(), cand_cpu.end(), [](int32_t b) { return b > 0; }));
      }
    }
  }
}

TEST_P(BackendOps, SparseAndBlockAttentionV41MatchTheCpuBackend) {
  TwinPools P(*be, kBlocksPerSeq);
  P.fill(*be, [&] { return nonzero(); });
  const Slices S = three_sequences(P);
  const int64_t T = S.tokens, H = 4, k_sel = 5;
  const auto q = randoms(static_cast<size_t>(T * H * kHd), 2.0f), kv = randoms(static_cast<size_t>(T * kHd));
  auto& sink = keep(randoms(static_cast<size_t>(H)));
  std::vector<int32_t> sel(static_cast<size_t>(T * k_sel));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t visible = (S.positions[static_cast<size_t>(t)] + 1) / kRate;
    for (int64_t j = 0; j < k_sel; ++j)
      sel[static_cast<size_t>(t * k_sel + j)] =
          visible == 0 || rng() % 4 == 0 ? -1 : static_cast<int32_t>(uniform_int(0, visible - 1));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHd));
  auto dq = on_device(q), dkv = on_device(kv);
  auto dsel = on_device(sel);
  for (const bool block : {false, true}) {
    auto out = nan_output(static_cast<size_t>(T * H * kHd));
    std::vector<float> want(static_cast<size_t>(T * H * kHd), NAN);
    const auto cq = TensorView::f32(const_cast<float*>(q.data()), {T, H, kHd});
    const auto ckv = TensorView::f32(const_cast<float*>(kv.data()), {T, kHd});
    if (block) {
      be->block_attention_v41(dq.view({T, H, kHd}), dkv.view({T, kHd}), P.window(), sink.data(), scale, S.seqs,
                              P.pool.storage(), out.view({T, H, kHd}));
      P.cpu->block_attention_v41(cq, ckv, P.window(), sink.data(), scale, S.seqs, P.cpu_pool.storage(),
                                 TensorView::f32(want.data(), {T, H, kHd}));
    } else {
      be->sparse_attention_v41(dq.view({T, H, kHd}), dkv.view({T, kHd}), P.window(), &P.comp(), dsel.view({T, k_sel}),
                               sink.data(), scale, S.seqs, P.pool.storage(), out.view({T, H, kHd}));
      P.cpu->sparse_attention_v41(cq, ckv, P.window(), &P.comp(), TensorView::i32(sel.data(), {T, k_sel}), sink.data(),
                                  scale, S.seqs, P.cpu_pool.storage(), TensorView::f32(want.data(), {T, H, kHd}));
    }
    const Diff d = relative_diff(out.download(), std::vector<double>(want.begin(), want.end()));
    EXPECT_LE(d.relative, 1e-2) << (block ? "block: " : "sparse: ") << d.detail;  // bf16 outputs
  }
}

// FP4 routed experts and an FP8 shared expert with FP8 activations, as V4.1-Flash stores them.
TEST_P(BackendOps, MoeExpertsV41QuantisedMatchTheCpuBackend) {
  const int64_t T = 9, D = 64, I = 64, E = 8, K = 3;
  auto& routed = keep(std::vector<ExpertWeights>{});
  for (int64_t e = 0; e < E; ++e) routed.push_back(make_expert(rng, DType::F4_E2M1, I, D));
  auto& shared = keep(make_expert(rng, DType::F8_E4M3, I, D));
  std::vector<backend::SwigluExpert> views;
  for (const auto& e : routed) views.push_back(e.view());
  std::vector<float> x = randoms(static_cast<size_t>(T * D));
  for (auto& v : x) v = round_to_bf16(v);
  std::vector<int32_t> chosen;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> ids(static_cast<size_t>(E));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    chosen.insert(chosen.end(), ids.begin(), ids.begin() + K);
  }
  std::vector<float> weights = randoms(static_cast<size_t>(T * K));
  for (auto& v : weights) v = std::fabs(v);
  const backend::MoeWeights mw{views, shared.view(), 1.5f};
  const backend::MoeV41Quant quant{true, true};
  auto dx = on_device(x), dw = on_device(weights);
  auto dc = on_device(chosen);
  auto out = nan_output(static_cast<size_t>(T * D));
  be->moe_experts_v41(mw, quant, dx.view({T, D}), dc.view({T, K}), dw.view({T, K}), out.view({T, D}));
  auto cpu = backend::make_cpu_backend();
  std::vector<float> want(static_cast<size_t>(T * D), NAN);
  cpu->moe_experts_v41(mw, quant, TensorView::f32(x.data(), {T, D}), TensorView::i32(chosen.data(), {T, K}),
                       TensorView::f32(weights.data(), {T, K}), TensorView::f32(want.data(), {T, D}));
  const Diff d = relative_diff(out.download(), std::vector<double>(want.begin(), want.end()));
  EXPECT_LE(d.relative, 2e-2) << d.detail;  // bf16 and FP8 roundings at every stage
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
