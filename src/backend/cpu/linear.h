#pragma once
// Linear layers on the CPU with weights kept in their stored dtype (F32, BF16, F16, block-scaled
// FP8 e4m3, packed FP4 e2m1). Rows are widened to float32 tile by tile inside the kernel, so a
// bf16 model stays bf16 in memory; all accumulation is float32.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/weight_matrix.h"

namespace deepinfer::cpu {

using deepinfer::WeightMatrix;

// y[t, :] = W x[t, :] for t in [0, tokens): x is [tokens, W.cols], y is [tokens, W.rows].
void linear(const WeightMatrix& w, const float* x, int64_t tokens, float* y);

// Same as linear() but only for the given output rows' range (used by expert GEMMs on slices).
void linear_rows(const WeightMatrix& w, const float* x, int64_t tokens, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end);

// linear() whose every output element is one fixed-order dot product (ops.h dot()), so a row's
// result does not depend on how many rows the call has: the batch-invariant kernel.
void linear_invariant(const WeightMatrix& w, const float* x, int64_t tokens, float* y);

}  // namespace deepinfer::cpu
