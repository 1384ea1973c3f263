// test_backend_ops, stateless ops: every registered backend's dense and mHC ops against
// straightforward double-precision loops on fresh random inputs (the MoE ops are in
// backend_ops_moe_test.cpp, the state ops in backend_ops_state_test.cpp). Semantics:
// backend/backend.h and MODELS.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"  // torch_top_k_indices: the documented TopKTies::Reference selection
#include "backend_ops_util.h"

namespace deepinfer::backend_ops_test {
namespace {

using backend::MhcParams;
using backend::MhcWeights;

// ---------------------------------------------------------------- dense

struct LinearCase {
  DType dtype;
  Scales scales;
  int64_t block;
  const char* label;
};

TEST_P(BackendOps, LinearEveryWeightFormat) {
  const LinearCase cases[] = {
      {DType::F32, Scales::None, 0, "F32"},
      {DType::BF16, Scales::None, 0, "BF16"},
      {DType::F16, Scales::None, 0, "F16"},
      {DType::F8_E4M3, Scales::F32Blocks, 128, "FP8 with F32 128x128 scales"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 128, "FP8 with E8M0 128x128 scales"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 32, "FP8 with E8M0 32x32 scales"},
      {DType::F4_E2M1, Scales::E8M0Blocks, 32, "FP4 with E8M0 per 32"},
  };
  const int64_t rows = 200, cols = 160;  // neither a multiple of 128: partial scale blocks
  for (const auto& lc : cases) {
    const StoredWeight& w = keep(make_weight(rng, lc.dtype, rows, cols, lc.scales, lc.block));
    for (int64_t T : {1, 2, 3, 70}) {  // GEMV-sized and GEMM-sized calls
      const auto x = randoms(static_cast<size_t>(T * cols));
      const auto dx = on_device(x);
      auto y = nan_output(static_cast<size_t>(T * rows));
      be->linear(w.w, dx.view({T, cols}), y.view({T, rows}));
      EXPECT_CLOSE(y.download(), ref_linear(w, x, T), std::string(lc.label) + " T=" + std::to_string(T));
    }
  }
}

// The GEMM kernels' paths: row chunks (T 1, 3, 17, 128), outputs not a multiple of a CTA's, a
// split K (1056 columns: several 512-byte slabs, not a multiple of 128) and layouts the vector path
// does not take (100 columns: not a multiple of 8 / 16).
TEST_P(BackendOps, LinearShapesAndKernelPaths) {
  const LinearCase cases[] = {
      {DType::F32, Scales::None, 0, "F32"},
      {DType::BF16, Scales::None, 0, "BF16"},
      {DType::F16, Scales::None, 0, "F16"},
      {DType::F8_E4M3, Scales::F32Blocks, 128, "FP8 with F32 128x128 scales"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 128, "FP8 with E8M0 128x128 scales"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 40, "FP8 with E8M0 40x40 scales"},
      {DType::F4_E2M1, Scales::E8M0Blocks, 32, "FP4 with E8M0 per 32"},
  };
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{77, 1056}, std::pair<int64_t, int64_t>{45, 100}}) {
    for (const auto& lc : cases) {
      if (lc.dtype == DType::F4_E2M1 && cols % 32 != 0) continue;  // FP4 scales cover whole 32s
      const StoredWeight& w = keep(make_weight(rng, lc.dtype, rows, cols, lc.scales, lc.block));
      for (int64_t T : {1, 3, 17, 128}) {
        const auto x = randoms(static_cast<size_t>(T * cols));
        const auto dx = on_device(x);
        auto y = nan_output(static_cast<size_t>(T * rows));
        be->linear(w.w, dx.view({T, cols}), y.view({T, rows}));
        EXPECT_CLOSE(y.download(), ref_linear(w, x, T),
                     std::string(lc.label) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " T=" +
                         std::to_string(T));
      }
    }
  }
}

// Scales whose product with the kernels' decode constants overflows a float, and FP8 NaN codes
// (0x7f): the reference decodings, so a NaN weight gives NaN outputs in its row only.
TEST_P(BackendOps, LinearLargeScalesAndNaNCodes) {
  const int64_t rows = 40;
  // 1024 columns: rows of whole 1024-column FP4 slabs (the V4-Flash experts' shape class).
  for (const int64_t cols : {int64_t{256}, int64_t{1024}})
  for (const auto& [dtype, T] : {std::pair{DType::F8_E4M3, int64_t{1}}, std::pair{DType::F8_E4M3, int64_t{3}},
                                 std::pair{DType::F4_E2M1, int64_t{1}}, std::pair{DType::F4_E2M1, int64_t{3}}}) {
    StoredWeight w = make_weight(rng, dtype, rows, cols, Scales::E8M0Blocks, 32);
    const int64_t scols = w.w.scale_cols;
    // FP8: block (0, 1) = rows 0..31, columns 32..63 at 2^10; FP4: row 5, columns 64..95 at 2^3.
    const size_t si = dtype == DType::F8_E4M3 ? 1 : static_cast<size_t>(5 * scols + 2);
    const auto code = static_cast<uint8_t>(dtype == DType::F8_E4M3 ? 127 + 10 : 127 + 3);
    const double factor = std::ldexp(1.0, code - static_cast<int>(static_cast<uint8_t>(w.scale[si])));
    w.scale[si] = static_cast<std::byte>(code);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const bool hit = dtype == DType::F8_E4M3 ? (r < 32 && c >= 32 && c < 64) : (r == 5 && c >= 64 && c < 96);
        if (hit) w.values[static_cast<size_t>(r * cols + c)] *= factor;
      }
    const int64_t nan_row = 7;
    if (dtype == DType::F8_E4M3) {
      w.data[static_cast<size_t>(nan_row * cols + 3)] = std::byte{0x7f};
      w.values[static_cast<size_t>(nan_row * cols + 3)] = 0.0;  // the row is checked for NaN instead
    }
    const StoredWeight& kw = keep(std::move(w));
    const auto x = randoms(static_cast<size_t>(T * cols));
    const auto dx = on_device(x);
    auto y = nan_output(static_cast<size_t>(T * rows));
    be->linear(kw.w, dx.view({T, cols}), y.view({T, rows}));
    auto got = y.download();
    auto want = ref_linear(kw, x, T);
    if (dtype == DType::F8_E4M3)
      for (int64_t t = 0; t < T; ++t) {
        const auto i = static_cast<size_t>(t * rows + nan_row);
        EXPECT_TRUE(std::isnan(got[i])) << "FP8 NaN code: output " << i << " is " << got[i];
        got[i] = 0.0f;
        want[i] = 0.0;
      }
    EXPECT_CLOSE(got, want, std::string("large scales ") + std::string(dtype_name(dtype)) + " T=" + std::to_string(T));
  }
}

