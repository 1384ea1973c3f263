// test_backend_ops: the DeepSeek-V4.1 ops (backend.h, "DeepSeek-V4.1") of every backend against
// references written from their documented semantics: bf16 rounding, mHC coefficients / collapse
// (tied to mhc_pre), compressor pooling over two steps, V4.1 sparse and DSpark block attention,
// the indexer's candidate filter, Engram's hash and gate. Every backend runs them (the CUDA kernels:
// cuda/ops_v41.cpp); a backend without an op fails with Backend's "does not implement" error.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "backend_ops_util.h"
#include "core/error.h"
#include "kv/state_layout.h"
#include "kv/state_pool.h"

namespace deepinfer::backend_ops_test {
namespace {

using backend::SeqSlice;


// Nearest bfloat16 (ties to the even mantissa), from the two neighbours of x.
double ref_bf16(double x) {
  const auto f = static_cast<float>(x);
  const uint32_t bits = std::bit_cast<uint32_t>(f) & 0xffff0000u;
  const double lo = std::bit_cast<float>(bits), hi = std::bit_cast<float>(bits + 0x10000u);
  const double dl = std::fabs(static_cast<double>(f) - lo), dh = std::fabs(hi - static_cast<double>(f));
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (bits >> 16) % 2 == 0 ? lo : hi;
}

// A pool with one window ring (kWindow x kDim), one rate-2 compressor and its index keys.
constexpr int64_t kWindow = 4, kDim = 32, kBlockTokens = 8;

struct Pool {
  kv::StateLayout layout;
  kv::StatePool pool;
  backend::StateStorage storage;
  std::vector<int32_t> slots, blocks0, blocks1;
  explicit Pool(backend::Backend& be)
      : layout(kv::plan_layout({{kWindow, kDim, kv::CompressorSpec{2, kDim, false}, kv::CompressorSpec{2, kDim, false}}},
                               kBlockTokens)),
        pool(layout, 2, 8, be.allocator()),
        storage(pool.storage()) {
    slots = {*pool.allocate_slot(), *pool.allocate_slot()};
    EXPECT_TRUE(pool.allocate_blocks(3, blocks0));
    EXPECT_TRUE(pool.allocate_blocks(3, blocks1));
  }
  const backend::WindowLayout& window() const { return layout.layers[0].window; }
  const backend::CompressorLayout& comp() const { return *layout.layers[0].compressor; }
};

TEST_P(BackendOps, RoundBf16TiesToEven) {
  std::vector<float> x = randoms(200, 3.0f);
  x.push_back(1.0f + 0x1p-8f);        // a tie between 1 and 1 + 2^-7: to even (1)
  x.push_back(1.0f + 3 * 0x1p-8f);    // a tie: to even (1 + 2^-6)
  auto dx = on_device(x);
  be->round_bf16(dx.view({static_cast<int64_t>(x.size())}));
  const auto got = dx.download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(ref_bf16(x[i]))) << "of " << x[i];
}

// The V4.1 split of mhc_pre: its coefficients, then the collapse with them, are mhc_pre's.
TEST_P(BackendOps, MhcCoefficientsAndCollapseAreMhcPre) {
  const int64_t T = 5, n = 4, D = 16, mix = (2 + n) * n;
  auto& fn = keep(randoms(static_cast<size_t>(mix * n * D), 0.3f));
  auto& base = keep(randoms(static_cast<size_t>(mix), 0.5f));
  auto& scale = keep(randoms(3, 0.5f));
  const backend::MhcWeights w{fn.data(), base.data(), scale.data()};
  const backend::MhcParams p{n, 20, 1e-6f, 1e-6f};
  auto x = on_device(randoms(static_cast<size_t>(T * n * D)));
  auto input = nan_output(static_cast<size_t>(T * D)), post = nan_output(static_cast<size_t>(T * n));
  auto comb = nan_output(static_cast<size_t>(T * n * n));
  be->mhc_pre(w, p, x.view({T, n, D}), input.view({T, D}), post.view({T, n}), comb.view({T, n, n}));
  auto pre2 = nan_output(static_cast<size_t>(T * n)), post2 = nan_output(static_cast<size_t>(T * n));
  auto comb2 = nan_output(static_cast<size_t>(T * n * n)), input2 = nan_output(static_cast<size_t>(T * D));
  be->mhc_coefficients(w, p, x.view({T, n, D}), pre2.view({T, n}), post2.view({T, n}),
                                   comb2.view({T, n, n}));
  be->mhc_collapse(x.view({T, n, D}), pre2.view({T, n}), input2.view({T, D}));
  EXPECT_EQ(post2.download(), post.download());
  EXPECT_EQ(comb2.download(), comb.download());
  const auto a = input.download();
  std::vector<double> want(a.begin(), a.end());
  const Diff d = relative_diff(input2.download(), want);
  EXPECT_LE(d.relative, 1e-6) << d.detail;
}

// Two steps of two sequences: the first leaves an open group in the slot, the second completes it.
TEST_P(BackendOps, CompressPoolCarriesOpenGroupsAcrossSteps) {
  Pool P(*be);
  const auto& c = P.comp();
  auto kv_all = randoms(2 * 5 * kDim), gate_all = randoms(2 * 5 * kDim, 2.0f);  // 5 tokens per sequence
  auto row = [&](const std::vector<float>& v, int64_t s, int64_t pos) { return &v[static_cast<size_t>((s * 5 + pos) * kDim)]; };
  auto ref_entry = [&](int64_t s, int64_t e) {
    std::vector<double> out(static_cast<size_t>(kDim));
    for (int64_t ch = 0; ch < kDim; ++ch) {
      const double g0 = row(gate_all, s, 2 * e)[ch], g1 = row(gate_all, s, 2 * e + 1)[ch], m = std::max(g0, g1);
      const double w0 = std::exp(g0 - m), w1 = std::exp(g1 - m);
      out[static_cast<size_t>(ch)] = (row(kv_all, s, 2 * e)[ch] * w0 + row(kv_all, s, 2 * e + 1)[ch] * w1) / (w0 + w1);
    }
    return out;
  };
  // step 1: positions [0, 3) of both; step 2: positions [3, 5).
  for (int step = 0; step < 2; ++step) {
    const int64_t start = step == 0 ? 0 : 3, count = step == 0 ? 3 : 2;
    std::vector<float> kv, gate;
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t pos = start; pos < start + count; ++pos) {
        kv.insert(kv.end(), row(kv_all, s, pos), row(kv_all, s, pos) + kDim);
        gate.insert(gate.end(), row(gate_all, s, pos), row(gate_all, s, pos) + kDim);
      }
    const std::vector<SeqSlice> seqs = {{0, count, start, P.slots[0], P.blocks0}, {count, count, start, P.slots[1], P.blocks1}};
    std::vector<backend::EntryRef> entries;
    for (int32_t s = 0; s < 2; ++s)
      for (int64_t e = start / 2; e < (start + count) / 2; ++e) entries.push_back({s, e});
    auto dkv = on_device(kv), dgate = on_device(gate);
    auto out = nan_output(entries.size() * static_cast<size_t>(kDim));
    be->compress_pool(c, dkv.view({2 * count, kDim}), dgate.view({2 * count, kDim}), entries, seqs,
                                  P.storage, out.view({static_cast<int64_t>(entries.size()), kDim}));
    std::vector<double> want;
    for (const auto& e : entries) {
      const auto r = ref_entry(e.seq, e.entry);
      want.insert(want.end(), r.begin(), r.end());
    }
    const Diff d = relative_diff(out.download(), want);
    EXPECT_LE(d.relative, 1e-6) << "step " << step << ": " << d.detail;
  }
}

