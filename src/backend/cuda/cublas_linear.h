#pragma once
// linear / grouped_linear of many rows, and the MoE shared expert's GEMMs, through cuBLASLt
// (NVIDIA's GEMM library): bf16 tensor-core GEMMs at close to the card's bf16 rate, where our own
// tensor-core GEMM (tc_gemm.cu) runs prefill at a fraction of it. Operands: the weight widened to bf16 (exact for the released formats) three
// times along K, and x in three bf16 parts (bf16_operands.h), so a row keeps float32 accuracy.
//
// When it runs (ops_gemm.cpp): in the default mode (never under batch invariance, where cuBLAS's
// choice of kernel by the call's rows would change a row's bits, nor with DEEPINFER_TC_GEMM
// pinned), for calls of at least DEEPINFER_CUBLAS_MIN_ROWS rows (default 256) whose weight is exact
// in bf16 and whose tripled copy fits kMaxWeightBytes, outside decode steps (CUDA graphs replay only
// our own launches, and a decode step's eager runs must match its replays bit for bit:
// StepPlan::decode). DEEPINFER_CUBLAS_GEMM=0 turns it off; =1 requires the library.
//
// The library is opened at run time (it is 540 MB, part of the CUDA toolkit and of PyTorch's
// nvidia-cublas wheel): DEEPINFER_CUBLASLT names the file, else the loader's path and
// /usr/local/cuda/lib64 are searched. Missing, the default mode says so once and keeps our own
// kernels; DEEPINFER_CUBLAS_GEMM=1 makes it an error.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backend/cuda/device_types.h"
#include "core/buffer.h"

namespace deepinfer::cuda {

// Whether the path is on (DEEPINFER_CUBLAS_GEMM and the library, read once).
bool cublas_gemm_enabled();
// DEEPINFER_CUBLAS_MIN_ROWS, default 256 (read once).
int64_t cublas_min_rows();

class CublasLinear {
 public:
  // Largest tripled bf16 weight (scratch): 3 * rows * cols * 2 bytes. V4-Flash's attention
  // projections need 24-192 MB; the vocabulary head (3.2 GB) stays on our kernels.
  static constexpr size_t kMaxWeightBytes = size_t{512} << 20;

  explicit CublasLinear(Allocator& device_memory);  // opens the library; throws if it is missing
  ~CublasLinear();
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  // y [T, G*R] (float32, row stride G*R) = for each group g, W'_g [R, K'] times B_g [T, K']^T, with
  // W' [G*R, K'] and B [T, G, K'] bf16, K' = 3C. Returns false, before launching anything, where
  // cuBLASLt offers no algorithm for the shapes and alignments.
  bool plan(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b, const float* y);
  void run(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b, float* y, cudaStream_t stream);

  // Where the library came from and its version, for logs.
  const std::string& library() const;

 private:
  struct Gemm;
  static constexpr size_t kMaxPlans = 512;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, int>;  // R, K', G, T, alignments
  Gemm* find(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b, const float* y);

  void* handle_ = nullptr;  // cublasLtHandle_t
  Buffer workspace_;
  std::map<Key, std::unique_ptr<Gemm>> gemms_;
};

}  // namespace deepinfer::cuda