// Shapes of the CUDA tensor-core GEMM's schedules (BF16, FP8 without scales / with E8M0 blocks,
// FP4): few rows (one 8-token tile, split K over the warps), 9 / 33 rows (2 and 8 tiles), and 600
// rows on 2048 outputs (the "seq" schedule: each warp walks every K slice), and 100 rows of a 128-column
// weight (one slice: the seq schedule with several 16-row groups a warp). Every row must also be
// bit-identical to the row computed alone where the backend keeps bits under batching (always with
// batch invariance; CUDA's default mode picks the GEMM by the number of rows unless DEEPINFER_TC_GEMM
// pins it, and tools/gpu/test.sh runs these tests with it pinned to the tensor cores too).
TEST_P(BackendOps, LinearTensorCoreShapesAndRowsAlone) {
  const LinearCase cases[] = {
      {DType::BF16, Scales::None, 0, "BF16"},
      {DType::F8_E4M3, Scales::None, 0, "FP8 without scales"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 128, "FP8 with E8M0 128x128 scales"},
      {DType::F4_E2M1, Scales::E8M0Blocks, 32, "FP4 with E8M0 per 32"},
  };
  const int64_t rows = 2048;
  // 640 columns: 5 slabs in 4 slices of 2 (the last one empty), each its own CTAs under the grid
  // split (the default on the tensor cores; tools/gpu/test.sh), summed in slice order.
  const std::pair<int64_t, std::vector<int64_t>> shapes[] = {{256, {1, 9, 33, 600}}, {128, {100}}, {640, {9, 40}}};
  for (const auto& [cols, counts] : shapes)
  for (const auto& lc : cases) {
    const StoredWeight& w = keep(make_weight(rng, lc.dtype, rows, cols, lc.scales, lc.block));
    for (int64_t T : counts) {
      const auto x = randoms(static_cast<size_t>(T * cols));
      const auto dx = on_device(x);
      auto y = nan_output(static_cast<size_t>(T * rows));
      be->linear(w.w, dx.view({T, cols}), y.view({T, rows}));
      const auto got = y.download();
      EXPECT_CLOSE(got, ref_linear(w, x, T), std::string(lc.label) + " x " + std::to_string(cols) + " T=" + std::to_string(T));
      if (!be->batching_keeps_bits()) continue;
      for (int64_t t : {int64_t{0}, T / 2, T - 1}) {
        const auto dxr = on_device(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
        auto d_yr = nan_output(static_cast<size_t>(rows));
        be->linear(w.w, dxr.view({1, cols}), d_yr.view({1, rows}));
        const auto yr = d_yr.download();
        EXPECT_TRUE(std::equal(yr.begin(), yr.end(), got.begin() + t * rows))
            << lc.label << ": row " << t << " of " << T << " alone differs from the batch";
      }
    }
  }
}

// Decode (1-2 rows) on weights with more CTA jobs than the CUDA device holds at once (9,000 rows:
// 282 jobs of 32 rows): the CUDA streaming kernel walks several jobs per CTA, loading the next
// job's weights during this one's arithmetic. Rows must match the reference and, bit for bit, the
// same rows computed in a batch of 5 (the many-row tile) where the backend keeps bits under
// batching. FP4 also at 1024 columns (whole
// 1024-column slabs, a lane chunk per 32-column scale block).
TEST_P(BackendOps, LinearDecodeManyJobsPerCta) {
  const LinearCase cases[] = {
      {DType::BF16, Scales::None, 0, "BF16"},
      {DType::F8_E4M3, Scales::E8M0Blocks, 128, "FP8 with E8M0 128x128 scales"},
      {DType::F4_E2M1, Scales::E8M0Blocks, 32, "FP4 with E8M0 per 32"},
  };
  const int64_t rows = 9000, B = 5;
  for (const int64_t cols : {int64_t{512}, int64_t{1024}})
  for (const auto& lc : cases) {
    if (cols == 1024 && lc.dtype != DType::F4_E2M1) continue;
    const StoredWeight& w = keep(make_weight(rng, lc.dtype, rows, cols, lc.scales, lc.block));
    const auto x = randoms(static_cast<size_t>(B * cols));
    const auto dx = on_device(x);
    auto d_all = nan_output(static_cast<size_t>(B * rows));
    be->linear(w.w, dx.view({B, cols}), d_all.view({B, rows}));
    const auto all = d_all.download();
    for (int64_t T : {1, 2}) {
      const std::vector<float> xt(x.begin() + 2 * cols, x.begin() + (2 + T) * cols);  // batch rows 2 .. 2 + T
      const auto dxt = on_device(xt);
      auto y = nan_output(static_cast<size_t>(T * rows));
      be->linear(w.w, dxt.view({T, cols}), y.view({T, rows}));
      const auto got = y.download();
      const std::string label = std::string(lc.label) + " x " + std::to_string(cols) + " T=" + std::to_string(T);
      EXPECT_CLOSE(got, ref_linear(w, xt, T), label);
      if (!be->batching_keeps_bits()) continue;  // (CUDA's default mode: FP8 decode on the tensor cores)
      EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + 2 * rows))
          << label << ": the row(s) alone differ from the batch of " << B;
    }
  }
}

