// test_backend_ops: the DeepSeek-V4.1 activation fake-quantisations (ActQuant) of every backend
// against a double-precision reference that picks the nearest code by enumerating the format's
// values (ties to the even code), on seeded random groups of many magnitudes, all-zero groups and
// exact ties.
#include <cmath>
#include <limits>

#include "backend_ops_util.h"

namespace deepinfer::backend_ops_test {
namespace {

using backend::ActQuant;

// Every non-negative value of a format with its code (the code's lowest bit decides ties).
std::vector<std::pair<double, int>> e4m3_values() {
  std::vector<std::pair<double, int>> out;
  for (int code = 0; code < 0x7f; ++code) out.push_back({f8e4m3_to_f32(static_cast<uint8_t>(code)), code});  // 0x7f is NaN
  return out;
}
std::vector<std::pair<double, int>> e2m1_values() {
  std::vector<std::pair<double, int>> out;
  for (int code = 0; code < 8; ++code) out.push_back({f4e2m1_to_f32(static_cast<uint8_t>(code)), code});
  return out;
}

// Nearest representable value to v (saturating at the largest), ties to the even code.
double nearest(double v, const std::vector<std::pair<double, int>>& values) {
  const double a = std::min(std::fabs(v), values.back().first);
  double best = 0, best_d = std::numeric_limits<double>::infinity();
  int best_code = 0;
  for (const auto& [value, code] : values) {
    const double d = std::fabs(value - a);
    if (d < best_d || (d == best_d && code % 2 == 0 && best_code % 2 == 1)) best = value, best_d = d, best_code = code;
  }
  return std::copysign(best, v);
}

double ceil_pow2(double y) { return std::exp2(std::ceil(std::log2(y))); }

std::vector<float> ref_quantize(const std::vector<float>& x, ActQuant format) {
  const int64_t group = format == ActQuant::Fp4E4m3x16 ? 16 : 32;
  static const auto fp8 = e4m3_values(), fp4 = e2m1_values();
  std::vector<float> out(x.size());
  for (size_t g0 = 0; g0 < x.size(); g0 += static_cast<size_t>(group)) {
    double amax = 0;
    for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[g0 + i])));
    double scale = 0;
    if (format == ActQuant::Fp8Ue8m0) scale = ceil_pow2(std::max(amax, static_cast<double>(1e-4f)) / 448.0);
    if (format == ActQuant::Fp4Ue8m0) scale = ceil_pow2(std::max(amax, 6.0 * std::ldexp(1.0, -126)) / 6.0);
    if (format == ActQuant::Fp4E4m3x16) scale = nearest(std::max(amax, 6.0 * std::ldexp(1.0, -9)) / 6.0, fp8);
    const auto& values = format == ActQuant::Fp8Ue8m0 ? fp8 : fp4;
    for (int64_t i = 0; i < group; ++i) out[g0 + i] = static_cast<float>(nearest(x[g0 + i] / scale, values) * scale);
  }
  return out;
}

const char* format_name(ActQuant f) {
  return f == ActQuant::Fp8Ue8m0 ? "fp8 ue8m0/32" : f == ActQuant::Fp4Ue8m0 ? "fp4 ue8m0/32" : "fp4 e4m3/16";
}

TEST_P(BackendOps, QuantizeDequantizeEveryFormat) {
  const int64_t rows = 5, n = 96;  // 3 groups of 32 / 6 of 16 per row
  for (ActQuant format : {ActQuant::Fp8Ue8m0, ActQuant::Fp4Ue8m0, ActQuant::Fp4E4m3x16}) {
    SCOPED_TRACE(format_name(format));
    std::vector<float> x;
    for (int64_t r = 0; r < rows; ++r) {
      // A magnitude per row from tiny to large, so scales cover many binades (and e4m3 subnormals).
      const float scale = std::ldexp(1.0f, static_cast<int>(uniform_int(-20, 12)));
      const auto row = randoms(static_cast<size_t>(n), scale);
      x.insert(x.end(), row.begin(), row.end());
    }
    std::fill(x.begin() + n, x.begin() + n + 32, 0.0f);  // an all-zero group: the amax floor keeps it finite
    auto dx = on_device(x);
    be->quantize_dequantize(dx.view({rows, n}), format);
    const auto got = dx.download();
    const auto want = ref_quantize(x, format);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << "NaN at " << i;
      ASSERT_EQ(got[i], want[i]) << "element " << i << " of " << x[i];
    }
  }
}

TEST_P(BackendOps, QuantizeDequantizeTiesGoToEven) {
  // amax 6 in each group: fp4 ue8m0 scale 2^ceil(log2(1)) = 1, so values are quantised as they are.
  std::vector<float> x(32, 0.0f);
  const std::vector<float> ties = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.75f, -5.0f, 6.0f};
  const std::vector<float> want = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, -1.0f, -4.0f, 6.0f};
  std::copy(ties.begin(), ties.end(), x.begin());
  auto dx = on_device(x);
  be->quantize_dequantize(dx.view({1, 32}), ActQuant::Fp4Ue8m0);
  const auto got = dx.download();
  for (size_t i = 0; i < ties.size(); ++i) EXPECT_EQ(got[i], want[i]) << "fp4 of " << ties[i];
  // fp8: amax 448 gives scale 1; 17 lies between 16 and 18 (step 2): to even mantissa, 16; 19 -> 20.
  std::vector<float> y(32, 0.0f);
  y[0] = 448.0f, y[1] = 17.0f, y[2] = 19.0f, y[3] = 0x1p-10f /* half the subnormal step: to 0 */, y[4] = 3 * 0x1p-10f;
  auto dy = on_device(y);
  be->quantize_dequantize(dy.view({1, 32}), ActQuant::Fp8Ue8m0);
  const auto goty = dy.download();
  EXPECT_EQ(goty[0], 448.0f);
  EXPECT_EQ(goty[1], 16.0f);
  EXPECT_EQ(goty[2], 20.0f);
  EXPECT_EQ(goty[3], 0.0f);
  EXPECT_EQ(goty[4], 2 * 0x1p-9f);  // 1.5 subnormal steps: to the even step 2
}

TEST_P(BackendOps, QuantizeDequantizeRejectsPartialGroups) {
  auto dx = on_device(std::vector<float>(24, 1.0f));
  EXPECT_THROW(be->quantize_dequantize(dx.view({1, 24}), ActQuant::Fp8Ue8m0), Error);
  EXPECT_THROW(be->quantize_dequantize(dx.view({3, 8}), ActQuant::Fp4E4m3x16), Error);
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
