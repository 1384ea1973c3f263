// test_backend_ops, state ops: compress, indexer_select and store_window of every
// registered backend against double-precision loops written from backend/backend.h, backend/state.h
// and MODELS.md, over several sequences per step with out-of-order block tables and slots.
//
// Pools start filled with a NaN sentinel: memory an op must not read poisons its output, and
// memory it must not write is checked bit for bit afterwards. The pools live in the backend's memory
// (kv::StatePool on Backend::allocator()); tests build their contents in a host mirror, upload it,
// and download it again to check what the ops wrote.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "backend/cpu/ops.h"  // torch_top_k_indices: the documented TopKTies::Reference selection
#include "backend_ops_state_util.h"

namespace deepinfer::backend_ops_test {
namespace {


// A sequence of the test: its slot, its (out-of-order) block table and its full token history.
struct TestSeq {
  int32_t slot;
  std::vector<int32_t> blocks;
  int64_t length;
};

const std::vector<TestSeq> kSeqs = {
    {2, {9, 3, 14, 1}, 27},
    {0, {0, 12, 5}, 21},
    {3, {7, 2}, 10},
};
constexpr int64_t kSlots = 4, kBlocks = 16;

// The steps: (sequence, first position, tokens) in the order the step lists them. Starts fall mid-
// window, single decodes sit between prefill chunks, and the order of sequences changes.
using Chunk = std::tuple<size_t, int64_t, int64_t>;
const std::vector<std::vector<Chunk>> kSchedule = {
    {{0, 0, 5}, {1, 0, 3}, {2, 0, 1}},
    {{2, 1, 1}, {0, 5, 1}, {1, 3, 10}},
    {{1, 13, 1}, {0, 6, 21}, {2, 2, 8}},
    {{1, 14, 7}},
};

std::vector<SeqSlice> slices_of(const std::vector<Chunk>& step) {
  std::vector<SeqSlice> out;
  int64_t begin = 0;
  for (const auto& [s, start, count] : step) {
    out.push_back({begin, count, start, kSeqs[s].slot, kSeqs[s].blocks});
    begin += count;
  }
  return out;
}

// Entry e of compressor c of sequence s, as the documented block layout places it.
int64_t entry_offset(const TestSeq& s, const CompressorLayout& c, int64_t e, const kv::StateLayout& layout) {
  return s.blocks[static_cast<size_t>(e / c.entries_per_block)] * layout.block_elems + c.block_offset +
         (e % c.entries_per_block) * c.head_dim;
}

// ---------------------------------------------------------------- compress

// Entries of one sequence from its whole history (MODELS.md): entry w = per channel softmax over the
// window's slots of (gate + ape) weighting kv; CSA's slots are window w-1's first half (channels
// [0, hd), none before window 0) then window w's second half (channels [hd, 2hd)); then RMSNorm with
// the weight, then rope at position w * rate.
std::vector<double> ref_compress(const CompressorLayout& c, const std::vector<float>& kv, const std::vector<float>& gate,
                                 const std::vector<float>& ape, const std::vector<float>& norm, float eps,
                                 std::span<const float> inv_freq, int64_t tokens) {
  const int64_t rate = c.rate, hd = c.head_dim, width = c.width;
  std::vector<double> out;
  for (int64_t w = 0; w < tokens / rate; ++w) {
    std::vector<double> entry(static_cast<size_t>(hd));
    for (int64_t ch = 0; ch < hd; ++ch) {
      std::vector<double> logit, value;
      if (c.overlap && w > 0)
        for (int64_t s = 0; s < rate; ++s) {
          const int64_t row = (w - 1) * rate + s;
          logit.push_back(static_cast<double>(gate[row * width + ch]) + ape[s * width + ch]);
          value.push_back(kv[row * width + ch]);
        }
      const int64_t col = c.overlap ? hd + ch : ch;
      for (int64_t s = 0; s < rate; ++s) {
        const int64_t row = w * rate + s;
        logit.push_back(static_cast<double>(gate[row * width + col]) + ape[s * width + col]);
        value.push_back(kv[row * width + col]);
      }
      ref_softmax(logit);
      double acc = 0;
      for (size_t i = 0; i < logit.size(); ++i) acc += logit[i] * value[i];
      entry[static_cast<size_t>(ch)] = acc;
    }
    double ss = 0;
    for (double v : entry) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hd) + eps);
    for (int64_t ch = 0; ch < hd; ++ch) entry[static_cast<size_t>(ch)] *= inv * norm[static_cast<size_t>(ch)];
    ref_rope(entry.data(), hd, inv_freq, 1.0f, w * rate, false);
    out.insert(out.end(), entry.begin(), entry.end());
  }
  return out;
}

