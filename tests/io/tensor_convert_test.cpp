// Element conversions and block dequantisation, checked against known bit patterns and against
// straightforward references written out in the tests.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace deepinfer::io {
namespace {

using namespace deepinfer::io::testing;

// Views an OwnedTensor as the reader would hand it out.
TensorView view_of(const OwnedTensor& t) {
  TensorView v;
  v.name = t.name;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.data = t.data.data();
  v.nbytes = t.data.size();
  v.file = "memory";
  return v;
}

// Independent e4m3fn decoder: sign * 2^(e-7) * (1 + m/8), subnormals 2^-6 * m/8, S.1111.111 = NaN.
double reference_e4m3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::pow(2.0, -6) * (m / 8.0) : std::pow(2.0, e - 7) * (1.0 + m / 8.0);
  return s ? -mag : mag;
}

// ---- scalar conversions through to_float / to_int64 ---------------------------------------------

TEST(ToFloat, Float16KnownValues) {
  const std::vector<uint16_t> bits{0x3c00, 0xc000, 0x7bff, 0x0001, 0x3555, 0x8000, 0x0400, 0x7c00, 0xfc00};
  const auto v = to_float(view_of(make_owned_tensor("h", DType::F16, {9}, bits)));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_FLOAT_EQ(v[4], 0.333251953125f);
  EXPECT_TRUE(v[5] == 0.0f && std::signbit(v[5]));
  EXPECT_EQ(v[6], std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(v[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[8], -std::numeric_limits<float>::infinity());
}

TEST(ToFloat, BFloat16KnownValues) {
  const std::vector<uint16_t> bits{0x3f80, 0xc020, 0x4049, 0x0001, 0x7f80, 0x7fc0};
  const auto v = to_float(view_of(make_owned_tensor("b", DType::BF16, {2, 3}, bits)));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 3.140625f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isinf(v[4]));
  EXPECT_TRUE(std::isnan(v[5]));
}

TEST(ToFloat, Float8E4M3AllCodes) {
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  const auto v = to_float(view_of(make_owned_tensor("f8", DType::F8_E4M3, {16, 16}, codes)));
  for (int i = 0; i < 256; ++i) {
    const double ref = reference_e4m3(static_cast<uint8_t>(i));
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(v[i])) << i;
    else EXPECT_EQ(v[i], static_cast<float>(ref)) << "code " << i;
  }
  EXPECT_EQ(v[0x38], 1.0f);
  EXPECT_EQ(v[0x7e], 448.0f);
  EXPECT_EQ(v[0xfe], -448.0f);
  EXPECT_EQ(v[0x01], std::ldexp(1.0f, -9));
}

TEST(ToFloat, Float8E8M0PowersOfTwo) {
  const std::vector<uint8_t> codes{127, 128, 120, 0, 254, 255};
  const auto v = to_float(view_of(make_owned_tensor("e", DType::F8_E8M0, {6}, codes)));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[2], 1.0f / 128.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -127));
  EXPECT_EQ(v[4], std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(v[5]));
}

TEST(ToFloat, WideAndIntegerTypes) {
  EXPECT_EQ(to_float(view_of(make_owned_tensor<double>("d", DType::F64, {3}, {0.1, -1e10, 2.5}))),
            (std::vector<float>{0.1f, -1e10f, 2.5f}));
  EXPECT_EQ(to_float(view_of(make_owned_tensor<int8_t>("i8", DType::I8, {3}, {-128, 5, 127}))),
            (std::vector<float>{-128.f, 5.f, 127.f}));
  EXPECT_EQ(to_float(view_of(make_owned_tensor<uint8_t>("u8", DType::U8, {2}, {255, 3}))), (std::vector<float>{255.f, 3.f}));
  EXPECT_EQ(to_float(view_of(make_owned_tensor<int32_t>("i32", DType::I32, {2}, {-70000, 9}))),
            (std::vector<float>{-70000.f, 9.f}));
  EXPECT_EQ(to_float(view_of(make_owned_tensor<int64_t>("i64", DType::I64, {2}, {-3, 1ll << 40}))),
            (std::vector<float>{-3.f, 1099511627776.f}));
  EXPECT_EQ(to_float(view_of(make_owned_tensor<uint8_t>("bool", DType::BOOL, {3}, {0, 1, 2}))),
            (std::vector<float>{0.f, 1.f, 1.f}));
}