// FP8 decode as V4 runs it (1-2 rows, 128x128 E8M0 / F32 scales, thousands of columns), on inputs
// that stress a kernel which splits x into narrower parts: magnitudes from 1e-6 to 1e4 in the same
// row (CUDA's default mode puts these calls on the tensor-core GEMV, whose f16 parts need each x
// block scaled by a power of two), a block scale of 2^20, an odd number of 64-column steps, a
// grouped weight whose groups each get their own x, and an FP8 NaN code (NaN in its row only).
TEST_P(BackendOps, LinearFp8DecodeWideRangeActivations) {
  // weight rows x columns, groups (grouped_linear: x has groups * columns)
  // (2048 x 4096: enough CTA jobs that CUDA's default mode picks the tensor-core GEMV by itself;
  // tools/gpu/test.sh also runs the smaller shapes with DEEPINFER_DECODE_GEMV=1.)
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {96, 4096, 1}, {48, 1088, 1}, {4 * 128, 512, 4}, {2048, 4096, 1}};
  for (const Scales sc : {Scales::E8M0Blocks, Scales::F32Blocks, Scales::None})
  for (const auto& [rows, cols, groups] : shapes) {
    StoredWeight w = make_weight(rng, DType::F8_E4M3, rows, cols, sc, sc == Scales::None ? 0 : 128);
    if (sc == Scales::E8M0Blocks) {  // block (0, 1) at 2^20
      const double factor = std::ldexp(1.0, 127 + 20 - static_cast<int>(static_cast<uint8_t>(w.scale[1])));
      w.scale[1] = static_cast<std::byte>(127 + 20);
      for (int64_t r = 0; r < std::min<int64_t>(rows, 128); ++r)
        for (int64_t c = 128; c < std::min<int64_t>(cols, 256); ++c) w.values[static_cast<size_t>(r * cols + c)] *= factor;
    }
    const int64_t nan_row = 5;
    w.data[static_cast<size_t>(nan_row * cols + 7)] = std::byte{0x7f};
    w.values[static_cast<size_t>(nan_row * cols + 7)] = 0.0;  // the row is checked for NaN instead
    const StoredWeight& kw = keep(std::move(w));
    const int64_t R = rows / groups, X = groups * cols;
    for (int64_t T : {1, 2}) {
      auto x = randoms(static_cast<size_t>(T * X));
      std::uniform_int_distribution<int> octave(-20, 13);
      for (auto& v : x) v = std::ldexp(v, octave(rng));
      auto got = run_linear(kw.w, groups, x, T);
      std::vector<double> want(static_cast<size_t>(T * rows));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          double s = 0;
          for (int64_t c = 0; c < cols; ++c) s += kw.at(r, c) * x[static_cast<size_t>(t * X + (r / R) * cols + c)];
          want[static_cast<size_t>(t * rows + r)] = s;
        }
      const std::string label = "FP8 " + std::to_string(rows) + "x" + std::to_string(cols) + " groups " +
                                std::to_string(groups) + " scales " + std::to_string(static_cast<int>(sc)) + " T=" +
                                std::to_string(T);
      for (int64_t t = 0; t < T; ++t) {
        const auto i = static_cast<size_t>(t * rows + nan_row);
        EXPECT_TRUE(std::isnan(got[i])) << label << ": FP8 NaN code, output " << i << " is " << got[i];
        got[i] = 0.0f;
        want[i] = 0.0;
      }
      EXPECT_CLOSE(got, want, label);
    }
  }
}

// Prefill-sized calls (300 rows) of every stored format, x spanning 34 octaves, a NaN code and a
// 2^20 block: CUDA's default mode runs them on the tensor-core GEMM, and tools/gpu/test.sh runs
// them through cuBLASLt (DEEPINFER_CUBLAS_GEMM=1), whose bf16 operands must keep float32 accuracy.
TEST_P(BackendOps, LinearManyRowsWideRangeActivations) {
  struct Case {
    DType dtype;
    Scales scales;
    int64_t rows, cols, groups;
  };
  const Case cases[] = {{DType::BF16, Scales::None, 192, 640, 1},
                        {DType::F8_E4M3, Scales::E8M0Blocks, 192, 640, 1},
                        {DType::F8_E4M3, Scales::None, 96, 384, 1},
                        {DType::F8_E4M3, Scales::F32Blocks, 96, 384, 1},  // not exact in bf16: our own GEMM
                        {DType::F4_E2M1, Scales::E8M0Blocks, 160, 512, 1},
                        {DType::F8_E4M3, Scales::E8M0Blocks, 4 * 64, 256, 4},
                        {DType::BF16, Scales::None, 64, 302, 1}};  // rows of neither 8 nor 4 columns' multiple
  const int64_t T = 300;
  for (const Case& k : cases) {
    const int64_t block = k.dtype == DType::F8_E4M3 ? (k.groups > 1 ? 64 : 128) : 32;
    StoredWeight w = make_weight(rng, k.dtype, k.rows, k.cols, k.scales, block);
    if (k.dtype == DType::F8_E4M3 && k.scales == Scales::E8M0Blocks) {  // block (0, 1) at 2^20
      const double factor = std::ldexp(1.0, 127 + 20 - static_cast<int>(static_cast<uint8_t>(w.scale[1])));
      w.scale[1] = static_cast<std::byte>(127 + 20);
      for (int64_t r = 0; r < std::min(k.rows, block); ++r)
        for (int64_t c = block; c < std::min(k.cols, 2 * block); ++c) w.values[static_cast<size_t>(r * k.cols + c)] *= factor;
    }
    const int64_t nan_row = 5;
    if (k.dtype == DType::F8_E4M3) {
      w.data[static_cast<size_t>(nan_row * k.cols + 7)] = std::byte{0x7f};
      w.values[static_cast<size_t>(nan_row * k.cols + 7)] = 0.0;  // the row is checked for NaN instead
    }
    const StoredWeight& kw = keep(std::move(w));
    const int64_t R = k.rows / k.groups, X = k.groups * k.cols;
    auto x = randoms(static_cast<size_t>(T * X));
    std::uniform_int_distribution<int> octave(-20, 13);
    for (auto& v : x) v = std::ldexp(v, octave(rng));
    auto got = run_linear(kw.w, k.groups, x, T);
    std::vector<double> want(static_cast<size_t>(T * k.rows));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < k.rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < k.cols; ++c) s += kw.at(r, c) * x[static_cast<size_t>(t * X + (r / R) * k.cols + c)];
        want[static_cast<size_t>(t * k.rows + r)] = s;
      }
    const std::string label = std::string(dtype_name(k.dtype)) + " " + std::to_string(k.rows) + "x" +
                              std::to_string(k.cols) + " groups " + std::to_string(k.groups) + " scales " +
                              std::to_string(static_cast<int>(k.scales)) + " T=" + std::to_string(T);
    if (k.dtype == DType::F8_E4M3)
      for (int64_t t = 0; t < T; ++t) {
        const auto i = static_cast<size_t>(t * k.rows + nan_row);
        EXPECT_TRUE(std::isnan(got[i])) << label << ": FP8 NaN code, output " << i << " is " << got[i];
        got[i] = 0.0f;
        want[i] = 0.0;
      }
    EXPECT_CLOSE(got, want, label);
  }
}