// Padding entries (EntryRef seq -1, as a recorded step pads its entries): compress_pool gives a
// zero row for them and the real row as without padding; store_entries writes nothing for them.
TEST_P(BackendOps, CompressPoolAndStoreEntriesSkipPaddingEntries) {
  Pool P(*be);
  const auto& c = P.comp();
  const int64_t T = 2;  // one sequence, positions 0-1: entry 0 completes
  const auto kv = randoms(static_cast<size_t>(T * kDim)), gate = randoms(static_cast<size_t>(T * kDim));
  const std::vector<SeqSlice> seqs = {{0, T, 0, P.slots[0], P.blocks0}};
  const std::vector<backend::EntryRef> plain = {{0, 0}}, padded = {{-1, 0}, {0, 0}, {-1, 0}};
  auto dkv = on_device(kv), dgate = on_device(gate);
  auto out1 = nan_output(static_cast<size_t>(kDim)), out3 = nan_output(static_cast<size_t>(3 * kDim));
  be->compress_pool(c, dkv.view({T, kDim}), dgate.view({T, kDim}), plain, seqs, P.storage, out1.view({1, kDim}));
  be->compress_pool(c, dkv.view({T, kDim}), dgate.view({T, kDim}), padded, seqs, P.storage, out3.view({3, kDim}));
  const auto a = out1.download(), b = out3.download();
  for (int64_t ch = 0; ch < kDim; ++ch) {
    EXPECT_EQ(b[static_cast<size_t>(ch)], 0.0f);
    EXPECT_EQ(b[static_cast<size_t>(kDim + ch)], a[static_cast<size_t>(ch)]);
    EXPECT_EQ(b[static_cast<size_t>(2 * kDim + ch)], 0.0f);
  }
  // Store the three rows: entry 0 gets the real one, nothing else in the blocks changes.
  std::vector<float> before(static_cast<size_t>(P.layout.block_elems * 8));
  be->copy_to_host(before.data(), P.storage.blocks, before.size() * sizeof(float));
  be->store_entries(c, out3.view({3, kDim}), padded, seqs, P.storage);
  std::vector<float> after(before.size());
  be->copy_to_host(after.data(), P.storage.blocks, after.size() * sizeof(float));
  backend::StateStorage host = P.storage;
  host.blocks = before.data();
  const float* entry0 = host.entry(seqs[0], c, 0);
  const auto at = static_cast<size_t>(entry0 - before.data());
  for (size_t i = 0; i < after.size(); ++i) {
    if (i >= at && i < at + static_cast<size_t>(kDim)) {
      EXPECT_EQ(after[i], a[i - at]);
    } else {
      ASSERT_EQ(std::memcmp(&after[i], &before[i], sizeof(float)), 0) << "block element " << i << " changed";
    }
  }
}

