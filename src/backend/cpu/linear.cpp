#include "backend/cpu/linear.h"

#include "backend/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {

// OpenBLAS must not start its own threads under our pool (that oversubscribes the cores).
struct BlasSingleThreaded {
  BlasSingleThreaded() { openblas_set_num_threads(1); }
};
const BlasSingleThreaded kBlasSingleThreaded;

float scale_at(const WeightMatrix& w, int64_t r, int64_t c) {
  const int64_t i = (r / w.block_rows) * w.scale_cols + c / w.block_cols;
  if (w.scale_dtype == DType::F8_E8M0) return e8m0_to_f32(static_cast<uint8_t>(w.scale[i]));
  float v;
  std::memcpy(&v, w.scale + i * sizeof(float), sizeof(float));
  return v;
}

// Output rows per tile when a tile of the weight is widened and handed to sgemm.
constexpr int64_t kTileRows = 64;
// At or below this many tokens a direct dot-product kernel beats widening tiles.
constexpr int64_t kGemvTokens = 2;

}  // namespace

void linear_rows(const WeightMatrix& w, const float* x, int64_t tokens, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end) {
  const int64_t k = w.cols;
  if (w.dtype == DType::F32) {
    const auto* wf = reinterpret_cast<const float*>(w.data) + row_begin * k;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, row_end - row_begin, k, 1.0f, x, k, wf, k, 0.0f,
                y + row_begin, y_stride);
    return;
  }
  if (tokens <= kGemvTokens) {
    std::vector<float> row(k);
    for (int64_t r = row_begin; r < row_end; ++r) {
      w.row_to_float(r, row.data());
      for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + r] = dot(row.data(), x + t * k, k);
    }
    return;
  }
  std::vector<float> tile(kTileRows * k);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
    const int64_t n = std::min(kTileRows, row_end - r0);
    for (int64_t r = 0; r < n; ++r) w.row_to_float(r0 + r, tile.data() + r * k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, n, k, 1.0f, x, k, tile.data(), k, 0.0f, y + r0,
                y_stride);
  }
}

void linear(const WeightMatrix& w, const float* x, int64_t tokens, float* y) {
  if (tokens == 0 || w.rows == 0) return;
  // Split output rows across the pool; small matrices run on the calling thread.
  const int64_t work = w.rows * w.cols * tokens;
  const size_t min_rows = work < (1 << 16) ? static_cast<size_t>(w.rows) : static_cast<size_t>(kTileRows);
  ThreadPool::global().parallel_for(
      static_cast<size_t>(w.rows),
      [&](size_t b, size_t e) { linear_rows(w, x, tokens, y, w.rows, static_cast<int64_t>(b), static_cast<int64_t>(e)); },
      min_rows);
}

void linear_invariant(const WeightMatrix& w, const float* x, int64_t tokens, float* y) {
  if (tokens == 0 || w.rows == 0) return;
  const int64_t k = w.cols;
  ThreadPool::global().parallel_for(
      static_cast<size_t>((w.rows + kTileRows - 1) / kTileRows),
      [&](size_t b, size_t e) {
        thread_local std::vector<float> tile;
        tile.resize(static_cast<size_t>(kTileRows * k));
        for (size_t ti = b; ti < e; ++ti) {
          const int64_t r0 = static_cast<int64_t>(ti) * kTileRows, n = std::min(kTileRows, w.rows - r0);
          const float* rows = nullptr;
          if (w.dtype == DType::F32) {
            rows = reinterpret_cast<const float*>(w.data) + r0 * k;
          } else {
            for (int64_t r = 0; r < n; ++r) w.row_to_float(r0 + r, tile.data() + r * k);
            rows = tile.data();
          }
          // Four tokens per pass over a weight row; each output is still one dot_rows chain.
          int64_t t = 0;
          for (; t + 4 <= tokens; t += 4) {
            const float* xs[4] = {x + t * k, x + (t + 1) * k, x + (t + 2) * k, x + (t + 3) * k};
            float out[4];
            for (int64_t r = 0; r < n; ++r) {
              dot_rows<4>(rows + r * k, xs, k, out);
              for (int64_t i = 0; i < 4; ++i) y[(t + i) * w.rows + r0 + r] = out[i];
            }
          }
          for (; t < tokens; ++t)
            for (int64_t r = 0; r < n; ++r) y[t * w.rows + r0 + r] = dot(rows + r * k, x + t * k, k);
        }
      },
      1);
}

}  // namespace deepinfer::cpu

namespace deepinfer {

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
      const auto* p = reinterpret_cast<const uint16_t*>(data) + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(p[c]);
      return;
    }
    case DType::F16: {
      const auto* p = reinterpret_cast<const uint16_t*>(data) + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = f16_to_f32(p[c]);
      return;
    }
    case DType::F8_E4M3: {
      const auto* p = reinterpret_cast<const uint8_t*>(data) + r * cols;
      if (!scale) {
        for (int64_t c = 0; c < cols; ++c) out[c] = f8e4m3_to_f32(p[c]);
        return;
      }
      for (int64_t c0 = 0; c0 < cols; c0 += block_cols) {
        const float s = cpu::scale_at(*this, r, c0);
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
