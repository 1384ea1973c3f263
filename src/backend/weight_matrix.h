#pragma once
// A weight matrix as stored in the checkpoint (F32, BF16, F16, block-scaled FP8 e4m3, packed FP4
// e2m1 with E8M0 scales): a host view into the mmap that every backend consumes in its stored dtype.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>

#include "core/dtype.h"

namespace deepinfer {

// A weight matrix [rows = out_features, cols = in_features], row-major, as stored on disk.
struct WeightMatrix {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;  // rows x cols elements (FP4: rows x cols/2 bytes)
  // Block scales (FP8: [ceil(rows/block_rows), ceil(cols/block_cols)]; FP4: one per 32 along cols).
  DType scale_dtype = DType::F32;  // F32 (weight_scale_inv) or F8_E8M0
  const std::byte* scale = nullptr;
  int64_t scale_cols = 0;
  int64_t block_rows = 0, block_cols = 0;
  std::shared_ptr<const void> keep_alive;  // owns converted storage when the view is not into the mmap

  bool valid() const { return data != nullptr; }
  // A view of rows [begin, begin + count).
  WeightMatrix row_slice(int64_t begin, int64_t count) const;
  // Writes row r (cols floats) widened to float32.
  void row_to_float(int64_t r, float* out) const;
  size_t stored_bytes() const;

  // Everything that tells one stored matrix from another (a row slice starting at row 0 shares its
  // parent's data pointer): the key under which backends keep a prepared copy (packed panels,
  // a device mirror).
  using Identity = std::tuple<const void*, int64_t, int64_t, int, const void*, int64_t, int64_t>;
  Identity identity() const {
    return {data, rows, cols, static_cast<int>(dtype), scale, block_rows, block_cols};
  }
};

}  // namespace deepinfer
