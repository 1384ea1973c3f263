// CPU reference: the DeepSeek-V4.1 activation fake-quantisations (backend.h, ActQuant), written
// from the reference's kernel semantics: float32 scale arithmetic, round-to-nearest-even casts that
// saturate, power-of-two scales taken from the exponent bits (2^ceil(log2 y)).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {

// 2^ceil(log2(y)) for a positive normal float, as the kernel's fast_round_scale: the exponent,
// plus one when any mantissa bit is set.
float pow2_ceil(float y) {
  const auto bits = std::bit_cast<uint32_t>(y);
  const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return std::bit_cast<float>(static_cast<uint32_t>(exponent) << 23);
}

// Round to a grid of step 2^(e - mantissa_bits) around |x| (e = its binade, at least min_exponent),
// to nearest even, then clamp to max: the value of the nearest code of a small float format.
float round_to_format(float x, int mantissa_bits, int min_exponent, float max) {
  if (std::isnan(x)) return x;
  const float a = std::min(std::fabs(x), max);
  if (a == 0.0f) return std::copysign(0.0f, x);
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int binade = std::max(e - 1, min_exponent);
  const float step = std::ldexp(1.0f, binade - mantissa_bits);
  const float r = std::min(std::nearbyint(a / step) * step, max);  // default rounding: to nearest even
  return std::copysign(r, x);
}

float to_e4m3(float x) { return round_to_format(x, 3, -6, 448.0f); }  // subnormal step 2^-9
float to_e2m1(float x) { return round_to_format(x, 1, 0, 6.0f); }     // codes 0, .5, 1, 1.5, 2, 3, 4, 6

void quantize_group(float* v, int64_t n, backend::ActQuant format) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  float scale;
  switch (format) {
    case backend::ActQuant::Fp8Ue8m0:
      scale = pow2_ceil(std::max(amax, 1e-4f) * (1.0f / 448.0f));
      for (int64_t i = 0; i < n; ++i) v[i] = to_e4m3(v[i] / scale) * scale;
      return;
    case backend::ActQuant::Fp4Ue8m0:
      scale = pow2_ceil(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / 6.0f));
      break;
    case backend::ActQuant::Fp4E4m3x16:
      scale = to_e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f);
      break;
  }
  for (int64_t i = 0; i < n; ++i) v[i] = to_e2m1(std::clamp(v[i] / scale, -6.0f, 6.0f)) * scale;
}

}  // namespace

void CpuBackend::quantize_dequantize(TensorView x, backend::ActQuant format) {
  DEEPINFER_CHECK(x.dtype == DType::F32 && x.device == Device::CPU && x.is_contiguous(),
                  "quantize_dequantize: expected a contiguous F32 CPU tensor");
  const int64_t group = format == backend::ActQuant::Fp4E4m3x16 ? 16 : 32;
  DEEPINFER_CHECK(x.last_dim() % group == 0, "quantize_dequantize: last dimension {} is not a multiple of the group {}",
                  x.last_dim(), group);
  float* data = x.f32();
  const int64_t groups = x.numel() / group;
  ThreadPool::global().parallel_for(static_cast<size_t>(groups), [&](size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) quantize_group(data + static_cast<int64_t>(g) * group, group, format);
  });
}

}  // namespace deepinfer::cpu
