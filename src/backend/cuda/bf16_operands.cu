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

// Stored dtypes (core/dtype.h's numbering, as DevMatrix), and the element-wise path.
constexpr int kBF16 = 2, kF8 = 3, kE8M0 = 4, kF4 = 5, kGeneric = -1;

// Thread i: row i / chunks, columns 8 (i % chunks) .. + 7. F: the stored format where every row's
// bytes are aligned for one vector load of 8 columns and a scale covers all 8 (weight_format);
// kGeneric: weight_at per column (fewer at the row's end).
template <int F>
__global__ void weight_bf16x3_kernel(DevMatrix w, uint16_t* out) {
  wait_for_previous_kernel();
  const int64_t chunks = (w.cols + 7) / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.rows * chunks) return;
  const int64_t r = i / chunks, c0 = (i % chunks) * 8;
  uint16_t* row = out + r * 3 * w.cols;
  if constexpr (F == kGeneric) {
    for (int64_t c = c0; c < c0 + 8 && c < w.cols; ++c) {
      const uint16_t b = bf16_bits(weight_at(w, r, c));
      row[c] = row[w.cols + c] = row[2 * w.cols + c] = b;
    }
  } else {
    uint4 v;
    if constexpr (F == kBF16) {
      v = *reinterpret_cast<const uint4*>(w.data + (r * w.cols + c0) * 2);  // already the bits
    } else {
      float s = 1.0f;
      uint32_t codes[2];
      if constexpr (F == kF8) {
        const uint2 q = *reinterpret_cast<const uint2*>(w.data + r * w.cols + c0);
        codes[0] = q.x, codes[1] = q.y;
        if (w.scale) s = e8m0_to_f32(w.scale[(r / w.block_rows) * w.scale_cols + c0 / w.block_cols]);
      } else {  // kF4: 8 codes in 4 bytes, one E8M0 per 32 columns
        codes[0] = *reinterpret_cast<const uint32_t*>(w.data + r * (w.cols / 2) + c0 / 2);
        s = e8m0_to_f32(w.scale[r * w.scale_cols + c0 / 32]);
      }
      uint16_t b[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float e = F == kF8 ? f8e4m3_to_f32(static_cast<uint8_t>(codes[j / 4] >> (8 * (j % 4))))
                                 : f4e2m1_to_f32(static_cast<uint8_t>((codes[0] >> (4 * j)) & 0xf));
        b[j] = bf16_bits(e * s);  // as weight_at: value times scale, exact in bf16
      }
      v = make_uint4(b[0] | (uint32_t{b[1]} << 16), b[2] | (uint32_t{b[3]} << 16), b[4] | (uint32_t{b[5]} << 16),
                     b[6] | (uint32_t{b[7]} << 16));
    }
#pragma unroll
    for (int part = 0; part < 3; ++part) *reinterpret_cast<uint4*>(row + part * w.cols + c0) = v;
  }
}

// The vector path's format for w, or kGeneric: 8-column chunks must start 16-byte aligned in out
// (cols % 8) and in the stored rows, and one scale must cover each chunk.
int weight_format(const DevMatrix& w, const uint16_t* out) {
  const auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  if (w.cols % 8 != 0 || !aligned(out, 16)) return kGeneric;
  switch (w.dtype) {
    case kBF16: return aligned(w.data, 16) ? kBF16 : kGeneric;
    case kF8:
      return aligned(w.data, 8) && (!w.scale || (w.scale_dtype == kE8M0 && w.block_cols % 8 == 0)) ? kF8 : kGeneric;
    case kF4: return aligned(w.data, 4) && w.scale_dtype == kE8M0 ? kF4 : kGeneric;
    default: return kGeneric;
  }
}

__device__ __forceinline__ void split3(float v, uint16_t& hi, uint16_t& mid, uint16_t& lo) {
  const float h = __bfloat162float(__float2bfloat16_rn(v));
  const float rest = isfinite(h) ? v - h : 0.0f;  // exact
  const float m = __bfloat162float(__float2bfloat16_rn(rest));
  hi = bf16_bits(v);
  mid = bf16_bits(m);
  lo = bf16_bits(rest - m);  // exact difference; bf16 holds its leading 8 bits
}

// Thread i: row-group i / chunks (row t, group g), columns 4 (i % chunks) .. + 3 of it; kVec: one
// float4 load and three 8-byte stores (C % 4 == 0, x 16-byte aligned).
template <bool kVec>
__global__ void split_x_bf16x3_kernel(const float* x, int64_t row_groups, int64_t C, uint16_t* out) {
  wait_for_previous_kernel();
  const int64_t chunks = (C + 3) / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row_groups * chunks) return;
  const int64_t rg = i / chunks, c0 = (i % chunks) * 4;
  const float* src = x + rg * C;
  uint16_t* dst = out + rg * 3 * C;
  if constexpr (kVec) {
    const float4 v = *reinterpret_cast<const float4*>(src + c0);
    uint16_t p[3][4];
    split3(v.x, p[0][0], p[1][0], p[2][0]);
    split3(v.y, p[0][1], p[1][1], p[2][1]);
    split3(v.z, p[0][2], p[1][2], p[2][2]);
    split3(v.w, p[0][3], p[1][3], p[2][3]);
#pragma unroll
    for (int part = 0; part < 3; ++part)
      *reinterpret_cast<uint2*>(dst + part * C + c0) =
          make_uint2(p[part][0] | (uint32_t{p[part][1]} << 16), p[part][2] | (uint32_t{p[part][3]} << 16));
  } else {
    for (int64_t c = c0; c < c0 + 4 && c < C; ++c) split3(src[c], dst[c], dst[C + c], dst[2 * C + c]);
  }
}

}  // namespace

bool weight_exact_in_bf16(const DevMatrix& w) {
  switch (w.dtype) {
    case kBF16: return w.scale == nullptr;
    case kF8: return w.scale == nullptr || w.scale_dtype == kE8M0;
    case kF4: return w.scale != nullptr && w.scale_dtype == kE8M0;
    default: return false;
  }
}

void launch_weight_bf16x3(const DevMatrix& w, uint16_t* out) {
  const int64_t n = w.rows * ((w.cols + 7) / 8);
  if (n <= 0) return;
  switch (weight_format(w, out)) {
    case kBF16: launch(weight_bf16x3_kernel<kBF16>, blocks_for(n, kThreads), kThreads, 0, w, out); break;
    case kF8: launch(weight_bf16x3_kernel<kF8>, blocks_for(n, kThreads), kThreads, 0, w, out); break;
    case kF4: launch(weight_bf16x3_kernel<kF4>, blocks_for(n, kThreads), kThreads, 0, w, out); break;
    default: launch(weight_bf16x3_kernel<kGeneric>, blocks_for(n, kThreads), kThreads, 0, w, out); break;
  }
}

void launch_split_x_bf16x3(const float* x, int64_t rows, int64_t groups, int64_t C, uint16_t* out) {
  const int64_t n = rows * groups * ((C + 3) / 4);
  if (n <= 0) return;
  const bool vec = C % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  if (vec)
    launch(split_x_bf16x3_kernel<true>, blocks_for(n, kThreads), kThreads, 0, x, rows * groups, C, out);
  else
    launch(split_x_bf16x3_kernel<false>, blocks_for(n, kThreads), kThreads, 0, x, rows * groups, C, out);
}

}  // namespace deepinfer::cuda
