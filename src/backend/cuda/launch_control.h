#pragma once
// Where this thread's kernels go and whether they run. CudaBackend sets it around its ops; every
// launch in the kernel files goes through launch() (launch.cuh), which also folds the kernel, its
// grid and its argument bytes into a signature while a step is recorded or replayed: a recorded
// step (a CUDA graph) is replayed only when the replaying step would launch exactly the same work.
// Plain C++ (no fmt): included by nvcc-compiled kernel files.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace deepinfer::cuda {

struct LaunchControl {
  cudaStream_t stream = nullptr;
  bool record = false;    // fold every launch and stream copy into `signature`
  bool suppress = false;  // replaying a recording: fold, but launch nothing
  uint64_t signature = 0;

  void fold(const void* bytes, size_t n);
  template <typename T>
  void fold_value(const T& v) {
    fold(&v, sizeof v);
  }
};

// Whether launch() uses programmatic dependent launch (launch.cuh): yes unless DEEPINFER_PDL=0,
// read once per process.
bool dependent_launch_enabled();

// SMs of the device current at the first call (read once per process: the launch sizes of the
// streaming kernels; one kind of GPU per process).
int device_sm_count();
// Shared memory of one SM of the current device, in bytes (read once).
size_t device_smem_per_sm();
// The most shared memory one CTA may take on the current device (with the kernel's opt-in), bytes.
size_t device_smem_per_block_optin();

// Bytes of a weight's rows to ask the L2 for before a kernel's wait, per CTA: rows_per_cta rows of
// row_bytes each (what the CTA reads first), `ctas` CTAs asking. At most DEEPINFER_L2_PREFETCH_KB a
// CTA (default 64; 0: none) and 24 MB in all (half the L2, so the lines are there when read);
// 0 when that leaves less than 16 bytes a row. A multiple of 16 (the bulk prefetch's unit), rounded
// down, so a row's prefetch ends inside it.
int32_t l2_prefetch_row_bytes(int64_t rows_per_cta, int64_t row_bytes, int64_t ctas);

// This thread's control (thread-local: data-parallel ranks drive their GPUs from their own threads).
LaunchControl& launch_control();

// Stream operations of the ops, under the same control (recorded, suppressed on replay).
cudaError_t stream_memset(void* dst, int value, size_t bytes);
cudaError_t stream_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

}  // namespace deepinfer::cuda
