// CPU reference ops against straightforward double-precision loops on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "testing/random_seed.h"

namespace deepinfer::cpu {
namespace {

// Fresh seed per test unless DEEPINFER_TEST_SEED replays one; SCOPED_TRACE puts it in every failure.
using testing_util::test_seed;

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct StoredMatrix {
  std::vector<std::byte> data, scale;
  WeightMatrix view;
  std::vector<float> values;  // what the stored bytes decode to
};

StoredMatrix make_matrix(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  StoredMatrix m;
  m.values = random_floats(static_cast<size_t>(rows * cols), rng);
  m.view.dtype = dtype;
  m.view.rows = rows;
  m.view.cols = cols;
  std::uniform_int_distribution<int> byte(0, 255);
  switch (dtype) {
    case DType::F32:
      m.data.resize(m.values.size() * 4);
      std::memcpy(m.data.data(), m.values.data(), m.data.size());
      break;
    case DType::BF16: {
      m.data.resize(m.values.size() * 2);
      auto* p = reinterpret_cast<uint16_t*>(m.data.data());
      for (size_t i = 0; i < m.values.size(); ++i) {
        p[i] = f32_to_bf16(m.values[i]);
        m.values[i] = bf16_to_f32(p[i]);
      }
      break;
    }
    case DType::F8_E4M3: {  // random codes (no NaN) with 32x32 E8M0 block scales
      m.data.resize(m.values.size());
      const int64_t sr = (rows + 31) / 32, sc = (cols + 31) / 32;
      m.scale.resize(static_cast<size_t>(sr * sc));
      for (auto& s : m.scale) s = static_cast<std::byte>(120 + byte(rng) % 10);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          uint8_t code;
          do code = static_cast<uint8_t>(byte(rng)); while ((code & 0x7f) == 0x7f);
          m.data[r * cols + c] = static_cast<std::byte>(code);
          m.values[r * cols + c] =
              f8e4m3_to_f32(code) * e8m0_to_f32(static_cast<uint8_t>(m.scale[(r / 32) * sc + c / 32]));
        }
      m.view.scale = m.scale.data();
      m.view.scale_dtype = DType::F8_E8M0;
      m.view.scale_cols = sc;
      m.view.block_rows = m.view.block_cols = 32;
      break;
    }
    case DType::F4_E2M1: {  // two codes per byte, one E8M0 scale per 32 columns
      m.data.resize(m.values.size() / 2);
      m.scale.resize(static_cast<size_t>(rows * cols / 32));
      for (auto& s : m.scale) s = static_cast<std::byte>(122 + byte(rng) % 8);
      for (auto& b : m.data) b = static_cast<std::byte>(byte(rng));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const auto packed = static_cast<uint8_t>(m.data[(r * cols + c) / 2]);
          const uint8_t code = c % 2 == 0 ? packed & 0xf : packed >> 4;
          m.values[r * cols + c] =
              f4e2m1_to_f32(code) * e8m0_to_f32(static_cast<uint8_t>(m.scale[r * (cols / 32) + c / 32]));
        }
      m.view.scale = m.scale.data();
      m.view.scale_dtype = DType::F8_E8M0;
      m.view.scale_cols = cols / 32;
      m.view.block_rows = 1;
      m.view.block_cols = 32;
      break;
    }
    default:
      ADD_FAILURE() << "unsupported dtype in test";
  }
  m.view.data = m.data.data();
  return m;
}

class LinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinearTest, MatchesDoublePrecisionLoop) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with DEEPINFER_TEST_SEED)");
  std::mt19937 rng(seed);
  const int64_t rows = 200, cols = 96;  // 200 is not a multiple of the 64-row tile
  StoredMatrix m = make_matrix(GetParam(), rows, cols, rng);
  auto backend = backend::make_cpu_backend();
  for (int64_t tokens : {1, 2, 3, 7, 70}) {  // single tokens, partial and full passes of the kernel
    auto x = random_floats(static_cast<size_t>(tokens * cols), rng);
    std::vector<float> y(static_cast<size_t>(tokens * rows), NAN);
    backend->linear(m.view, TensorView::f32(x.data(), {tokens, cols}), TensorView::f32(y.data(), {tokens, rows}));
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          want += static_cast<double>(m.values[r * cols + c]) * x[t * cols + c];
          mag += std::fabs(static_cast<double>(m.values[r * cols + c]) * x[t * cols + c]);
        }
        ASSERT_NEAR(y[t * rows + r], want, 1e-5 * mag + 1e-6) << "tokens " << tokens << " row " << r;
      }
  }
}

