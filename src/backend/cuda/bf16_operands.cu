// Operands of the cuBLASLt GEMM (bf16_operands.h): the weight widened to bf16 three times along K,
// and x split into three bf16 parts. Memory-bound element-wise passes, four columns a thread.
#include <cuda_bf16.h>

#include "backend/cuda/bf16_operands.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint16_t bf16_bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

// Thread i: row i / chunks, columns 4 (i % chunks) .. + 3 (fewer at the row's end).
__global__ void weight_bf16x3_kernel(DevMatrix w, uint16_t* out) {
  wait_for_previous_kernel();
  const int64_t chunks = (w.cols + 3) / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.rows * chunks) return;
  const int64_t r = i / chunks, c0 = (i % chunks) * 4;
  uint16_t* row = out + r * 3 * w.cols;
  for (int64_t c = c0; c < c0 + 4 && c < w.cols; ++c) {
    const uint16_t b = bf16_bits(weight_at(w, r, c));
    row[c] = b;
    row[w.cols + c] = b;
    row[2 * w.cols + c] = b;
  }
}

// Thread i: row-group i / chunks (row t, group g), columns 4 (i % chunks) .. + 3 of it.
__global__ void split_x_bf16x3_kernel(const float* x, int64_t row_groups, int64_t C, uint16_t* out) {
  wait_for_previous_kernel();
  const int64_t chunks = (C + 3) / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row_groups * chunks) return;
  const int64_t rg = i / chunks, c0 = (i % chunks) * 4;
  const float* src = x + rg * C;
  uint16_t* dst = out + rg * 3 * C;
  for (int64_t c = c0; c < c0 + 4 && c < C; ++c) {
    const float v = src[c];
    const float hi = __bfloat162float(__float2bfloat16_rn(v));
    const bool finite = isfinite(hi);
    const float rest = finite ? v - hi : 0.0f;  // exact
    const float mid = __bfloat162float(__float2bfloat16_rn(rest));
    dst[c] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    dst[C + c] = bf16_bits(mid);
    dst[2 * C + c] = bf16_bits(rest - mid);  // exact difference; bf16 holds its leading 8 bits
  }
}

}  // namespace

bool weight_exact_in_bf16(const DevMatrix& w) {
  constexpr int kBF16 = 2, kF8 = 3, kE8M0 = 4, kF4 = 5;
  switch (w.dtype) {
    case kBF16: return w.scale == nullptr;
    case kF8: return w.scale == nullptr || w.scale_dtype == kE8M0;
    case kF4: return w.scale != nullptr && w.scale_dtype == kE8M0;
    default: return false;
  }
}

void launch_weight_bf16x3(const DevMatrix& w, uint16_t* out) {
  const int64_t n = w.rows * ((w.cols + 3) / 4);
  if (n <= 0) return;
  launch(weight_bf16x3_kernel, blocks_for(n, kThreads), kThreads, 0, w, out);
}

void launch_split_x_bf16x3(const float* x, int64_t rows, int64_t groups, int64_t C, uint16_t* out) {
  const int64_t n = rows * groups * ((C + 3) / 4);
  if (n <= 0) return;
  launch(split_x_bf16x3_kernel, blocks_for(n, kThreads), kThreads, 0, x, rows * groups, C, out);
}

}  // namespace deepinfer::cuda
