#pragma once
// Launchers of the kernels that turn a linear's operands into the bf16 matrices the cuBLASLt GEMM
// takes (cublas_linear.h). Plain pointers and sizes only: shared by g++ and nvcc.
//
// The product keeps float32 accuracy: x = hi + mid + lo exactly (three bf16 parts), and the weight
// is exact in bf16, so y = W [x_hi | x_mid | x_lo]^T over K' = 3C with W repeated three times along K
// is the float32 product up to the order of the additions (as the tensor-core GEMM, gemm_kernels.h).
#include <cstdint>

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

// Whether every value of w, block scale applied, is a bf16 (so launch_weight_bf16x3 is exact): BF16;
// FP8 e4m3 without scales or with E8M0 ones; FP4 e2m1 with E8M0 scales (values under 2^-126
// would round: no released scale is near that).
bool weight_exact_in_bf16(const DevMatrix& w);

// out [w.rows, 3 * w.cols] bf16: each row of w (scaled) three times.
void launch_weight_bf16x3(const DevMatrix& w, uint16_t* out);

// out [rows, groups, 3 * C] bf16 from x [rows, groups * C] float32: each group's C columns as hi,
// then mid, then lo (hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid); mid = lo = 0 where
// x is not finite, so an infinity stays one).
void launch_split_x_bf16x3(const float* x, int64_t rows, int64_t groups, int64_t C, uint16_t* out);

}  // namespace deepinfer::cuda
