#pragma once
// The CPU backend's GEMM: weights repacked once (on first use) into panels of 64 output rows laid
// out column-major ([cols][64]), so a step's tokens stream through each panel as an outer product:
// for every input column c, y[t, r] += x[t, c] * W[r, c] with one fused multiply-add per element,
// in column order. Every output is one sequential chain over the columns, whatever the number of
// tokens or which tokens share the call, so the kernel is batch-invariant by construction and the
// default mode pays nothing for determinism. BF16 weights stay BF16 in the panels (widened in
// registers); other dtypes (F16, FP8 with block scales, FP4 with E8M0 scales) are widened to F32
// once at packing time.
#include <cstdint>
#include <memory>
#include <mutex>
#include <map>
#include <vector>

#include "backend/weight_matrix.h"

namespace deepinfer::cpu {

class PackedLinear {
 public:
  static constexpr int64_t kPanelRows = 64;

  // y [tokens, w.rows] = x [tokens, w.cols] W^T.
  void run(const WeightMatrix& w, const float* x, int64_t tokens, float* y);
  size_t packed_bytes() const;

 private:
  struct Packed {
    int64_t rows = 0, cols = 0;
    bool bf16 = false;
    std::vector<uint16_t> half;  // bf16 panels
    std::vector<float> full;     // f32 panels
  };
  const Packed& packed(const WeightMatrix& w);

  mutable std::mutex mutex_;
  // Keyed by WeightMatrix::identity(). Weights must outlive the backend (backend.h): memory freed
  // and reused for another matrix of the very same description would hit a stale entry.
  std::map<WeightMatrix::Identity, std::unique_ptr<Packed>> cache_;
};

}  // namespace deepinfer::cpu