TEST(ToInt64, IntegerTypesAndRejectsFloats) {
  EXPECT_EQ(to_int64(view_of(make_owned_tensor<int8_t>("i8", DType::I8, {2}, {-7, 100}))), (std::vector<int64_t>{-7, 100}));
  EXPECT_EQ(to_int64(view_of(make_owned_tensor<uint8_t>("u8", DType::U8, {2}, {250, 0}))), (std::vector<int64_t>{250, 0}));
  EXPECT_EQ(to_int64(view_of(make_owned_tensor<int32_t>("i32", DType::I32, {2}, {-2147483647 - 1, 5}))),
            (std::vector<int64_t>{-2147483648ll, 5}));
  EXPECT_EQ(to_int64(view_of(make_owned_tensor<int64_t>("i64", DType::I64, {1}, {-(1ll << 50)}))),
            (std::vector<int64_t>{-(1ll << 50)}));
  EXPECT_EQ(to_int64(view_of(make_owned_tensor<uint8_t>("m", DType::BOOL, {2}, {1, 0}))), (std::vector<int64_t>{1, 0}));
  expect_error([] { to_int64(view_of(make_owned_tensor<float>("w.f", DType::F32, {1}, {1.f}))); }, {"'w.f'", "F32", "integer"});
}

TEST(ToFloat, PackedFp4IsRejected) {
  expect_error([] { to_float(view_of(make_owned_tensor<uint8_t>("p", DType::F4_E2M1, {2}, {0x21}))); },
               {"'p'", "dequantize_fp4"});
}

// ---- FP8 block dequantisation -------------------------------------------------------------------

// Random e4m3 codes over the whole range, NaN codes excluded, never an all-zero tensor.
std::vector<uint8_t> random_e4m3(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> out(n);
  for (auto& b : out) {
    do b = static_cast<uint8_t>(code(rng));
    while ((b & 0x7f) == 0x7f || (b & 0x7f) == 0);
  }
  return out;
}

struct Fp8Case {
  int64_t rows, cols, block;
  bool e8m0;  // F8_E8M0 `.scale` (else F32 `weight_scale_inv`)
};

class Fp8Dequant : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8Dequant, MatchesBlockwiseReference) {
  const Fp8Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.rows * 131 + c.cols * 7 + c.block + c.e8m0));
  const int64_t srows = (c.rows + c.block - 1) / c.block, scols = (c.cols + c.block - 1) / c.block;
  const auto codes = random_e4m3(static_cast<size_t>(c.rows * c.cols), rng);
  const OwnedTensor w = make_owned_tensor("layer.w.weight", DType::F8_E4M3, {c.rows, c.cols}, codes);

  std::vector<double> block_scale(static_cast<size_t>(srows * scols));
  OwnedTensor s;
  if (c.e8m0) {
    std::uniform_int_distribution<int> exponent(110, 140);
    std::vector<uint8_t> e(block_scale.size());
    for (size_t i = 0; i < e.size(); ++i) {
      e[i] = static_cast<uint8_t>(exponent(rng));
      block_scale[i] = std::pow(2.0, e[i] - 127);
    }
    s = make_owned_tensor("layer.w.scale", DType::F8_E8M0, {srows, scols}, e);
  } else {
    std::uniform_real_distribution<float> u(1e-4f, 3e-3f);
    std::vector<float> f(block_scale.size());
    for (size_t i = 0; i < f.size(); ++i) block_scale[i] = f[i] = u(rng);
    s = make_owned_tensor("layer.w.weight_scale_inv", DType::F32, {srows, scols}, f);
  }
  const auto out = dequantize_fp8_blocks(view_of(w), view_of(s));
  ASSERT_EQ(out.size(), static_cast<size_t>(c.rows * c.cols));
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t col = 0; col < c.cols; ++col) {
      const size_t i = static_cast<size_t>(r * c.cols + col);
      const double ref = reference_e4m3(codes[i]) * block_scale[static_cast<size_t>((r / c.block) * scols + col / c.block)];
      ASSERT_FLOAT_EQ(out[i], static_cast<float>(ref)) << "row " << r << " col " << col;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp8Dequant,
                         ::testing::Values(Fp8Case{256, 384, 128, false},  // exact 128x128 blocks, F32 scale_inv
                                           Fp8Case{300, 260, 128, false},  // ragged edges on both axes
                                           Fp8Case{20, 300, 128, false},   // fewer rows than one block
                                           Fp8Case{256, 256, 128, true},   // E8M0 128x128 (released V4)
                                           Fp8Case{200, 130, 128, true},
                                           Fp8Case{64, 96, 32, true},      // E8M0 32x32 (V4.1)
                                           Fp8Case{70, 100, 32, true},     // ragged 32x32
                                           Fp8Case{33, 31, 32, true}));

