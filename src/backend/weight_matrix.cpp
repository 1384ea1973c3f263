// WeightMatrix: views, slices and widening of stored weights to float32.
#include "backend/weight_matrix.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace deepinfer {

namespace {

float scale_at(const WeightMatrix& w, int64_t r, int64_t c) {
  const int64_t i = (r / w.block_rows) * w.scale_cols + c / w.block_cols;
  if (w.scale_dtype == DType::F8_E8M0) return e8m0_to_f32(static_cast<uint8_t>(w.scale[i]));
  float v;
  std::memcpy(&v, w.scale + i * sizeof(float), sizeof(float));
  return v;
}

// A stored tensor need not be aligned to its element size (safetensors packs tensors back to back:
// an odd-sized FP8 tensor leaves the next one at an odd address), so 16-bit elements are read with
// memcpy (one plain load on x86), never through a uint16_t*.
uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

WeightMatrix WeightMatrix::row_slice(int64_t begin, int64_t count) const {
  DEEPINFER_CHECK(begin >= 0 && count >= 0 && begin + count <= rows, "row slice [{}, {}) outside {} rows",
                  begin, begin + count, rows);
  WeightMatrix out = *this;
  out.rows = count;
  if (dtype == DType::F4_E2M1) {
    out.data = data + begin * (cols / 2);
    if (scale) out.scale = scale + begin * scale_cols;  // one E8M0 per 32 columns, per row
  } else {
    out.data = data + begin * cols * (dtype_bits(dtype) / 8);
    if (scale) {
      DEEPINFER_CHECK(begin % block_rows == 0, "row slice at {} not aligned to scale block {}", begin, block_rows);
      out.scale = scale + (begin / block_rows) * scale_cols * (scale_dtype == DType::F32 ? 4 : 1);
    }
  }
  return out;
}

size_t WeightMatrix::stored_bytes() const { return static_cast<size_t>(rows * cols * dtype_bits(dtype) / 8); }

void WeightMatrix::row_to_float(int64_t r, float* out) const {
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, data + r * cols * 4, cols * sizeof(float));
      return;
    case DType::BF16: {
      const std::byte* p = data + r * cols * 2;
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(load_u16(p + c * 2));
      return;
    }
    case DType::F16: {
      const std::byte* p = data + r * cols * 2;
      for (int64_t c = 0; c < cols; ++c) out[c] = f16_to_f32(load_u16(p + c * 2));
      return;
    }
    case DType::F8_E4M3: {
      const auto* p = reinterpret_cast<const uint8_t*>(data) + r * cols;
      if (!scale) {
        for (int64_t c = 0; c < cols; ++c) out[c] = f8e4m3_to_f32(p[c]);
        return;
      }
      for (int64_t c0 = 0; c0 < cols; c0 += block_cols) {
        const float s = scale_at(*this, r, c0);
        const int64_t c1 = std::min(cols, c0 + block_cols);
        for (int64_t c = c0; c < c1; ++c) out[c] = f8e4m3_to_f32(p[c]) * s;
      }
      return;
    }
    case DType::F4_E2M1: {
      const auto* p = reinterpret_cast<const uint8_t*>(data) + r * (cols / 2);
      const auto* s = reinterpret_cast<const uint8_t*>(scale) + r * scale_cols;
      for (int64_t c = 0; c < cols; c += 2) {
        const float sc = e8m0_to_f32(s[c / 32]);
        out[c] = f4e2m1_to_f32(p[c / 2] & 0xf) * sc;
        out[c + 1] = f4e2m1_to_f32(p[c / 2] >> 4) * sc;
      }
      return;
    }
    default:
      fail("linear: unsupported weight dtype {}", dtype_name(dtype));
  }
}

}  // namespace deepinfer
