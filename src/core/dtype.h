#pragma once
// Storage element types and their scalar conversions to float32.
// Everything is computed in float32; these helpers widen stored values on the fly.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3, F8_E8M0, F4_E2M1, I8, U8, I32, I64, BOOL, F64 };

// Bytes per element; F4_E2M1 is packed two per byte, so its size is reported per byte pair (1 byte / 2).
constexpr size_t dtype_bits(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 64;
    case DType::F32: case DType::I32: return 32;
    case DType::F16: case DType::BF16: return 16;
    case DType::F8_E4M3: case DType::F8_E8M0: case DType::I8: case DType::U8: case DType::BOOL: return 8;
    case DType::F4_E2M1: return 4;
  }
  return 0;
}

std::string_view dtype_name(DType t);

inline float bf16_to_f32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

// Round-to-nearest-even, as torch's .to(bfloat16) does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return std::bit_cast<float>(sign);
    float v = std::ldexp(static_cast<float>(man), -24);  // subnormal
    return (h & 0x8000u) ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

// OCP FP8 E4M3 (the "fn" variant: no infinities, 0x7f/0xff are NaN, max 448), widened through a
// 256-entry table built at compile time from the bit layout (1 sign, 4 exponent bits with bias 7,
// 3 mantissa bits): one load per element instead of an ldexp.
namespace detail {
constexpr float f8e4m3_value(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80) << 24;
  const uint32_t exp = (v >> 3) & 0xf, man = v & 0x7;
  if (exp == 0xf && man == 0x7) return std::bit_cast<float>(0x7fc00000u);  // NaN
  if (exp == 0) {  // subnormal: man/8 * 2^-6 = man * 2^-9, exact in float
    const float magnitude = static_cast<float>(man) / 512.0f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp - 7 + 127) << 23) | (man << 20));
}
constexpr std::array<float, 256> make_f8e4m3_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = f8e4m3_value(static_cast<uint8_t>(c));
  return t;
}
}  // namespace detail
inline constexpr std::array<float, 256> kF8E4M3Table = detail::make_f8e4m3_table();

inline float f8e4m3_to_f32(uint8_t v) { return kF8E4M3Table[v]; }

// E8M0: a pure power of two 2^(v-127); 0xff is NaN.
inline float e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return std::nanf("");
  if (v == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127 is subnormal in f32
  return std::bit_cast<float>(static_cast<uint32_t>(v) << 23);
}

// FP4 E2M1 code (low 4 bits): values 0, 0.5, 1, 1.5, 2, 3, 4, 6 with a sign bit.
inline float f4e2m1_to_f32(uint8_t code) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[code & 0x7];
  return (code & 0x8) ? -v : v;
}

}  // namespace deepinfer