// Reference of one head: softmax over keys with the sink, probabilities rounded to bf16 for PV.
std::vector<double> ref_attend(const float* q, const std::vector<const float*>& keys, double scale, double sink) {
  double m = -1e30;
  std::vector<double> s;
  for (const float* k : keys) {
    double d = 0;
    for (int64_t c = 0; c < kDim; ++c) d += static_cast<double>(q[c]) * k[c];
    s.push_back(d * scale);
    m = std::max(m, s.back());
  }
  double sum = std::exp(sink - m);
  std::vector<double> o(static_cast<size_t>(kDim), 0.0);
  for (size_t j = 0; j < keys.size(); ++j) {
    const double p = std::exp(s[j] - m);
    sum += p;
    for (int64_t c = 0; c < kDim; ++c) o[static_cast<size_t>(c)] += ref_bf16(p) * keys[j][c];
  }
  for (auto& v : o) v = ref_bf16(v / sum);
  return o;
}

// Window (ring rows from before the step, then the step's rows) plus selected compressed entries;
// and the DSpark block: the ring's slots plus the whole block, no causal mask.
TEST_P(BackendOps, SparseAndBlockAttentionV41) {
  Pool P(*be);
  const int64_t H = 2, start = 6, count = 3, T = count;
  std::vector<float> slot_host(static_cast<size_t>(P.layout.slot_elems)), block_host(static_cast<size_t>(P.layout.block_elems * 8));
  for (auto& v : slot_host) v = nonzero();
  for (auto& v : block_host) v = nonzero();
  be->copy_to_backend(P.storage.slots, slot_host.data(), slot_host.size() * sizeof(float));  // slot 0 only
  be->copy_to_backend(P.storage.blocks, block_host.data(), block_host.size() * sizeof(float));
  backend::StateStorage host = P.storage;
  host.slots = slot_host.data();
  host.blocks = block_host.data();
  const auto q = randoms(static_cast<size_t>(T * H * kDim)), kv = randoms(static_cast<size_t>(T * kDim));
  auto& sink = keep(randoms(static_cast<size_t>(H)));
  const std::vector<int32_t> sel = {0, 2, -1, 1, -1, -1, 3, 0, 1};  // [T, 3]
  const SeqSlice seq{0, count, start, P.slots[0], P.blocks0};
  ASSERT_EQ(P.slots[0], 0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  auto dq = on_device(q), dkv = on_device(kv);
  auto dsel = on_device(sel);
  auto out = nan_output(static_cast<size_t>(T * H * kDim)), out_block = nan_output(static_cast<size_t>(T * H * kDim));
  be->sparse_attention_v41(dq.view({T, H, kDim}), dkv.view({T, kDim}), P.window(), &P.comp(),
                                       dsel.view({T, 3}), sink.data(), static_cast<float>(scale), std::span(&seq, 1),
                                       P.storage, out.view({T, H, kDim}));
  be->block_attention_v41(dq.view({T, H, kDim}), dkv.view({T, kDim}), P.window(), sink.data(),
                                      static_cast<float>(scale), std::span(&seq, 1), P.storage,
                                      out_block.view({T, H, kDim}));
  const float* ring = host.slot(seq.slot) + P.window().slot_offset;
  std::vector<double> want, want_block;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = start + t;
    std::vector<const float*> keys, block_keys;
    for (int64_t p = pos - kWindow + 1; p <= pos; ++p)
      keys.push_back(p < start ? ring + (p % kWindow) * kDim : kv.data() + (p - start) * kDim);
    for (int64_t j = 0; j < 3; ++j)
      if (sel[static_cast<size_t>(t * 3 + j)] >= 0) keys.push_back(host.entry(seq, P.comp(), sel[static_cast<size_t>(t * 3 + j)]));
    for (int64_t s = 0; s < kWindow; ++s) block_keys.push_back(ring + s * kDim);
    for (int64_t j = 0; j < count; ++j) block_keys.push_back(kv.data() + j * kDim);
    for (int64_t h = 0; h < H; ++h) {
      const auto o = ref_attend(q.data() + (t * H + h) * kDim, keys, scale, sink[static_cast<size_t>(h)]);
      const auto ob = ref_attend(q.data() + (t * H + h) * kDim, block_keys, scale, sink[static_cast<size_t>(h)]);
      want.insert(want.end(), o.begin(), o.end());
      want_block.insert(want_block.end(), ob.begin(), ob.end());
    }
  }
  const Diff d = relative_diff(out.download(), want), db = relative_diff(out_block.download(), want_block);
  EXPECT_LE(d.relative, 1e-2) << d.detail;  // bf16 outputs: one bf16 step of rounding either way
  EXPECT_LE(db.relative, 1e-2) << db.detail;
}