TEST_P(BackendOps, CompressOverlappingAndNot) {
  const kv::StateLayout layout = test_layout();
  struct Which {
    const char* label;
    CompressorLayout c;
  };
  const std::vector<Which> compressors = {{"CSA main (overlap, rate 4)", *layout.layers[1].compressor},
                                          {"CSA indexer keys (overlap, rate 4)", *layout.layers[1].indexer},
                                          {"HCA (rate 8)", *layout.layers[2].compressor},
                                          {"non-overlapping rate 4", *layout.layers[3].compressor}};
  for (const auto& [label, c] : compressors) {
    SCOPED_TRACE(label);
    const int64_t width = c.width, hd = c.head_dim;
    const auto inv_freq = make_inv_freq(hd / 4, 10000.0);  // rope on the trailing half of an entry
    const auto ape = randoms(static_cast<size_t>(c.rate * width)), norm = randoms(static_cast<size_t>(hd));
    const float eps = 1e-6f;
    std::vector<std::vector<float>> kv, gate;
    for (const auto& s : kSeqs) {
      kv.push_back(randoms(static_cast<size_t>(s.length * width)));
      gate.push_back(randoms(static_cast<size_t>(s.length * width), 3.0f));  // peaked softmaxes
    }
    std::vector<std::vector<double>> want;
    for (size_t i = 0; i < kSeqs.size(); ++i)
      want.push_back(ref_compress(c, kv[i], gate[i], ape, norm, eps, inv_freq, kSeqs[i].length));

    Pools pools(*be, layout, kSlots, kBlocks);
    std::vector<int64_t> done(kSeqs.size(), 0);
    for (size_t step = 0; step < kSchedule.size(); ++step) {
      const auto seqs = slices_of(kSchedule[step]);
      std::vector<float> step_kv, step_gate;
      for (const auto& [s, start, count] : kSchedule[step]) {
        ASSERT_EQ(start, done[s]) << "test bug: schedule gap";
        step_kv.insert(step_kv.end(), kv[s].begin() + start * width, kv[s].begin() + (start + count) * width);
        step_gate.insert(step_gate.end(), gate[s].begin() + start * width, gate[s].begin() + (start + count) * width);
        done[s] += count;
      }
      const auto T = static_cast<int64_t>(step_kv.size()) / width;
      const auto slots_before = pools.slots;  // the mirror holds what the backend holds
      const auto d_kv = on_device(step_kv), d_gate = on_device(step_gate);
      be->compress(c, {ape.data(), norm.data(), eps}, backend::RopeFreqs{inv_freq, 1.0f}, d_kv.view({T, width}),
                   d_gate.view({T, width}), seqs, pools.storage);
      pools.download();

      // Every completed entry so far matches; every other block element is untouched.
      std::vector<bool> written(pools.blocks.size(), false);
      for (size_t s = 0; s < kSeqs.size(); ++s) {
        const int64_t entries = done[s] / c.rate;
        std::vector<float> got;
        for (int64_t e = 0; e < entries; ++e) {
          const int64_t off = entry_offset(kSeqs[s], c, e, layout);
          got.insert(got.end(), pools.blocks.begin() + off, pools.blocks.begin() + off + hd);
          std::fill(written.begin() + off, written.begin() + off + hd, true);
        }
        const std::vector<double> expect(want[s].begin(), want[s].begin() + entries * hd);
        EXPECT_CLOSE(got, expect, "entries of sequence " + std::to_string(s) + " after step " + std::to_string(step));
      }
      for (size_t i = 0; i < pools.blocks.size(); ++i)
        if (!written[i]) {
          ASSERT_TRUE(same_bits(pools.blocks[i], kSentinel)) << "step " << step << " wrote block element " << i
                                                             << " outside its completed entries";
        }
      // Slots: only this compressor's state of the step's sequences may change.
      std::set<int32_t> stepping;
      for (const auto& sl : seqs) stepping.insert(sl.slot);
      for (int64_t slot = 0; slot < kSlots; ++slot)
        for (int64_t i = 0; i < layout.slot_elems; ++i) {
          const bool own = stepping.count(static_cast<int32_t>(slot)) && i >= c.slot_offset &&
                           i < c.slot_offset + c.slot_elems();
          const size_t at = static_cast<size_t>(slot * layout.slot_elems + i);
          if (!own) {
            ASSERT_TRUE(same_bits(pools.slots[at], slots_before[at]))
                << "step " << step << " wrote slot " << slot << " element " << i << " outside its compressor state";
          }
        }
    }
  }
}