TEST(Fp8DequantErrors, ScaleThatDoesNotTileTheWeight) {
  std::mt19937 rng(3);
  const OwnedTensor w = make_owned_tensor("w", DType::F8_E4M3, {256, 256}, random_e4m3(256 * 256, rng));
  const OwnedTensor s = make_owned_tensor<float>("w_scale", DType::F32, {3, 2}, std::vector<float>(6, 1.f));
  expect_error([&] { dequantize_fp8_blocks(view_of(w), view_of(s)); }, {"'w_scale'", "[3, 2]", "[256, 256]"});
  const OwnedTensor bf = make_owned_tensor<uint16_t>("w", DType::BF16, {2, 2}, {1, 2, 3, 4});
  expect_error([&] { dequantize_fp8_blocks(view_of(bf), view_of(s)); }, {"'w'", "F8_E4M3", "BF16"});
}

// ---- FP4 ----------------------------------------------------------------------------------------

double reference_e2m1(uint8_t code) {
  static const double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8 ? -1.0 : 1.0) * kMagnitude[code & 7];
}

TEST(Fp4Dequant, MatchesNibbleReference) {
  for (const auto& [rows, in] : {std::pair<int64_t, int64_t>{5, 128}, {3, 96}, {4, 80}}) {
    std::mt19937 rng(static_cast<uint32_t>(rows * 1000 + in));
    std::uniform_int_distribution<int> byte(0, 255), exponent(118, 134);
    const int64_t groups = (in + 31) / 32;
    std::vector<uint8_t> packed(static_cast<size_t>(rows * in / 2));
    for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
    std::vector<uint8_t> scale(static_cast<size_t>(rows * groups));
    for (auto& e : scale) e = static_cast<uint8_t>(exponent(rng));
    const OwnedTensor w = make_owned_tensor("e.w1.weight", DType::I8, {rows, in / 2}, packed);
    const OwnedTensor s = make_owned_tensor("e.w1.scale", DType::F8_E8M0, {rows, groups}, scale);
    const auto out = dequantize_fp4(view_of(w), view_of(s));
    ASSERT_EQ(out.size(), static_cast<size_t>(rows * in));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < in; ++j) {
        const uint8_t b = packed[static_cast<size_t>(r * (in / 2) + j / 2)];
        const uint8_t code = j % 2 == 0 ? (b & 0xf) : (b >> 4);  // low nibble = even element
        const double ref = reference_e2m1(code) * std::pow(2.0, scale[static_cast<size_t>(r * groups + j / 32)] - 127);
        ASSERT_EQ(out[static_cast<size_t>(r * in + j)], static_cast<float>(ref)) << "row " << r << " col " << j;
      }
    }
  }
}

TEST(Fp4Dequant, U8StorageAndShapeErrors) {
  const OwnedTensor w = make_owned_tensor<uint8_t>("w", DType::U8, {1, 16}, std::vector<uint8_t>(16, 0x7a));
  const OwnedTensor s = make_owned_tensor<uint8_t>("s", DType::F8_E8M0, {1, 1}, {128});
  const auto out = dequantize_fp4(view_of(w), view_of(s));
  ASSERT_EQ(out.size(), 32u);
  EXPECT_EQ(out[0], -2.0f);  // 0xa: sign + magnitude index 2 (1.0) times 2^1
  EXPECT_EQ(out[1], 12.0f);  // 0x7: 6.0 times 2
  const OwnedTensor bad = make_owned_tensor<uint8_t>("s", DType::F8_E8M0, {1, 2}, {128, 128});
  expect_error([&] { dequantize_fp4(view_of(w), view_of(bad)); }, {"'s'", "[1, 2]", "expected [1, 1]"});
}

}  // namespace
}  // namespace deepinfer::io