// FP8 whose values times scales are exact in f16 (E8M0 scales 2^-9 .. 2^-2, or none), 9 to 255
// rows: CUDA's default mode takes these on f16 operands with each x row scaled by its own power of
// two. Rows from 2^-60 to 2^60 (each checked against its own range), octaves -20 .. 13 inside a
// row, a row of zeros, a row with one huge element, grouped weights (each group's own power) and
// an FP8 NaN code (NaN in its output column only).
TEST_P(BackendOps, LinearFp8RowsOfEveryMagnitude) {
  struct Case {
    Scales scales;
    int64_t rows, cols, groups, T;
  };
  // (4,096 columns: by default 32 grid-split slices of one slab, tc_gemm.cu's grid_slices; with
  // DEEPINFER_TC_GRID_SLICES=0 8 of them: tools/gpu/test.sh runs it both ways.)
  const Case cases[] = {{Scales::E8M0Blocks, 256, 640, 1, 40},
                        {Scales::E8M0Blocks, 64, 4096, 1, 24},
                        {Scales::None, 96, 384, 1, 9},
                        {Scales::E8M0Blocks, 4 * 64, 256, 4, 200}};
  for (const Case& k : cases) {
    StoredWeight w = make_weight(rng, DType::F8_E4M3, k.rows, k.cols, k.scales, k.groups > 1 ? 64 : 128);
    const int64_t nan_row = 5;
    w.data[static_cast<size_t>(nan_row * k.cols + 7)] = std::byte{0x7f};
    w.values[static_cast<size_t>(nan_row * k.cols + 7)] = 0.0;  // the column is checked for NaN instead
    const StoredWeight& kw = keep(std::move(w));
    const int64_t R = k.rows / k.groups, X = k.groups * k.cols, T = k.T;
    auto x = randoms(static_cast<size_t>(T * X));
    std::uniform_int_distribution<int> octave(-20, 13), row_octave(-60, 60);
    for (int64_t t = 0; t < T; ++t) {
      const int ro = row_octave(rng);
      for (int64_t c = 0; c < X; ++c) {
        float& v = x[static_cast<size_t>(t * X + c)];
        v = t == 1 ? 0.0f : std::ldexp(v, octave(rng) + ro);
      }
    }
    x[static_cast<size_t>(2 * X + 3)] = 1e30f;  // row 2: one element far above the rest
    const auto got = run_linear(kw.w, k.groups, x, T);
    const std::string label = "FP8 " + std::to_string(k.rows) + "x" + std::to_string(k.cols) + " groups " +
                              std::to_string(k.groups) + " T=" + std::to_string(T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> want(static_cast<size_t>(k.rows));
      std::vector<float> row(got.begin() + t * k.rows, got.begin() + (t + 1) * k.rows);
      for (int64_t r = 0; r < k.rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < k.cols; ++c) s += kw.at(r, c) * x[static_cast<size_t>(t * X + (r / R) * k.cols + c)];
        want[static_cast<size_t>(r)] = s;
      }
      EXPECT_TRUE(std::isnan(row[nan_row])) << label << " row " << t << ": FP8 NaN code gave " << row[nan_row];
      row[nan_row] = 0.0f;
      want[nan_row] = 0.0;
      EXPECT_CLOSE(row, want, label + " row " + std::to_string(t));
    }
  }
}

TEST_P(BackendOps, GroupedLinearManyRows) {
  const int64_t G = 8, R = 64, C = 128, T = 100;
  for (DType dtype : {DType::BF16, DType::F8_E4M3, DType::F4_E2M1}) {
    const StoredWeight& w =
        keep(make_weight(rng, dtype, G * R, C, dtype == DType::BF16 ? Scales::None : Scales::E8M0Blocks, 32));
    const auto x = randoms(static_cast<size_t>(T * G * C));
    const auto dx = on_device(x);
    auto y = nan_output(static_cast<size_t>(T * G * R));
    be->grouped_linear(w.w, G, dx.view({T, G * C}), y.view({T, G * R}));
    std::vector<double> want(y.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t r = 0; r < R; ++r) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c) s += w.at(g * R + r, c) * x[static_cast<size_t>(t * G * C + g * C + c)];
          want[static_cast<size_t>(t * G * R + g * R + r)] = s;
        }
    EXPECT_CLOSE(y.download(), want, std::string("grouped_linear T=100 ") + std::string(dtype_name(dtype)));
  }
}