// Candidate source pins the newest block and keeps the best others; a filter scores only there.
TEST_P(BackendOps, IndexerV41CandidateBlocks) {
  Pool P(*be);
  const int64_t nh = 1, T = 1, pos = 15, visible = (pos + 1) / 2;  // 8 index keys, blocks of 2
  std::vector<float> block_host(static_cast<size_t>(P.layout.block_elems * 8), 0.0f);
  backend::StateStorage host = P.storage;
  host.blocks = block_host.data();
  const SeqSlice seq{0, T, pos, P.slots[0], P.blocks0};
  const std::vector<float> score = {0.5f, 3.0f, 1.0f, 0.25f, 2.0f, 2.5f, 0.125f, 0.75f};  // entry j's q . k
  for (int64_t j = 0; j < visible; ++j) host.entry(seq, *P.layout.layers[0].indexer, j)[0] = score[static_cast<size_t>(j)];
  be->copy_to_backend(P.storage.blocks, block_host.data(), block_host.size() * sizeof(float));
  std::vector<float> q(static_cast<size_t>(kDim), 0.0f);
  q[0] = 1.0f;
  auto dq = on_device(q), dw = on_device(std::vector<float>{1.0f});
  auto cand = DeviceI32::filled(*be, 2, -7), sel = DeviceI32::filled(*be, 3, -7);
  backend::IndexerV41Params p;
  p.top_k = 3;
  p.candidates = backend::CandidateRole::Source;
  p.candidate_blocks = 2;
  p.candidate_block_size = 2;
  be->indexer_select_v41(*P.layout.layers[0].indexer, dq.view({T, nh, kDim}), dw.view({T, nh}), p,
                                     std::span(&seq, 1), P.storage, cand.view({T, 2}), sel.view({T, 3}));
  // Block scores (max): 3, 1, 2.5, 0.75; block 3 (newest) pinned, then block 0.
  EXPECT_EQ(cand.download(), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(sel.download(), (std::vector<int32_t>{1, 4, 5}));  // the source itself is not filtered
  p.candidates = backend::CandidateRole::Filter;
  be->indexer_select_v41(*P.layout.layers[0].indexer, dq.view({T, nh, kDim}), dw.view({T, nh}), p,
                                     std::span(&seq, 1), P.storage, cand.view({T, 2}), sel.view({T, 3}));
  EXPECT_EQ(sel.download(), (std::vector<int32_t>{0, 1, 7}));  // only entries 0, 1, 6, 7 may win
}

TEST_P(BackendOps, EngramHashOverTwoSteps) {
  const int64_t max_ngram = 3, layers = 2, heads = 2, cols = 4, W = 2;
  const std::vector<int64_t> mult = {3, 5, 7, 11, 13, 17}, primes = {5, 7, 11, 13, 17, 19, 23, 29};
  const std::vector<int64_t> offsets = {0, 5, 12, 23, 0, 17, 36, 59};
  const backend::EngramHashParams p{max_ngram, layers, heads, 1, mult.data(), primes.data(), offsets.data()};
  const kv::StateLayout layout = kv::plan_layout({{W, 1, {}, {}}}, 8);
  kv::StatePool pool(layout, 1, 2, be->allocator());
  const int32_t slot = *pool.allocate_slot();
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.allocate_blocks(2, blocks));
  const std::vector<int32_t> ids = {4, 9, 2, 7, 7, 3};
  std::vector<int32_t> got;
  for (int64_t start : {int64_t{0}, int64_t{4}}) {
    const int64_t count = start == 0 ? 4 : 2;
    const SeqSlice seq{0, count, start, slot, blocks};
    auto out = DeviceI32::filled(*be, static_cast<size_t>(layers * count * cols), -7);
    be->engram_hash(p, layout.layers[0].window, std::span(ids).subspan(static_cast<size_t>(start), static_cast<size_t>(count)),
                                {}, std::span(&seq, 1), pool.storage(), out.view({layers, count, cols}));
    const auto o = out.download();
    for (int64_t i = 0; i < count; ++i)
      for (int64_t l = 0; l < layers; ++l)
        for (int64_t c = 0; c < cols; ++c) got.push_back(o[static_cast<size_t>((l * count + i) * cols + c)]);
  }
  std::vector<int32_t> want;  // [position][layer][column]
  for (int64_t pos = 0; pos < 6; ++pos)
    for (int64_t l = 0; l < layers; ++l) {
      auto id = [&](int64_t s) { return pos - s < 0 ? int64_t{1} : int64_t{ids[static_cast<size_t>(pos - s)]}; };
      int64_t rolling = id(0) * mult[static_cast<size_t>(l * 3)];
      for (int64_t s = 1; s < max_ngram; ++s) {
        rolling ^= id(s) * mult[static_cast<size_t>(l * 3 + s)];
        for (int64_t h = 0; h < heads; ++h) {
          const auto c = static_cast<size_t>(l * cols + (s - 1) * heads + h);
          want.push_back(static_cast<int32_t>(rolling % primes[c] + offsets[c]));
        }
      }
    }
  EXPECT_EQ(got, want);
}