// ---------------------------------------------------------------- indexer_select

// The expected selection is a top-k of the visible entries (j < (pos + 1) / rate), checked with the
// tie policy; see expect_top_k in backend_ops_test.cpp (repeated here in its indexer form).
void expect_selection(const int32_t* row, int64_t top_k, const std::vector<double>& scores, int64_t held,
                      backend::TopKTies ties, const std::string& what) {
  const auto visible = static_cast<int64_t>(scores.size());
  std::vector<int32_t> got;
  int64_t i = 0;
  for (; i < top_k && row[i] >= 0; ++i) got.push_back(row[i]);
  for (; i < top_k; ++i) ASSERT_EQ(row[i], -1) << what << ": entries after the first -1";
  ASSERT_TRUE(std::is_sorted(got.begin(), got.end())) << what << ": selection not sorted by entry";
  ASSERT_EQ(static_cast<int64_t>(got.size()), std::min(top_k, visible)) << what;
  const std::set<int32_t> chosen(got.begin(), got.end());
  ASSERT_EQ(chosen.size(), got.size()) << what << ": repeated entry";
  const double slack = 1e-5;
  bool near_tie = false;
  for (int32_t a : got) {
    ASSERT_TRUE(a >= 0 && a < visible) << what << ": entry " << a << " not visible (" << visible << " are)";
    for (int32_t b = 0; b < visible; ++b) {
      if (chosen.count(b)) continue;
      EXPECT_GE(scores[a], scores[b] - slack) << what << ": chose " << a << " (" << scores[a] << ") over " << b << " ("
                                              << scores[b] << ")";
      if (ties == backend::TopKTies::LowerIndex && scores[a] == scores[b]) {
        EXPECT_LT(a, b) << what << ": exact tie between " << a << " and " << b << " must go to the lower index";
      }
      if (scores[a] != scores[b] && std::fabs(scores[a] - scores[b]) <= slack) near_tie = true;
    }
  }
  if (ties == backend::TopKTies::Reference && !near_tie) {
    // The reference ranks every entry the sequence holds after the step, the hidden ones at -inf.
    std::vector<float> ranked(static_cast<size_t>(held), -INFINITY);
    for (int64_t j = 0; j < visible; ++j) ranked[static_cast<size_t>(j)] = static_cast<float>(scores[static_cast<size_t>(j)]);
    std::set<int32_t> want;
    for (int32_t j : cpu::torch_top_k_indices(ranked, top_k))
      if (j < visible) want.insert(j);
    EXPECT_EQ(chosen, want) << what << ": not the reference (torch.topk) selection";
  }
}