TEST_P(BackendOps, GroupedLinearIsBlockDiagonal) {
  const int64_t G = 4, R = 32, C = 48, T = 5;
  for (DType dtype : {DType::BF16, DType::F8_E4M3}) {
    const StoredWeight& w = keep(make_weight(rng, dtype, G * R, C, dtype == DType::F8_E4M3 ? Scales::E8M0Blocks : Scales::None,
                                       32));
    const auto x = randoms(static_cast<size_t>(T * G * C));
    const auto dx = on_device(x);
    auto y = nan_output(static_cast<size_t>(T * G * R));
    be->grouped_linear(w.w, G, dx.view({T, G * C}), y.view({T, G * R}));
    std::vector<double> want(y.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t r = 0; r < R; ++r) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c) s += w.at(g * R + r, c) * x[static_cast<size_t>(t * G * C + g * C + c)];
          want[static_cast<size_t>(t * G * R + g * R + r)] = s;
        }
    EXPECT_CLOSE(y.download(), want, std::string("grouped_linear ") + std::string(dtype_name(dtype)));
  }
}

TEST_P(BackendOps, EmbedCopiesWidenedRows) {
  const int64_t V = 37, D = 24;
  for (DType dtype : {DType::F32, DType::BF16, DType::F8_E4M3}) {
    const StoredWeight& table = keep(make_weight(rng, dtype, V, D, dtype == DType::F8_E4M3 ? Scales::E8M0Blocks : Scales::None, 32));
    for (int64_t copies : {1, 4}) {
      std::vector<int32_t> ids = {5, 0, 36, 5, 17, 2};
      const auto T = static_cast<int64_t>(ids.size());
      auto out = nan_output(static_cast<size_t>(T * copies * D));
      be->embed(table.w, ids, out.view({T, copies, D}));  // ids: host memory
      std::vector<double> want(out.size());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < copies; ++i)
          for (int64_t d = 0; d < D; ++d) want[static_cast<size_t>((t * copies + i) * D + d)] = table.at(ids[t], d);
      EXPECT_CLOSE(out.download(), want, std::string("embed ") + std::string(dtype_name(dtype)) + " copies " + std::to_string(copies));
      // embed_ids: the same ids in the backend's memory, the same rows bit for bit.
      auto dids = on_device(ids);
      auto out_ids = nan_output(static_cast<size_t>(T * copies * D));
      be->embed_ids(table.w, dids.view({T}), out_ids.view({T, copies, D}));
      EXPECT_EQ(out_ids.download(), out.download()) << "embed_ids " << dtype_name(dtype);
    }
  }
}

// An id outside the table cannot be checked on the host when it lives in device memory: the CPU
// refuses it, a device writes a NaN row (which then fails sampling) and the other rows as usual.
TEST_P(BackendOps, EmbedIdsOutsideTheTableAreRefusedOrNaN) {
  const int64_t V = 11, D = 8;
  const StoredWeight& table = keep(make_weight(rng, DType::BF16, V, D));
  const std::vector<int32_t> ids = {3, 11, -1, 10};
  auto dids = on_device(ids);
  auto out = nan_output(static_cast<size_t>(4 * D));
  if (be->device() == Device::CPU) {
    EXPECT_THROW(be->embed_ids(table.w, dids.view({4}), out.view({4, 1, D})), Error);
    return;
  }
  be->embed_ids(table.w, dids.view({4}), out.view({4, 1, D}));
  const auto got = out.download();
  for (int64_t d = 0; d < D; ++d) {
    EXPECT_EQ(got[static_cast<size_t>(d)], static_cast<float>(table.at(3, d)));
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(D + d)]));
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(2 * D + d)]));
    EXPECT_EQ(got[static_cast<size_t>(3 * D + d)], static_cast<float>(table.at(10, d)));
  }
}

TEST_P(BackendOps, GatherRowsPicksLeadingRows) {
  const int64_t T = 9, H = 3, D = 8;
  const auto src = randoms(static_cast<size_t>(T * H * D));
  const auto d_src = on_device(src);
  // One row, the last and first rows, repeats and more rows than the source has.
  const std::vector<std::vector<int64_t>> picks = {{8}, {0, 8, 3}, {4, 4, 1, 0, 7, 2, 5, 6, 3, 8, 0}};
  for (const auto& rows : picks) {
    const auto R = static_cast<int64_t>(rows.size());
    std::vector<float> want(static_cast<size_t>(R * H * D));
    for (int64_t i = 0; i < R; ++i)
      std::copy_n(src.begin() + rows[static_cast<size_t>(i)] * H * D, H * D, want.begin() + i * H * D);
    const std::string what = "gather_rows of " + std::to_string(R) + " rows";
    for (bool flat : {false, true}) {  // [T, H, D] and [T, H*D]: rows are over the leading dimension only
      auto dst = nan_output(want.size());
      if (flat)
        be->gather_rows(d_src.view({T, H * D}), rows, dst.view({R, H * D}));  // rows: host memory
      else
        be->gather_rows(d_src.view({T, H, D}), rows, dst.view({R, H, D}));
      const auto got = dst.download();
      EXPECT_CLOSE(got, std::vector<double>(want.begin(), want.end()), what + (flat ? " (flat)" : ""));
      EXPECT_EQ(got, want) << what << (flat ? " (flat)" : "") << ": a gather must copy rows exactly";
    }
  }
  EXPECT_EQ(d_src.download(), src) << "gather_rows wrote its source";
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, T}, std::vector<int64_t>{-1}, std::vector<int64_t>{T + 100}}) {
    auto dst = nan_output(bad.size() * static_cast<size_t>(H * D));
    EXPECT_THROW(be->gather_rows(d_src.view({T, H, D}), bad, dst.view({static_cast<int64_t>(bad.size()), H, D})),
                 deepinfer::Error)
        << "row " << bad.back() << " is outside [0, " << T << ")";
  }
}

std::vector<double> ref_rms_norm(const std::vector<float>& x, int64_t n, const float* weight, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = x[r * n + i] * inv * (weight ? weight[i] : 1.0);
  }
  return out;
}