// A bounded replay after a prefix hit: the slot's ring holds another sequence's ids and the
// window floor is the replay's start, so the n-gram history below it comes from floor_history
// (the sequence's earlier tokens); the hash ids then equal those of the sequence computed from
// position 0. Without floor_history the history below the floor is padding, as at a start.
TEST_P(BackendOps, EngramHashBelowAReplayFloorTakesTheGivenHistory) {
  const int64_t max_ngram = 3, layers = 1, heads = 2, cols = 4, W = 2;
  const std::vector<int64_t> mult = {3, 5, 7}, primes = {5, 7, 11, 13}, offsets = {0, 5, 12, 23};
  const backend::EngramHashParams p{max_ngram, layers, heads, 1, mult.data(), primes.data(), offsets.data()};
  const kv::StateLayout layout = kv::plan_layout({{W, 1, {}, {}}}, 8);
  kv::StatePool pool(layout, 2, 4, be->allocator());
  const std::vector<int32_t> ids = {4, 9, 2, 7, 7, 3};
  auto hash = [&](int32_t slot, int64_t start, int64_t floor, std::span<const int32_t> floor_history,
                  std::vector<int32_t>& blocks) {
    const int64_t count = static_cast<int64_t>(ids.size()) - start;
    SeqSlice seq{0, count, start, slot, blocks};
    seq.window_floor = floor;
    auto out = DeviceI32::filled(*be, static_cast<size_t>(layers * count * cols), -7);
    be->engram_hash(p, layout.layers[0].window, std::span(ids).subspan(static_cast<size_t>(start)), floor_history,
                    std::span(&seq, 1), pool.storage(), out.view({layers, count, cols}));
    return out.download();
  };
  std::vector<int32_t> blocks_a, blocks_b;
  ASSERT_TRUE(pool.allocate_blocks(1, blocks_a));
  ASSERT_TRUE(pool.allocate_blocks(1, blocks_b));
  const int32_t a = *pool.allocate_slot(), b = *pool.allocate_slot();
  std::vector<int32_t> full;
  full = hash(a, 0, 0, {}, blocks_a);  // positions 0-5 from the start
  // Slot b's ring: another sequence's ids (this one's from the start, shifted), then a replay
  // from position 3 with the floor there.
  const std::vector<int32_t> other = {8, 8};
  const int64_t other_start = 0;
  {
    SeqSlice seq{0, 2, other_start, b, blocks_b};
    auto out = DeviceI32::filled(*be, static_cast<size_t>(layers * 2 * cols), -7);
    be->engram_hash(p, layout.layers[0].window, other, {}, std::span(&seq, 1), pool.storage(),
                    out.view({layers, 2, cols}));
  }
  const std::vector<int32_t> history = {ids[1], ids[2]};  // positions 1 and 2
  const auto replayed = hash(b, 3, 3, history, blocks_b);
  const std::vector<int32_t> want(full.begin() + 3 * cols, full.end());
  EXPECT_EQ(replayed, want);
  const auto padded = hash(b, 3, 3, {}, blocks_b);
  EXPECT_NE(padded, want) << "without floor_history the history below the floor must be padding";
  EXPECT_EQ(std::vector<int32_t>(padded.begin() + 2 * cols, padded.end()),
            std::vector<int32_t>(want.begin() + 2 * cols, want.end()))
      << "from position 5 on the history is the step's own tokens";
  const std::vector<int32_t> short_history = {ids[2]};
  EXPECT_THROW(hash(b, 3, 3, short_history, blocks_b), Error);
}

