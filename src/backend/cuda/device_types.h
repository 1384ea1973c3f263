#pragma once
// Plain structs shared by the backend's host code (.cpp, g++) and its kernels (.cu, nvcc). Kernel
// files include only this and CUDA headers: nvcc's front end cannot compile fmt's compile-time
// format checks, so nothing that includes core/error.h may be built by nvcc.
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// Kernel argument structs have no padding: a recorded step is replayed only when the bytes of
// every launch's arguments match (launch.cuh), and padding bytes are not defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"

// A stored weight as kernels see it (by value). dtype / scale_dtype use core/dtype.h's DType
// numbering: F32 0, F16 1, BF16 2, F8_E4M3 3, F8_E8M0 4, F4_E2M1 5.
struct DevMatrix {
  int dtype;
  int scale_dtype;
  int64_t rows, cols;
  const uint8_t* data;
  const uint8_t* scale;
  int64_t scale_cols, block_rows, block_cols;
  // FP8 whose every value times its scale is exact in f16 (no scale, or E8M0 scales 2^-15 .. 2^7):
  // the tensor-core GEMM may take it as f16 (tc_gemm.cu, kF8H). Set at upload from the scales.
  int32_t fp8_exact_in_f16;
  int32_t unused;  // (no padding: see above)
  // BF16 whose rows times these powers of two (one a row) are exact in f16 (bf16_row_scale.h): the
  // tensor-core GEMM may take it as f16 (tc_gemm.cu, kBF16H). Null otherwise. Set at upload.
  const float* row_scale;
};

// One sequence of the step, on the device; its block table is blocks[block_offset ...].
struct DeviceSeq {
  int64_t begin, count, start;
  int32_t slot;
  int32_t block_offset;
  int64_t window_floor, cached_until;  // as backend::SeqSlice
};

// Rotary frequencies on the device.
struct DevRope {
  const float* inv_freq;  // [half]
  int64_t half;
  float attention_factor;
  int32_t pad;
};

// The two state pools (as backend::StateStorage, F32).
struct DevState {
  float* slots;
  float* blocks;
  int64_t slot_elems, block_elems, block_tokens;
};

// A compressor's placement (as backend::CompressorLayout).
struct DevCompressor {
  int64_t rate, head_dim, width;
  int64_t overlap;  // 0 / 1
  int64_t slot_offset, block_offset, entries_per_block;
};

#pragma GCC diagnostic pop

// Entry e of a compressor of sequence s.
__host__ __device__ inline float* dev_entry(const DevState& st, const DeviceSeq& s, const int32_t* blocks,
                                            const DevCompressor& c, int64_t e) {
  const int32_t b = blocks[s.block_offset + e / c.entries_per_block];
  return st.blocks + static_cast<int64_t>(b) * st.block_elems + c.block_offset + (e % c.entries_per_block) * c.head_dim;
}

}  // namespace deepinfer::cuda