TEST_P(BackendOps, IndexerSelectBothTiePolicies) {
  // 2 heads of 8 values: relu zeros tie often; 40 heads of 6: head groups past the CUDA kernel's 16
  // (the last one partial), and entries past its 16-byte loads.
  for (const auto [nh, index_dim] : {std::pair<int64_t, int64_t>{2, kIndexDim}, {40, 6}}) {
    SCOPED_TRACE(std::to_string(nh) + " heads of " + std::to_string(index_dim));
    const kv::StateLayout layout = test_layout(index_dim);
    const CompressorLayout keys = *layout.layers[1].indexer;
    const int64_t ihd = keys.head_dim, rate = keys.rate;
    // (slot, blocks, start, count): a prefill from 0 (its first tokens see nothing), a chunk starting
    // mid-window, a decode far in, on out-of-order tables; and a decode 200 entries in whose keys are
    // zero but for entries 77 and 160 (copies of its head-0 query, so they score above 0): the other
    // 199 tie at 0 and the tie order decides (top_k 3 ranks them as torch.topk's partial sort does,
    // top_k >= 4 as its nth_element; neither takes the lowest-indexed zeros). The prefill's 64 tokens
    // make the CUDA scoring kernel give each warp several entries (enough CTAs for 2 an SM on 132 SMs).
    enum class Weights { Positive, Mixed };
    struct Case {
      int32_t slot;
      std::vector<int32_t> blocks;
      int64_t start, count;
      Weights weights;
      bool sparse_keys = false;
    };
    std::vector<int32_t> long_table(101);
    for (size_t i = 0; i < long_table.size(); ++i) long_table[i] = static_cast<int32_t>(122 - i);
    const std::vector<Case> cases = {{1, {3, 0, 5, 2, 7, 6}, 40, 6, Weights::Positive},
                                     {0, {8, 1, 123, 124, 125, 126, 127, 128}, 0, 64, Weights::Mixed},
                                     {2, {4, 11, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, 105, 1, Weights::Positive},
                                     {3, long_table, 803, 1, Weights::Positive, true}};
    Pools pools(*be, layout, 4, 129);
    std::vector<SeqSlice> seqs;
    int64_t T = 0;
    for (const auto& c : cases) {
      seqs.push_back({T, c.count, c.start, c.slot, c.blocks});
      T += c.count;
    }
    auto q = randoms(static_cast<size_t>(T * nh * ihd));
    // Keys of every entry each sequence holds after the step, written where the layout says.
    for (size_t s = 0; s < cases.size(); ++s) {
      const SeqSlice& sl = seqs[s];
      for (int64_t e = 0; e < (sl.start + sl.count) / rate; ++e) {
        int64_t c = 0;
        const bool scored = e == 77 || e == 160;
        const float* q0 = q.data() + sl.begin * nh * ihd;  // the first token's head 0
        fill_entry(pools.host, sl, keys, e, [&] { return !cases[s].sparse_keys ? nonzero() : scored ? q0[c++] : 0.0f; });
      }
    }
    pools.upload();
    std::vector<float> head_weights(static_cast<size_t>(T * nh));
    for (size_t s = 0; s < cases.size(); ++s)
      for (int64_t t = seqs[s].begin; t < seqs[s].begin + seqs[s].count; ++t)
        for (int64_t h = 0; h < nh; ++h) {
          const float w = nonzero(2.0f);
          head_weights[static_cast<size_t>(t * nh + h)] = cases[s].weights == Weights::Positive ? std::fabs(w) : w;
        }
    const float head_weight_scale = 1.0f / std::sqrt(static_cast<float>(nh)), score_scale = 1.0f / std::sqrt(static_cast<float>(ihd));
    const auto d_q = on_device(q), d_head_weights = on_device(head_weights);
    const auto blocks_before = pools.blocks;
    for (auto ties : {backend::TopKTies::Reference, backend::TopKTies::LowerIndex})
      for (int64_t top_k : {3, 9, 16, 40}) {
        const std::string what = std::string(ties == backend::TopKTies::Reference ? "reference" : "lower-index") +
                                 " ties, top_k " + std::to_string(top_k);
        auto d_selected = DeviceI32::filled(*be, static_cast<size_t>(T * top_k), -7);
        be->indexer_select(keys, d_q.view({T, nh, ihd}), d_head_weights.view({T, nh}), head_weight_scale, score_scale,
                           top_k, ties, seqs, pools.storage, d_selected.view({T, top_k}));
        const auto selected = d_selected.download();
        for (const auto& sl : seqs)
          for (int64_t i = 0; i < sl.count; ++i) {
            const int64_t t = sl.begin + i, pos = sl.start + i;
            const int64_t held = (sl.start + sl.count) / rate, visible = std::min((pos + 1) / rate, held);
            std::vector<double> scores(static_cast<size_t>(visible));
            for (int64_t j = 0; j < visible; ++j) {
              const float* k = pools.host.entry(sl, keys, j);
              double s = 0;
              for (int64_t h = 0; h < nh; ++h) {
                double d = 0;
                for (int64_t c = 0; c < ihd; ++c) d += static_cast<double>(q[(t * nh + h) * ihd + c]) * k[c];
                s += std::max(d, 0.0) * score_scale * (static_cast<double>(head_weights[t * nh + h]) * head_weight_scale);
              }
              scores[static_cast<size_t>(j)] = s;
            }
            expect_selection(selected.data() + t * top_k, top_k, scores, held, effective_ties(*be, ties, backend::TopKSite::IndexerEntries),
                             what + ", token at position " + std::to_string(pos));
          }
        pools.download();
        ASSERT_TRUE(std::equal(pools.blocks.begin(), pools.blocks.end(), blocks_before.begin(), same_bits))
            << "indexer_select wrote the pools";
      }
  }
}

// ---------------------------------------------------------------- store_window

TEST_P(BackendOps, StoreWindowKeepsTheLastWindowRows) {
  const kv::StateLayout layout = test_layout();
  for (size_t layer : {0u, 1u}) {
    const backend::WindowLayout wl = layout.layers[layer].window;
    Pools pools(*be, layout, kSlots, 1);
    // Fewer tokens than the window, more than the window (wrapping twice), a decode.
    const std::vector<std::tuple<int32_t, int64_t, int64_t>> parts = {{3, 0, 3}, {1, 7, 12}, {0, 4, 1}};
    std::vector<SeqSlice> seqs;
    static const std::vector<int32_t> no_blocks = {0, 0, 0, 0};  // cover positions; unused by this op
    int64_t T = 0;
    for (const auto& [slot, start, count] : parts) {
      seqs.push_back({T, count, start, slot, no_blocks});
      T += count;
    }
    const auto kv = randoms(static_cast<size_t>(T * wl.head_dim));
    const auto d_kv = on_device(kv);
    const auto before = pools.slots;
    be->store_window(wl, d_kv.view({T, wl.head_dim}), seqs, pools.storage);
    pools.download();
    std::vector<float> want = before;
    for (const auto& sl : seqs)
      for (int64_t i = std::max<int64_t>(0, sl.count - wl.window); i < sl.count; ++i)
        std::copy_n(kv.begin() + (sl.begin + i) * wl.head_dim, wl.head_dim,
                    want.begin() + sl.slot * layout.slot_elems + wl.slot_offset + ((sl.start + i) % wl.window) * wl.head_dim);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(same_bits(pools.slots[i], want[i])) << "layer " << layer << " slot element " << i << ": got "
                                                      << pools.slots[i] << ", expected " << want[i];
  }
}

// ---------------------------------------------------------------- prefix-cache bounds

// Bounded replay after a prefix hit: compress must leave the entries of cached blocks alone (the
// window floor's side is in backend_ops_attention_test.cpp).
TEST_P(BackendOps, CompressLeavesCachedEntriesAlone) {
  const kv::StateLayout layout = test_layout();
  for (size_t layer : {1u, 2u}) {
    const CompressorLayout c = *layout.layers[layer].compressor;
    SCOPED_TRACE("layer " + std::to_string(layer));
    const int64_t width = c.width, hd = c.head_dim, length = 3 * kBlockTokens;
    const TestSeq seq{1, {3, 1, 4}, length};
    const auto inv_freq = make_inv_freq(hd / 4, 10000.0);
    const auto ape = randoms(static_cast<size_t>(c.rate * width)), norm = randoms(static_cast<size_t>(hd));
    const auto kv = randoms(static_cast<size_t>(length * width)), gate = randoms(static_cast<size_t>(length * width));
    const auto want = ref_compress(c, kv, gate, ape, norm, 1e-6f, inv_freq, length);
    // Replay of positions [4, 24) over a hit of one block: entries ending at or before 8 are cached.
    const int64_t start = 4, cached_until = kBlockTokens;
    Pools pools(*be, layout, kSlots, kBlocks);
    for (float& v : pools.slots) v = nonzero();  // finite: a wrongly computed entry would not look untouched
    pools.upload();
    std::vector<SeqSlice> seqs = {{0, length - start, start, seq.slot, seq.blocks}};
    seqs[0].window_floor = start;
    seqs[0].cached_until = cached_until;
    const std::vector<float> step_kv(kv.begin() + start * width, kv.end()), step_gate(gate.begin() + start * width, gate.end());
    const auto d_kv = on_device(step_kv), d_gate = on_device(step_gate);
    be->compress(c, {ape.data(), norm.data(), 1e-6f}, backend::RopeFreqs{inv_freq, 1.0f},
                 d_kv.view({length - start, width}), d_gate.view({length - start, width}), seqs, pools.storage);
    pools.download();
    for (int64_t e = 0; e < length / c.rate; ++e) {
      const int64_t off = entry_offset(seq, c, e, layout);
      const std::vector<float> got(pools.blocks.begin() + off, pools.blocks.begin() + off + hd);
      if ((e + 1) * c.rate <= cached_until) {
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return same_bits(v, kSentinel); }))
            << "entry " << e << " lies in a cached block but was written";
      } else if (e * c.rate >= start + (c.overlap ? c.rate : 0)) {  // its whole input is in the step
        EXPECT_CLOSE(got, std::vector<double>(want.begin() + e * hd, want.begin() + (e + 1) * hd),
                     "entry " + std::to_string(e));
      }
    }
  }
}