TEST_P(BackendOps, EngramGate) {
  const int64_t T = 3, n = 2, D = 16;
  const auto x = randoms(static_cast<size_t>(T * n * D)), kv = randoms(static_cast<size_t>(T * (n + 1) * D));
  auto& w = keep(randoms(static_cast<size_t>(n * D)));
  auto dx = on_device(x), dkv = on_device(kv);
  be->engram_gate(dx.view({T, n, D}), dkv.view({T, (n + 1) * D}), w.data(), 1e-6f);
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i) {
      const float* h = x.data() + (t * n + i) * D;
      const float* k = kv.data() + (t * (n + 1) + i) * D;
      const float* v = kv.data() + (t * (n + 1) + n) * D;
      double hh = 0, kk = 0, dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        hh += double{h[d]} * h[d];
        kk += double{k[d]} * k[d];
        dot += double{h[d]} * w[static_cast<size_t>(i * D + d)] * k[d];
      }
      const double s = dot / std::sqrt(hh / D + 1e-6) / std::sqrt(kk / D + 1e-6) / std::sqrt(double(D));
      const double g = 1.0 / (1.0 + std::exp(-std::copysign(std::sqrt(std::max(std::fabs(s), 1e-6)), s)));
      for (int64_t d = 0; d < D; ++d) want.push_back(ref_bf16(h[d] + g * v[d]));
    }
  const Diff d = relative_diff(dx.download(), want);
  EXPECT_LE(d.relative, 1e-2) << d.detail;  // bf16 outputs
}


