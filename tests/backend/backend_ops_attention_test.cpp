// test_backend_ops, sparse_attention of every registered backend against a double-precision loop
// written from backend/backend.h and MODELS.md: window rows (ring and step), every completed entry or
// a selection of them, sink logits, window floors; every schedule a device backend has (on the CPU
// each is the same op), and V4-Flash's own head shape (64 heads of 512) for the tensor-core kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>

#include "backend_ops_state_util.h"

namespace deepinfer::backend_ops_test {
namespace {

// The suite's backend with sparse attention pinned to a schedule (batch invariance as the case's).
std::unique_ptr<backend::Backend> with_schedule(const BackendCase& c, backend::AttentionSchedule schedule) {
  backend::BackendOptions options;
  options.batch_invariant = c.batch_invariant;
  options.attention_schedule = schedule;
  return backend::make_backend(c.name, options);
}

// `count` disjoint block tables of `per` blocks each, out of order.
std::vector<std::vector<int32_t>> disjoint_tables(std::mt19937_64& rng, size_t count, int64_t per) {
  std::vector<int32_t> all(count * static_cast<size_t>(per));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::vector<int32_t>> tables(count);
  for (size_t i = 0; i < count; ++i)
    tables[i].assign(all.begin() + static_cast<int64_t>(i) * per, all.begin() + static_cast<int64_t>(i + 1) * per);
  return tables;
}

// Three sequences deep in context, over three disjoint tables of kDeepTableBlocks blocks each
// (positions up to 1,200; the slices point into them): a decode at 1,100, a chunk of 6 after
// position 830, a decode at 1,001.
constexpr int64_t kDeepTableBlocks = 150;
std::vector<SeqSlice> deep_slices(const std::vector<std::vector<int32_t>>& tables) {
  return {{0, 1, 1100, 2, tables[0]}, {1, 6, 830, 0, tables[1]}, {7, 1, 1001, 3, tables[2]}};
}

// selected [T, k]: for each token, distinct entries of a rate-`rate` compressor it can see, in any
// order, as many as fit but `empty` fewer (the rest -1, as a selection short of k leaves them).
std::vector<int32_t> random_selection(std::mt19937_64& rng, const std::vector<SeqSlice>& seqs, int64_t rate, int64_t k,
                                      int64_t empty) {
  std::vector<int32_t> selected(static_cast<size_t>(tokens_of(seqs) * k), -1);
  for (const auto& sl : seqs)
    for (int64_t i = 0; i < sl.count; ++i) {
      std::vector<int32_t> visible(static_cast<size_t>((sl.start + i + 1) / rate));
      std::iota(visible.begin(), visible.end(), 0);
      std::shuffle(visible.begin(), visible.end(), rng);
      for (int64_t j = 0; j < std::min<int64_t>(k, static_cast<int64_t>(visible.size())) - empty; ++j)
        selected[static_cast<size_t>((sl.begin + i) * k + j)] = visible[static_cast<size_t>(j)];
    }
  return selected;
}

TEST_P(BackendOps, SparseAttentionWindowEntriesSinks) {
  const kv::StateLayout layout = test_layout();
  const auto tensor_cores = with_schedule(GetParam(), backend::AttentionSchedule::TensorCores);
  const int64_t hd = kHeadDim;
  for (int64_t H : {3, 37})  // 37: more heads than a backend may group per work item, and not a multiple
  for (size_t layer : {0u, 1u, 2u}) {
    const backend::WindowLayout wl = layout.layers[layer].window;
    const CompressorLayout* comp = layout.layers[layer].compressor ? &*layout.layers[layer].compressor : nullptr;
    for (Entries mode : {Entries::None, Entries::All, Entries::Selected}) {
      if ((mode == Entries::None) != (comp == nullptr)) continue;
      if (mode == Entries::Selected && layer != 1) continue;  // selection is CSA's
      const std::string what = std::to_string(H) + " heads, layer " + std::to_string(layer) +
                               (mode == Entries::None ? " window only" : mode == Entries::All ? " all completed entries" : " selected entries");
      Pools pools(*be, layout, 4, 10);
      const std::vector<SeqSlice> seqs = attention_slices();
      const int64_t T = tokens_of(seqs);
      fill_step_state(pools.host, seqs, wl, comp ? std::vector{comp} : std::vector<const CompressorLayout*>{},
                      [&] { return nonzero(); });
      pools.upload();
      auto q = randoms(static_cast<size_t>(T * H * hd), 1.5f), kv = randoms(static_cast<size_t>(T * hd));
      const auto sink = randoms(static_cast<size_t>(H), 2.0f);
      const int64_t k_sel = 3;
      std::vector<int32_t> selected(static_cast<size_t>(T * k_sel), -1);
      for (const auto& sl : seqs)
        for (int64_t i = 0; i < sl.count; ++i) {  // up to 3 distinct visible entries, any order
          const int64_t visible = (sl.start + i + 1) / comp_rate_or(comp, 1);
          std::vector<int32_t> all(static_cast<size_t>(visible));
          std::iota(all.begin(), all.end(), 0);
          std::shuffle(all.begin(), all.end(), rng);
          for (int64_t j = 0; j < std::min<int64_t>(k_sel, visible); ++j)
            selected[static_cast<size_t>((sl.begin + i) * k_sel + j)] = all[static_cast<size_t>(j)];
        }
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const auto d_q = on_device(q), d_kv = on_device(kv);
      const auto d_selected = on_device(selected);
      const auto slots_before = pools.slots, blocks_before = pools.blocks;
      const TensorView sel_view = mode == Entries::Selected ? d_selected.view({T, k_sel}) : TensorView{};
      // From the state as uploaded (the mirror, not yet refreshed).
      const auto want = ref_attention(q, kv, wl, comp, mode == Entries::Selected ? &selected : nullptr, k_sel, sink, scale,
                                      seqs, pools.host, H);
      for (backend::Backend* b : {be.get(), tensor_cores.get()}) {
        auto out = nan_output(static_cast<size_t>(T * H * hd));
        b->sparse_attention(d_q.view({T, H, hd}), d_kv.view({T, hd}), wl, comp, sel_view, sink.data(), scale, seqs,
                            pools.storage, out.view({T, H, hd}));
        EXPECT_CLOSE(out.download(), want, what + (b == be.get() ? "" : ", tensor-core schedule"));
      }
      pools.download();
      EXPECT_TRUE(std::equal(pools.slots.begin(), pools.slots.end(), slots_before.begin(), same_bits)) << what << ": wrote slots";
      EXPECT_TRUE(std::equal(pools.blocks.begin(), pools.blocks.end(), blocks_before.begin(), same_bits)) << what << ": wrote blocks";
    }
  }
}

// Both CUDA-core schedules of a device backend (each split of a (token, head) in its own work item
// with a combine, or all of them in one: cuda/step_plan.h) give the same bits, and the tensor-core
// kernel the reference's values, on key lists of several 128-key splits (many 32-key tiles): every
// completed entry of a rate-4 compressor at position ~1,100, and 200 selected entries, a few of
// them empty (-1). (On the CPU the option is ignored: the same op four times.)
TEST_P(BackendOps, AttentionSchedulesGiveTheSameBits) {
  const kv::StateLayout layout = test_layout();
  const int64_t hd = kHeadDim, H = 5, k_sel = 200;
  Pools pools(*be, layout, 4, 3 * kDeepTableBlocks);
  const auto tables = disjoint_tables(rng, 3, kDeepTableBlocks);
  const std::vector<SeqSlice> seqs = deep_slices(tables);
  const int64_t T = tokens_of(seqs);
  const auto split = with_schedule(GetParam(), backend::AttentionSchedule::Split);
  const auto fused = with_schedule(GetParam(), backend::AttentionSchedule::Fused);
  const auto tensor_cores = with_schedule(GetParam(), backend::AttentionSchedule::TensorCores);
  for (size_t layer : {1u, 3u}) {
    const backend::WindowLayout wl = layout.layers[layer].window;
    const CompressorLayout* comp = &*layout.layers[layer].compressor;
    const bool selection = layer == 1;
    const std::string what = selection ? "200 selected entries" : "every completed entry";
    fill_step_state(pools.host, seqs, wl, {comp}, [&] { return nonzero(); });
    pools.upload();
    const auto q = randoms(static_cast<size_t>(T * H * hd), 1.5f), kv = randoms(static_cast<size_t>(T * hd));
    const auto sink = randoms(static_cast<size_t>(H), 2.0f);
    const auto selected = random_selection(rng, seqs, comp->rate, k_sel, 3);  // a few -1
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const auto d_q = on_device(q), d_kv = on_device(kv);
    const auto d_selected = on_device(selected);
    const TensorView sel_view = selection ? d_selected.view({T, k_sel}) : TensorView{};
    std::vector<std::vector<float>> outs;
    for (backend::Backend* b : {be.get(), split.get(), fused.get(), tensor_cores.get()}) {
      auto out = nan_output(static_cast<size_t>(T * H * hd));
      b->sparse_attention(d_q.view({T, H, hd}), d_kv.view({T, hd}), wl, comp, sel_view, sink.data(), scale, seqs,
                          pools.storage, out.view({T, H, hd}));
      b->synchronize();
      outs.push_back(out.download());
    }
    const auto want = ref_attention(q, kv, wl, comp, selection ? &selected : nullptr, k_sel, sink, scale, seqs,
                                    pools.host, H);
    EXPECT_CLOSE(outs[2], want, what + ", fused");
    EXPECT_CLOSE(outs[3], want, what + ", tensor cores");
    // The default plan runs one of the schedules (here, at 8 tokens, a CUDA-core one unless
    // DEEPINFER_TC_GEMM=1 pins the tensor cores).
    const std::vector<float>& chosen = std::equal(outs[0].begin(), outs[0].end(), outs[3].begin(), same_bits) ? outs[3] : outs[1];
    for (size_t i = 0; i < outs[0].size(); ++i) {
      ASSERT_FALSE(std::isnan(outs[1][i])) << what << ", element " << i;
      ASSERT_TRUE(same_bits(outs[1][i], outs[2][i]))
          << what << ": split " << outs[1][i] << " vs fused " << outs[2][i] << " at element " << i;
      ASSERT_TRUE(same_bits(outs[0][i], chosen[i])) << what << ": the default plan differs at element " << i;
    }
  }
}

// The tensor-core kernel scales each row of Q and each key by a power of two (its f16 operands have
// 5 exponent bits): keys whose magnitudes differ by up to 2^8 from row to row (so the tiles' largest
// scales differ and the running output is rescaled between tiles), and whole key lists far below
// and above f16's range (near 2^-30 and 2^20, Q scaled the other way so the scores stay moderate),
// against the reference, over up to 277 keys a token.
TEST_P(BackendOps, AttentionKeysAcrossMagnitudes) {
  const kv::StateLayout layout = test_layout();
  const int64_t hd = kHeadDim, H = 5, k_sel = 300;  // up to 277 keys a token: past the kernel's 256 key pointers
  Pools pools(*be, layout, 4, 3 * kDeepTableBlocks);
  const auto tables = disjoint_tables(rng, 3, kDeepTableBlocks);
  const std::vector<SeqSlice> seqs = deep_slices(tables);
  const int64_t T = tokens_of(seqs);
  const backend::WindowLayout wl = layout.layers[1].window;
  const CompressorLayout* comp = &*layout.layers[1].compressor;
  const auto tensor_cores = with_schedule(GetParam(), backend::AttentionSchedule::TensorCores);
  struct Case {
    const char* what;
    int base, spread;  // a row's values are random times 2^(base + a random integer in [-spread, spread])
  };
  for (const Case& c : {Case{"key rows 2^-8 .. 2^8 apart", 0, 8}, Case{"keys near 2^-30", -30, 0}, Case{"keys near 2^20", 20, 0}}) {
    std::uniform_int_distribution<int> spread(-c.spread, c.spread);
    int64_t filled = 0;
    int e = c.base;
    auto scaled_rows = [&] {  // hd consecutive calls are a row
      if (filled++ % hd == 0) e = c.base + spread(rng);
      return std::ldexp(nonzero(), e);
    };
    fill_step_state(pools.host, seqs, wl, {comp}, scaled_rows);
    pools.upload();
    std::vector<float> kv(static_cast<size_t>(T * hd));
    for (auto& v : kv) v = scaled_rows();
    auto q = randoms(static_cast<size_t>(T * H * hd), 1.5f);
    for (auto& v : q) v = std::ldexp(v, -c.base - c.spread / 2);
    const auto sink = randoms(static_cast<size_t>(H), 2.0f);
    const auto selected = random_selection(rng, seqs, comp->rate, k_sel, 3);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const auto d_q = on_device(q), d_kv = on_device(kv);
    const auto d_selected = on_device(selected);
    const auto want = ref_attention(q, kv, wl, comp, &selected, k_sel, sink, scale, seqs, pools.host, H);
    for (backend::Backend* b : {be.get(), tensor_cores.get()}) {
      auto out = nan_output(static_cast<size_t>(T * H * hd));
      b->sparse_attention(d_q.view({T, H, hd}), d_kv.view({T, hd}), wl, comp, d_selected.view({T, k_sel}), sink.data(),
                          scale, seqs, pools.storage, out.view({T, H, hd}));
      EXPECT_CLOSE(out.download(), want, std::string(c.what) + (b == be.get() ? "" : ", tensor cores"));
    }
  }
}

// Bounded replay after a prefix hit: window attention must not read ring rows below the window
// floor (they belong to the slot's previous sequence: poisoned with NaN here), on every schedule.
TEST_P(BackendOps, WindowFloorHidesOlderRingRows) {
  const kv::StateLayout layout = test_layout();
  const int64_t hd = kHeadDim, H = 3;
  const backend::WindowLayout wl = layout.layers[2].window;
  const CompressorLayout* comp = &*layout.layers[2].compressor;
  Pools pools(*be, layout, 4, 10);
  std::vector<SeqSlice> seqs = attention_slices();
  fill_step_state(pools.host, seqs, wl, {comp}, [&] { return nonzero(); });
  for (auto& sl : seqs) {
    sl.window_floor = std::max<int64_t>(0, sl.start - 2);  // two ring rows stay visible
    float* ring = pools.host.slot(sl.slot) + wl.slot_offset;
    for (int64_t p = std::max<int64_t>(0, sl.start - wl.window + 1); p < sl.window_floor; ++p)
      std::fill_n(ring + (p % wl.window) * hd, hd, std::numeric_limits<float>::quiet_NaN());
  }
  pools.upload();
  const int64_t T = tokens_of(seqs);
  auto q = randoms(static_cast<size_t>(T * H * hd), 1.5f), kv = randoms(static_cast<size_t>(T * hd));
  const auto sink = randoms(static_cast<size_t>(H), 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto d_q = on_device(q), d_kv = on_device(kv);
  const auto want = ref_attention(q, kv, wl, comp, nullptr, 0, sink, scale, seqs, pools.host, H);
  const auto tensor_cores = with_schedule(GetParam(), backend::AttentionSchedule::TensorCores);
  for (backend::Backend* b : {be.get(), tensor_cores.get()}) {
    auto out = nan_output(static_cast<size_t>(T * H * hd));
    b->sparse_attention(d_q.view({T, H, hd}), d_kv.view({T, hd}), wl, comp, TensorView{}, sink.data(), scale, seqs,
                        pools.storage, out.view({T, H, hd}));
    EXPECT_CLOSE(out.download(), want, std::string("attention with window floors (rows below them are NaN)") +
                                           (b == be.get() ? "" : ", tensor cores"));
  }
}

// V4-Flash's attention shape: 64 heads of 512 over a 128-row window and 512 selected entries of a
// rate-4 compressor (some empty), for a prefill chunk of 16 tokens and two decodes deep in
// context: every tile and warp slice of the tensor-core kernel is in use, against the reference;
// then each sequence alone gives the batch's bits (a row depends on its own keys only).
TEST_P(BackendOps, AttentionAtV4FlashHeadShape) {
  constexpr int64_t kHd = 512, kWin = 128, kRate = 4, kSel = 512, kBlock = 64, H = 64;
  std::vector<kv::LayerStateSpec> specs(1);
  specs[0].window = kWin;
  specs[0].head_dim = kHd;
  specs[0].compressor = kv::CompressorSpec{kRate, kHd, true};
  const kv::StateLayout layout = kv::plan_layout(specs, kBlock);
  constexpr int64_t kTableBlocks = 40;  // positions up to 2,560
  Pools pools(*be, layout, 3, 3 * kTableBlocks);
  const auto tables = disjoint_tables(rng, 3, kTableBlocks);
  const std::vector<SeqSlice> seqs = {{0, 1, 2400, 1, tables[0]}, {1, 16, 2100, 0, tables[1]}, {17, 1, 900, 2, tables[2]}};
  const int64_t T = tokens_of(seqs);
  const backend::WindowLayout wl = layout.layers[0].window;
  const CompressorLayout* comp = &*layout.layers[0].compressor;
  fill_step_state(pools.host, seqs, wl, {comp}, [&] { return nonzero(); });
  pools.upload();
  const auto q = randoms(static_cast<size_t>(T * H * kHd), 1.5f), kv = randoms(static_cast<size_t>(T * kHd));
  const auto sink = randoms(static_cast<size_t>(H), 2.0f);
  const auto selected = random_selection(rng, seqs, kRate, kSel, 5);  // a few -1
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHd));
  const auto d_q = on_device(q), d_kv = on_device(kv);
  const auto d_selected = on_device(selected);
  const auto want = ref_attention(q, kv, wl, comp, &selected, kSel, sink, scale, seqs, pools.host, H);
  const auto tensor_cores = with_schedule(GetParam(), backend::AttentionSchedule::TensorCores);
  std::vector<float> batch_out;
  for (backend::Backend* b : {be.get(), tensor_cores.get()}) {
    auto out = nan_output(static_cast<size_t>(T * H * kHd));
    b->sparse_attention(d_q.view({T, H, kHd}), d_kv.view({T, kHd}), wl, comp, d_selected.view({T, kSel}), sink.data(),
                        scale, seqs, pools.storage, out.view({T, H, kHd}));
    batch_out = out.download();
    EXPECT_CLOSE(batch_out, want, b == be.get() ? "default plan" : "tensor cores");
  }
  for (const auto& sl : seqs) {
    const int64_t n = sl.count, first = sl.begin;
    const std::vector<SeqSlice> alone = {{0, n, sl.start, sl.slot, sl.blocks}};
    const auto rows = [&](const auto& v, int64_t per_token) {
      using V = std::decay_t<decltype(v)>;
      return on_device(V(v.begin() + first * per_token, v.begin() + (first + n) * per_token));
    };
    const auto d_q1 = rows(q, H * kHd), d_kv1 = rows(kv, kHd);
    const auto d_sel1 = rows(selected, kSel);
    auto out1 = nan_output(static_cast<size_t>(n * H * kHd));
    tensor_cores->sparse_attention(d_q1.view({n, H, kHd}), d_kv1.view({n, kHd}), wl, comp, d_sel1.view({n, kSel}),
                                   sink.data(), scale, alone, pools.storage, out1.view({n, H, kHd}));
    const auto got = out1.download();
    // Key splits follow the call's tokens in the default mode (SMs would idle), so a sequence alone
    // may add its keys in another order there; where batching keeps bits it must not.
    if (tensor_cores->batching_keeps_bits())
      EXPECT_TRUE(std::equal(got.begin(), got.end(), batch_out.begin() + first * H * kHd, same_bits))
          << "tensor cores: the sequence at slot " << sl.slot << " alone differs from the batch";
    else
      EXPECT_CLOSE(got, std::vector<double>(want.begin() + first * H * kHd, want.begin() + (first + n) * H * kHd),
                   "tensor cores, the sequence alone");
  }
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