TEST_P(BackendOps, RmsNormWeightedUnweightedInPlace) {
  const int64_t T = 7, H = 3, n = 40;
  const float eps = 1e-6f;
  auto weight = randoms(static_cast<size_t>(n));
  for (float scale : {0.01f, 1.0f, 30.0f}) {  // eps matters at the small scale
    const auto x = randoms(static_cast<size_t>(T * H * n), scale);
    auto dx = on_device(x);
    auto out = nan_output(x.size());
    be->rms_norm(dx.view({T, H, n}), weight.data(), eps, out.view({T, H, n}));
    EXPECT_CLOSE(out.download(), ref_rms_norm(x, n, weight.data(), eps), "weighted, scale " + std::to_string(scale));
    out.upload(std::vector<float>(x.size(), NAN));
    be->rms_norm(dx.view({T * H, n}), nullptr, eps, out.view({T * H, n}));
    EXPECT_CLOSE(out.download(), ref_rms_norm(x, n, nullptr, eps), "unweighted, scale " + std::to_string(scale));
    out.upload(std::vector<float>(x.size(), NAN));
    be->rms_norm(dx.view({T, H * n / 2, 2}), nullptr, 0.5f, out.view({T, H * n / 2, 2}));
    EXPECT_CLOSE(out.download(), ref_rms_norm(x, 2, nullptr, 0.5), "last dimension only");
    // In place: out aliases x, both the one backend tensor (still holding x: the calls above only read it).
    be->rms_norm(dx.view({T, H, n}), weight.data(), 0.5f, dx.view({T, H, n}));
    EXPECT_CLOSE(dx.download(), ref_rms_norm(x, n, weight.data(), 0.5), "in place, scale " + std::to_string(scale));
  }
}

TEST_P(BackendOps, RopeForwardAndInverse) {
  const int64_t T = 6, heads = 3, hd = 24, half = 8;  // channels [0, 8) carry no rope
  const auto inv_freq = make_inv_freq(half, 10000.0);
  for (float factor : {1.0f, 0.75f}) {
    for (bool inverse : {false, true}) {
      auto x = randoms(static_cast<size_t>(T * heads * hd));
      std::vector<int64_t> positions(static_cast<size_t>(T));
      for (auto& p : positions) p = uniform_int(0, 5000);
      positions[0] = 0;
      std::vector<double> want(x.begin(), x.end());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h)
          ref_rope(want.data() + (t * heads + h) * hd, hd, inv_freq, factor, positions[t], inverse);
      auto dx = on_device(x);
      be->rope(dx.view({T, heads, hd}), positions, backend::RopeFreqs{inv_freq, factor}, inverse);  // in place
      EXPECT_CLOSE(dx.download(), want, std::string(inverse ? "inverse" : "forward") + " rope, attention factor " +
                                std::to_string(factor));
    }
  }
  // Forward then inverse at factor 1 is the identity.
  auto x = randoms(static_cast<size_t>(T * heads * hd));
  const std::vector<double> original(x.begin(), x.end());
  std::vector<int64_t> positions = {0, 1, 17, 300, 4095, 77};
  auto dx = on_device(x);
  be->rope(dx.view({T, heads, hd}), positions, backend::RopeFreqs{inv_freq, 1.0f}, false);
  be->rope(dx.view({T, heads, hd}), positions, backend::RopeFreqs{inv_freq, 1.0f}, true);
  EXPECT_CLOSE(dx.download(), original, "rope then inverse rope");
}

// ---------------------------------------------------------------- mHC

struct MhcData {
  std::vector<float> fn, base, scale;
  MhcWeights weights() const { return {fn.data(), base.data(), scale.data()}; }
};

// The mixer's logits for each token: rms(flat residual) fn^T (unweighted RMSNorm over n*D).
std::vector<double> ref_mix(const std::vector<float>& residual, const std::vector<float>& fn, int64_t T, int64_t nD,
                            int64_t rows, double norm_eps) {
  std::vector<double> mix(static_cast<size_t>(T * rows));
  const auto flat = ref_rms_norm(residual, nD, nullptr, norm_eps);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < nD; ++c) s += flat[static_cast<size_t>(t * nD + c)] * fn[static_cast<size_t>(r * nD + c)];
      mix[static_cast<size_t>(t * rows + r)] = s;
    }
  return mix;
}

// MODELS.md: pre = sigmoid(mix0*scale0 + base0) + eps; post = 2 sigmoid(mix1*scale1 + base1);
// comb = softmax_row(mix2*scale2 + base2) + eps, column-normalise, then (iters - 1) rounds of row-
// then column-normalisation, each divide adding eps. input = sum_i pre_i x_i.
void ref_mhc_pre(const MhcData& w, const MhcParams& p, const std::vector<float>& residual, int64_t T, int64_t D,
                 std::vector<double>& input, std::vector<double>& post, std::vector<double>& comb) {
  const int64_t n = p.hc_mult, rows = (2 + n) * n;
  const double eps = p.hc_eps;
  const auto mix = ref_mix(residual, w.fn, T, n * D, rows, p.norm_eps);
  input.assign(static_cast<size_t>(T * D), 0.0);
  post.assign(static_cast<size_t>(T * n), 0.0);
  comb.assign(static_cast<size_t>(T * n * n), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const double* m = mix.data() + t * rows;
    std::vector<double> pre(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      pre[static_cast<size_t>(i)] = ref_sigmoid(m[i] * w.scale[0] + w.base[i]) + eps;
      post[static_cast<size_t>(t * n + i)] = 2.0 * ref_sigmoid(m[n + i] * w.scale[1] + w.base[n + i]);
    }
    std::vector<std::vector<double>> c(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n)));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < n; ++k) c[j][k] = m[2 * n + j * n + k] * w.scale[2] + w.base[2 * n + j * n + k];
      ref_softmax(c[j]);
      for (auto& v : c[j]) v += eps;
    }
    auto columns = [&] {
      for (int64_t k = 0; k < n; ++k) {
        double s = 0;
        for (int64_t j = 0; j < n; ++j) s += c[j][k];
        for (int64_t j = 0; j < n; ++j) c[j][k] /= s + eps;
      }
    };
    auto rows_ = [&] {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < n; ++k) s += c[j][k];
        for (int64_t k = 0; k < n; ++k) c[j][k] /= s + eps;
      }
    };
    columns();
    for (int64_t it = 1; it < p.sinkhorn_iters; ++it) {
      rows_();
      columns();
    }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) comb[static_cast<size_t>(t * n * n + j * n + k)] = c[j][k];
    for (int64_t d = 0; d < D; ++d) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += pre[static_cast<size_t>(i)] * residual[static_cast<size_t>((t * n + i) * D + d)];
      input[static_cast<size_t>(t * D + d)] = s;
    }
  }
}