// V4.1 SwiGLU in the reference's bf16: each GEMM output rounded, the routing weight applied before w2,
// routed experts summed in ascending id, then the shared expert, the sum rounded.
TEST_P(BackendOps, MoeExpertsV41Bf16Semantics) {
  const int64_t T = 7, D = 32, I = 16, E = 4, K = 2;
  const double limit = 1.5;
  struct Ex {
    StoredWeight w1, w2, w3;
  };
  auto& experts = keep(std::vector<Ex>{});
  for (int64_t e = 0; e <= E; ++e)  // the last one is the shared expert
    experts.push_back({make_weight(rng, DType::BF16, I, D), make_weight(rng, DType::BF16, D, I),
                       make_weight(rng, DType::BF16, I, D)});
  std::vector<backend::SwigluExpert> views;
  for (int64_t e = 0; e < E; ++e) views.push_back({&experts[e].w1.w, &experts[e].w2.w, &experts[e].w3.w});
  const backend::SwigluExpert shared{&experts[E].w1.w, &experts[E].w2.w, &experts[E].w3.w};
  std::vector<float> x = randoms(static_cast<size_t>(T * D));
  for (auto& v : x) v = static_cast<float>(ref_bf16(v));  // activations are bf16 values
  std::vector<int32_t> chosen;
  for (int64_t t = 0; t < T; ++t) chosen.insert(chosen.end(), {static_cast<int32_t>(t % E), static_cast<int32_t>((t + 1 + t / E) % E)});
  const auto weights = randoms(static_cast<size_t>(T * K));
  auto dx = on_device(x), dw = on_device(weights);
  auto dc = on_device(chosen);
  auto out = nan_output(static_cast<size_t>(T * D));
  be->moe_experts_v41({views, shared, static_cast<float>(limit)}, {}, dx.view({T, D}), dc.view({T, K}),
                                  dw.view({T, K}), out.view({T, D}));
  auto expert = [&](const Ex& e, const float* xt, double weight) {
    std::vector<double> h(static_cast<size_t>(I)), y(static_cast<size_t>(D), 0.0);
    for (int64_t i = 0; i < I; ++i) {
      double g = 0, u = 0;
      for (int64_t d = 0; d < D; ++d) g += e.w1.at(i, d) * xt[d], u += e.w3.at(i, d) * xt[d];
      g = std::min(ref_bf16(g), limit);
      u = std::clamp(ref_bf16(u), -limit, limit);
      h[static_cast<size_t>(i)] = ref_bf16(weight * (g / (1.0 + std::exp(-g))) * u);
    }
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t i = 0; i < I; ++i) y[static_cast<size_t>(d)] += e.w2.at(d, i) * h[static_cast<size_t>(i)];
      y[static_cast<size_t>(d)] = ref_bf16(y[static_cast<size_t>(d)]);
    }
    return y;
  };
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> acc(static_cast<size_t>(D), 0.0);
    std::vector<int64_t> order = {0, 1};
    if (chosen[t * K + 1] < chosen[t * K]) std::swap(order[0], order[1]);
    for (int64_t k : order) {
      const auto y = expert(experts[static_cast<size_t>(chosen[t * K + k])], x.data() + t * D, weights[t * K + k]);
      for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += y[static_cast<size_t>(d)];
    }
    const auto ys = expert(experts[E], x.data() + t * D, 1.0);
    for (int64_t d = 0; d < D; ++d) want.push_back(ref_bf16(acc[static_cast<size_t>(d)] + ys[static_cast<size_t>(d)]));
  }
  const Diff d = relative_diff(out.download(), want);
  EXPECT_LE(d.relative, 2e-2) << d.detail;  // bf16 roundings at every stage
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
