// Ceilings measured on the GPU for `deepinfer bench` (see ceilings.h).
#include "backend/cuda/ceilings.h"

#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/runtime_library.h"

namespace deepinfer::cuda {

namespace {

// Median of `reps` timed calls of `fn` (after `warmup` untimed ones), in seconds, by CUDA events.
double median_seconds(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  DEEPINFER_CUDA_CHECK(cudaEventCreate(&a));
  DEEPINFER_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    DEEPINFER_CUDA_CHECK(cudaEventRecord(a));
    fn();
    DEEPINFER_CUDA_CHECK(cudaEventRecord(b));
    DEEPINFER_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DEEPINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { DEEPINFER_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Uniform values in [-1, 1) as bf16 bits (never zeros: they run faster than real data).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float f = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 2147483648.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = static_cast<uint16_t>(bits >> 16);
  }
  return v;
}

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);


}  // namespace

std::string device_description() {
  int dev = 0;
  DEEPINFER_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  DEEPINFER_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return fmt::format("{} ({} SMs, {:.1f} GiB, L2 {} MB, CUDA driver {}.{})", p.name, p.multiProcessorCount,
                     static_cast<double>(p.totalGlobalMem) / (1u << 30), p.l2CacheSize >> 20, driver / 1000,
                     driver % 1000 / 10);
}

Measured measure_copy() {
  const size_t bytes = size_t{2} << 30;  // far above the 60 MB L2
  DeviceBuffer a(bytes), b(bytes);
  DEEPINFER_CUDA_CHECK(cudaMemset(a.p, 1, bytes));
  DEEPINFER_CUDA_CHECK(cudaMemset(b.p, 2, bytes));
  const double s = median_seconds(
      [&] { DEEPINFER_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, nullptr)); }, 3, 10);
  return {2.0 * static_cast<double>(bytes) / s, "cudaMemcpy device to device, 2 GiB, median of 10, read + write"};
}

Measured measure_gemm_bf16() {
  const RuntimeLibrary opened = open_runtime_library(
      "DEEPINFER_CUBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                           "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so"});
  if (!opened.handle) return {0, "cuBLAS not found (tried " + opened.name + "; set DEEPINFER_CUBLAS)"};
  void* const h = opened.handle;
  const std::string& lib = opened.name;
  auto create = reinterpret_cast<CreateFn>(dlsym(h, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<DestroyFn>(dlsym(h, "cublasDestroy_v2"));
  auto gemm = reinterpret_cast<GemmExFn>(dlsym(h, "cublasGemmEx"));
  if (!create || !destroy || !gemm) return {0, lib + " lacks cublasCreate_v2 / cublasGemmEx"};
  const int M = 8192, N = 4096, K = 4096;  // tokens x out x in: an 8K-prompt projection
  DeviceBuffer A(size_t{2} * M * K), B(size_t{2} * K * N), C(size_t{2} * M * N);
  const auto ha = random_bf16(size_t{1} * M * K, 1), hb = random_bf16(size_t{1} * K * N, 2);
  DEEPINFER_CUDA_CHECK(cudaMemcpy(A.p, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  DEEPINFER_CUDA_CHECK(cudaMemcpy(B.p, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  cublasHandle_t handle = nullptr;
  if (create(&handle) != CUBLAS_STATUS_SUCCESS) return {0, lib + ": cublasCreate failed"};
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  // Column-major: C^T [N, M] = B^T [N, K] A^T [K, M], i.e. row-major C = A W^T with W = B^T.
  const double s = median_seconds(
      [&] {
        const cublasStatus_t st = gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B.p, CUDA_R_16BF, K, A.p,
                                       CUDA_R_16BF, K, &beta, C.p, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) status = st;
      },
      3, 10);
  destroy(handle);
  if (status != CUBLAS_STATUS_SUCCESS) return {0, fmt::format("{}: cublasGemmEx failed ({})", lib, static_cast<int>(status))};
  return {2.0 * M * N * K / s, fmt::format("cublasGemmEx bf16 -> bf16, fp32 accumulate, {} x {} x {}, random data, "
                                           "median of 10 ({})", M, N, K, lib)};
}

void profiler_start() { DEEPINFER_CUDA_CHECK(cudaProfilerStart()); }
void profiler_stop() { DEEPINFER_CUDA_CHECK(cudaDeviceSynchronize()); DEEPINFER_CUDA_CHECK(cudaProfilerStop()); }

}  // namespace deepinfer::cuda