TEST_P(LinearTest, RowSliceReadsTheSameRows) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with DEEPINFER_TEST_SEED)");
  std::mt19937 rng(seed);
  StoredMatrix m = make_matrix(GetParam(), 128, 64, rng);
  WeightMatrix slice = m.view.row_slice(64, 64);
  std::vector<float> row(64), whole(64);
  for (int64_t r = 0; r < 64; ++r) {
    slice.row_to_float(r, row.data());
    m.view.row_to_float(64 + r, whole.data());
    ASSERT_EQ(row, whole);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest,
                         ::testing::Values(DType::F32, DType::BF16, DType::F8_E4M3, DType::F4_E2M1));

TEST(RmsNorm, MatchesFormula) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with DEEPINFER_TEST_SEED)");
  std::mt19937 rng(seed);
  auto x = random_floats(3 * 50, rng, 3.0f), w = random_floats(50, rng);
  std::vector<float> out(x.size());
  rms_norm_to(x.data(), out.data(), 3, 50, w.data(), 1e-6f);
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < 50; ++i) ss += x[r * 50 + i] * x[r * 50 + i];
    const double inv = 1.0 / std::sqrt(ss / 50 + 1e-6);
    for (int i = 0; i < 50; ++i) EXPECT_NEAR(out[r * 50 + i], w[i] * x[r * 50 + i] * inv, 1e-5);
  }
}

TEST(Rope, RotatesOnlyTheTrailingPairsAndInvertsExactly) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with DEEPINFER_TEST_SEED)");
  std::mt19937 rng(seed);
  auto head = random_floats(32, rng);
  const auto original = head;
  std::vector<float> cos(8), sin(8);
  for (int i = 0; i < 8; ++i) cos[i] = std::cos(0.3f * (i + 1)), sin[i] = std::sin(0.3f * (i + 1));
  rope_interleaved(head.data(), 32, cos.data(), sin.data(), 8);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(head[i], original[i]);  // the non-rope channels
  EXPECT_NEAR(head[16], original[16] * cos[0] - original[17] * sin[0], 1e-6);
  EXPECT_NEAR(head[17], original[17] * cos[0] + original[16] * sin[0], 1e-6);
  rope_interleaved(head.data(), 32, cos.data(), sin.data(), 8, -1.0f);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(head[i], original[i], 1e-5);
}

TEST(Softmax, AllMaskedRowGivesZeros) {
  std::vector<float> v(4, -INFINITY);
  softmax(v.data(), 4);
  for (float x : v) EXPECT_EQ(x, 0.0f);
}

TEST(TopK, LowerIndexWinsTies) {
  const std::vector<float> v = {1.0f, 3.0f, 3.0f, 0.5f, 3.0f};
  EXPECT_EQ(top_k_indices(v, 2), (std::vector<int32_t>{1, 2}));
}

TEST(TopK, TorchSelectionAgreesWithSortingWhenValuesAreDistinct) {
  const uint32_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay with DEEPINFER_TEST_SEED)");
  std::mt19937 rng(seed);
  for (int n : {5, 40, 700}) {
    auto v = random_floats(static_cast<size_t>(n), rng);
    for (int k : {1, 3, 8}) {
      auto got = torch_top_k_indices(v, k);
      std::sort(got.begin(), got.end());
      auto want = top_k_indices(v, k);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "n " << n << " k " << k;
    }
  }
}

}  // namespace
}  // namespace deepinfer::cpu