MhcData random_mhc(int64_t rows, int64_t cols, int64_t scales, std::mt19937_64& rng) {
  MhcData w;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  w.fn.resize(static_cast<size_t>(rows * cols));
  for (auto& v : w.fn) v = u(rng) * 3.0f / std::sqrt(static_cast<float>(cols)) + 1e-3f;  // mixes of O(1)
  w.base.resize(static_cast<size_t>(rows));
  for (auto& v : w.base) v = u(rng) + 1e-3f;
  w.scale.resize(static_cast<size_t>(scales));
  for (auto& v : w.scale) v = 1.0f + std::fabs(u(rng));  // sharp enough that Sinkhorn rounds matter
  return w;
}

TEST_P(BackendOps, MhcPreAllHcMultsAndSinkhornRounds) {
  // hc_mult 20 is above any fixed 16-entry array; 1 to 3 Sinkhorn rounds are far from converged,
  // so a skipped or extra round shows. 37 and 150 tokens of 4 x 100 (the decode and the prefill
  // kernels): more than one column chunk, the last one cut, tokens that do not fill a warp's group.
  for (auto [T, D, n] : {std::tuple<int64_t, int64_t, int64_t>{5, 16, 4}, {5, 16, 20}, {5, 16, 2}, {37, 100, 4}, {150, 100, 4}, {150, 16, 20}}) {
    for (int64_t iters : {1, 2, 3, 20}) {
      MhcParams p;
      p.hc_mult = n;
      p.sinkhorn_iters = iters;
      p.hc_eps = 1e-3f;  // large enough that every eps term shows
      p.norm_eps = 1e-5f;
      const int64_t rows = (2 + n) * n;
      const MhcData& w = keep(random_mhc(rows, n * D, 3, rng));
      const auto residual = randoms(static_cast<size_t>(T * n * D));
      const auto d_residual = on_device(residual);
      auto input = nan_output(static_cast<size_t>(T * D)), post = nan_output(static_cast<size_t>(T * n)),
           comb = nan_output(static_cast<size_t>(T * n * n));
      be->mhc_pre(w.weights(), p, d_residual.view({T, n, D}), input.view({T, D}), post.view({T, n}), comb.view({T, n, n}));
      std::vector<double> want_input, want_post, want_comb;
      ref_mhc_pre(w, p, residual, T, D, want_input, want_post, want_comb);
      const std::string what =
          "T " + std::to_string(T) + " hc_mult " + std::to_string(n) + " sinkhorn " + std::to_string(iters);
      EXPECT_CLOSE(input.download(), want_input, "mhc_pre input, " + what);
      EXPECT_CLOSE(post.download(), want_post, "mhc_pre post, " + what);
      EXPECT_CLOSE(comb.download(), want_comb, "mhc_pre comb, " + what);
    }
  }
}

TEST_P(BackendOps, MhcPostMixesCopiesTransposed) {
  const int64_t T = 4, D = 12;
  for (int64_t n : {4, 20}) {
    const auto residual = randoms(static_cast<size_t>(T * n * D)), out = randoms(static_cast<size_t>(T * D)),
               post = randoms(static_cast<size_t>(T * n)), comb = randoms(static_cast<size_t>(T * n * n));
    std::vector<double> want(residual.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t d = 0; d < D; ++d) {
          double s = static_cast<double>(post[t * n + k]) * out[t * D + d];
          for (int64_t j = 0; j < n; ++j) s += static_cast<double>(comb[(t * n + j) * n + k]) * residual[(t * n + j) * D + d];
          want[static_cast<size_t>((t * n + k) * D + d)] = s;
        }
    auto d_residual = on_device(residual);  // updated in place
    const auto d_out = on_device(out), d_post = on_device(post), d_comb = on_device(comb);
    be->mhc_post(d_residual.view({T, n, D}), d_out.view({T, D}), d_post.view({T, n}), d_comb.view({T, n, n}));
    EXPECT_CLOSE(d_residual.download(), want, "mhc_post hc_mult " + std::to_string(n));
  }
}

TEST_P(BackendOps, MhcHeadCollapsesCopies) {
  const int64_t T = 3, D = 20;
  for (int64_t n : {4, 20}) {
    MhcParams p;
    p.hc_mult = n;
    p.hc_eps = 1e-3f;
    p.norm_eps = 1e-5f;
    const MhcData& w = keep(random_mhc(n, n * D, 1, rng));
    const auto residual = randoms(static_cast<size_t>(T * n * D));
    const auto d_residual = on_device(residual);
    auto hidden = nan_output(static_cast<size_t>(T * D));
    be->mhc_head(w.weights(), p, d_residual.view({T, n, D}), hidden.view({T, D}));
    const auto mix = ref_mix(residual, w.fn, T, n * D, n, p.norm_eps);
    std::vector<double> want(hidden.size(), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < n; ++i) {
        const double pre = ref_sigmoid(mix[static_cast<size_t>(t * n + i)] * w.scale[0] + w.base[i]) + p.hc_eps;
        for (int64_t d = 0; d < D; ++d) want[static_cast<size_t>(t * D + d)] += pre * residual[(t * n + i) * D + d];
      }
    EXPECT_CLOSE(hidden.download(), want, "mhc_head hc_mult " + std::to_string(n));
  }
}

// ---------------------------------------------------------------- batch invariance

// Under batch_invariant every output row is the same arithmetic whatever else the call holds:
// each row computed alone must equal, bit for bit, the row computed among 70.
class BackendOpsInvariant : public BackendOps {};