// ---------------------------------------------------------------- batch invariance

// Under batch_invariant a sequence's results must not depend on the other sequences of its step:
// each sequence run alone reproduces, bit for bit, its rows of the batched call.
class BackendOpsStateInvariant : public BackendOps {};

TEST_P(BackendOpsStateInvariant, SequencesAloneMatchTheBatchBitForBit) {
  const kv::StateLayout layout = test_layout();
  const backend::WindowLayout wl = layout.layers[1].window;
  const CompressorLayout comp = *layout.layers[1].compressor, keys = *layout.layers[1].indexer;
  const int64_t H = 3, hd = kHeadDim, nh = 2, ihd = keys.head_dim, top_k = 4;
  Pools pools(*be, layout, 4, 10);
  const std::vector<SeqSlice> seqs = attention_slices();
  const int64_t T = tokens_of(seqs);
  fill_step_state(pools.host, seqs, wl, {&comp, &keys}, [&] { return nonzero(); });
  pools.upload();
  auto q = randoms(static_cast<size_t>(T * H * hd)), kv = randoms(static_cast<size_t>(T * hd)),
       iq = randoms(static_cast<size_t>(T * nh * ihd)), hw = randoms(static_cast<size_t>(T * nh));
  const auto sink = randoms(static_cast<size_t>(H));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto d_q = on_device(q), d_kv = on_device(kv), d_iq = on_device(iq), d_hw = on_device(hw);
  auto d_selected = DeviceI32::filled(*be, static_cast<size_t>(T * top_k), -7);
  auto d_out = nan_output(static_cast<size_t>(T * H * hd));
  be->indexer_select(keys, d_iq.view({T, nh, ihd}), d_hw.view({T, nh}), 0.7f, 0.25f, top_k,
                     backend::TopKTies::LowerIndex, seqs, pools.storage, d_selected.view({T, top_k}));
  be->sparse_attention(d_q.view({T, H, hd}), d_kv.view({T, hd}), wl, &comp, d_selected.view({T, top_k}),
                       sink.data(), scale, seqs, pools.storage, d_out.view({T, H, hd}));
  const auto selected = d_selected.download();
  const auto out = d_out.download();
  for (const auto& sl : seqs) {
    const int64_t n = sl.count, b = sl.begin;
    const std::vector<SeqSlice> alone = {{0, n, sl.start, sl.slot, sl.blocks}};
    const auto slice = [&](const std::vector<float>& v, int64_t per_token) {
      return on_device(std::vector<float>(v.begin() + b * per_token, v.begin() + (b + n) * per_token));
    };
    const auto d_q1 = slice(q, H * hd), d_kv1 = slice(kv, hd), d_iq1 = slice(iq, nh * ihd), d_hw1 = slice(hw, nh);
    auto d_sel1 = DeviceI32::filled(*be, static_cast<size_t>(n * top_k), -7);
    auto d_out1 = nan_output(static_cast<size_t>(n * H * hd));
    be->indexer_select(keys, d_iq1.view({n, nh, ihd}), d_hw1.view({n, nh}), 0.7f, 0.25f, top_k,
                       backend::TopKTies::LowerIndex, alone, pools.storage, d_sel1.view({n, top_k}));
    const auto sel1 = d_sel1.download();
    EXPECT_TRUE(std::equal(sel1.begin(), sel1.end(), selected.begin() + b * top_k))
        << "indexer_select: sequence at slot " << sl.slot << " alone differs from the batch";
    be->sparse_attention(d_q1.view({n, H, hd}), d_kv1.view({n, hd}), wl, &comp, d_sel1.view({n, top_k}),
                         sink.data(), scale, alone, pools.storage, d_out1.view({n, H, hd}));
    const auto out1 = d_out1.download();
    EXPECT_TRUE(std::equal(out1.begin(), out1.end(), out.begin() + b * H * hd, same_bits))
        << "sparse_attention: sequence at slot " << sl.slot << " alone differs from the batch";
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOpsStateInvariant, testing::ValuesIn(invariant_backend_cases()), case_name);

}  // namespace
}  // namespace deepinfer::backend_ops_test
