#include "backend/cuda/launch_control.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace deepinfer::cuda {

void LaunchControl::fold(const void* bytes, size_t n) {
  // 64-bit words through a multiply-xorshift mix: a few ns per launch's arguments.
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint64_t h = signature ^ (0x9e3779b97f4a7c15ull * (n + 1));
  auto mix = [&](uint64_t w) {
    h ^= w;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    mix(w);
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    mix(w ^ 0x100);
  }
  signature = h;
}

bool dependent_launch_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("DEEPINFER_PDL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

int32_t l2_prefetch_row_bytes(int64_t rows_per_cta, int64_t row_bytes, int64_t ctas) {
  static const int64_t per_cta_cap = [] {
    const char* v = std::getenv("DEEPINFER_L2_PREFETCH_KB");
    return v ? std::max<int64_t>(0, std::atoll(v)) * 1024 : int64_t{64} * 1024;
  }();
  constexpr int64_t kTotal = int64_t{24} << 20;
  if (rows_per_cta <= 0 || row_bytes <= 0 || per_cta_cap == 0) return 0;
  const int64_t per_cta = std::min(per_cta_cap, kTotal / std::max<int64_t>(ctas, 1));
  // Rounded down: a row's prefetch never passes its last byte (the start may move back to 16 bytes).
  const int64_t per_row = std::min(per_cta / rows_per_cta, row_bytes) / 16 * 16;
  return per_row >= 16 ? static_cast<int32_t>(per_row) : 0;
}

// An attribute of the current device (0 if it cannot be read); the callers keep it once per process.
static int current_device_attribute(cudaDeviceAttr attribute) {
  int dev = 0, value = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&value, attribute, dev);
  return value;
}

int device_sm_count() {
  static const int n = std::max(current_device_attribute(cudaDevAttrMultiProcessorCount), 1);
  return n;
}

size_t device_smem_per_sm() {
  static const auto n = static_cast<size_t>(current_device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  return n;
}

size_t device_smem_per_block_optin() {
  static const auto n = static_cast<size_t>(current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  return n;
}

LaunchControl& launch_control() {
  thread_local LaunchControl control;
  return control;
}

cudaError_t stream_memset(void* dst, int value, size_t bytes) {
  LaunchControl& lc = launch_control();
  if (lc.record) {
    lc.fold_value(dst);
    lc.fold_value(value);
    lc.fold_value(bytes);
  }
  if (lc.suppress || bytes == 0) return cudaSuccess;
  return cudaMemsetAsync(dst, value, bytes, lc.stream);
}

cudaError_t stream_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  LaunchControl& lc = launch_control();
  if (lc.record) {
    lc.fold_value(dst);
    lc.fold_value(src);
    lc.fold_value(bytes);
    lc.fold_value(kind);
  }
  if (lc.suppress || bytes == 0) return cudaSuccess;
  return cudaMemcpyAsync(dst, src, bytes, kind, lc.stream);
}

}  // namespace deepinfer::cuda