TEST_P(BackendOpsInvariant, RowsDoNotDependOnTheBatch) {
  const int64_t T = 70;
  // (40, 1056): a split K.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{96, 128}, std::pair<int64_t, int64_t>{40, 1056}})
  for (DType dtype : {DType::F32, DType::BF16, DType::F8_E4M3, DType::F4_E2M1}) {
    const Scales sc = dtype == DType::F4_E2M1 || dtype == DType::F8_E4M3 ? Scales::E8M0Blocks : Scales::None;
    StoredWeight sw = make_weight(rng, dtype, rows, cols, sc, dtype == DType::F8_E4M3 ? 128 : 32);
    if (dtype == DType::F4_E2M1) {
      // FP4 scales in each range the CUDA tile decodes another way (1-2 rows by f16 pairs times
      // s * 2^14, more rows by float bits times s * 2^126, huge scales exactly): 2^-127 (E8M0's
      // subnormal), 2^3 and 2^60 (past 2^126's headroom), 2^115 (past 2^14's). Same bits required.
      const uint8_t codes[] = {0, 127 + 3, 127 + 60, 127 + 115};
      for (size_t i = 0; i < std::size(codes); ++i) sw.scale[(5 * i + 1) % sw.scale.size()] = std::byte{codes[i]};
    }
    const StoredWeight& w = keep(std::move(sw));
    const auto x = randoms(static_cast<size_t>(T * cols));
    const auto dx = on_device(x);
    auto d_all = nan_output(static_cast<size_t>(T * rows));
    be->linear(w.w, dx.view({T, cols}), d_all.view({T, rows}));
    const auto all = d_all.download();
    for (int64_t t : {0, 1, 33, 69}) {
      const auto dxr = on_device(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
      auto d_yr = nan_output(static_cast<size_t>(rows));
      be->linear(w.w, dxr.view({1, cols}), d_yr.view({1, rows}));
      const auto yr = d_yr.download();
      EXPECT_TRUE(std::equal(yr.begin(), yr.end(), all.begin() + t * rows))
          << "linear " << dtype_name(dtype) << ": row " << t << " alone differs from the batch";
    }
  }
  {  // mHC mixing: 150 tokens take the prefill kernel, one token the decode one (width 400: two chunks)
    MhcParams p;
    p.hc_mult = 4;
    const int64_t n = 4, Dm = 100, Tm = 150;
    const MhcData& w = keep(random_mhc((2 + n) * n, n * Dm, 3, rng));
    const auto residual = randoms(static_cast<size_t>(Tm * n * Dm));
    const auto run = [&](int64_t t0, int64_t rows) {
      const auto d = on_device(std::vector<float>(residual.begin() + t0 * n * Dm, residual.begin() + (t0 + rows) * n * Dm));
      auto input = nan_output(static_cast<size_t>(rows * Dm)), post = nan_output(static_cast<size_t>(rows * n)),
           comb = nan_output(static_cast<size_t>(rows * n * n));
      be->mhc_pre(w.weights(), p, d.view({rows, n, Dm}), input.view({rows, Dm}), post.view({rows, n}),
                  comb.view({rows, n, n}));
      auto out = input.download();
      for (const auto& part : {post.download(), comb.download()}) out.insert(out.end(), part.begin(), part.end());
      return out;
    };
    const auto all = run(0, Tm);
    for (int64_t t : {0, 33, 149}) {
      const auto alone = run(t, 1);
      std::vector<float> want(all.begin() + t * Dm, all.begin() + (t + 1) * Dm);
      want.insert(want.end(), all.begin() + Tm * Dm + t * n, all.begin() + Tm * Dm + (t + 1) * n);
      want.insert(want.end(), all.begin() + Tm * (Dm + n) + t * n * n, all.begin() + Tm * (Dm + n) + (t + 1) * n * n);
      EXPECT_TRUE(alone == want) << "mhc_pre: token " << t << " alone differs from the batch";
    }
  }
  const int64_t D = 64, I = 32, E = 4, K = 2;
  auto& experts = keep(std::vector<ExpertWeights>{});
  for (int64_t e = 0; e < E; ++e) experts.push_back(make_expert(rng, DType::BF16, I, D));
  const ExpertWeights& shared = keep(make_expert(rng, DType::BF16, I, D));
  std::vector<backend::SwigluExpert> views;
  for (const auto& e : experts) views.push_back(e.view());
  backend::MoeWeights mw{views, shared.view(), 10.0f};
  auto x = randoms(static_cast<size_t>(T * D));
  std::vector<int32_t> chosen(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t) chosen[t * K] = static_cast<int32_t>(t % E), chosen[t * K + 1] = static_cast<int32_t>((t + 1) % E);
  auto weights = randoms(static_cast<size_t>(T * K));
  const auto dx = on_device(x);
  const auto d_chosen = on_device(chosen);
  const auto d_weights = on_device(weights);
  auto d_all = nan_output(static_cast<size_t>(T * D));
  be->moe_experts(mw, dx.view({T, D}), d_chosen.view({T, K}), d_weights.view({T, K}), d_all.view({T, D}));
  const auto all = d_all.download();
  for (int64_t t : {0, 5, 69}) {
    const auto dxr = on_device(std::vector<float>(x.begin() + t * D, x.begin() + (t + 1) * D)),
               dwr = on_device(std::vector<float>(weights.begin() + t * K, weights.begin() + (t + 1) * K));
    const auto dcr = on_device(std::vector<int32_t>(chosen.begin() + t * K, chosen.begin() + (t + 1) * K));
    auto d_yr = nan_output(static_cast<size_t>(D));
    be->moe_experts(mw, dxr.view({1, D}), dcr.view({1, K}), dwr.view({1, K}), d_yr.view({1, D}));
    const auto yr = d_yr.download();
    EXPECT_TRUE(std::equal(yr.begin(), yr.end(), all.begin() + t * D)) << "moe_experts: token " << t << " alone differs";
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOps, testing::ValuesIn(backend_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOpsInvariant, testing::ValuesIn(invariant_backend_cases()), case_name);

}  // namespace
}  // namespace deepinfer::backend_ops_test
