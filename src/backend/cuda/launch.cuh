#pragma once
// launch(kernel, grid, block, shared_bytes, args...): every kernel launch of the backend, on this
// thread's stream, folded into the step signature while recording (launch_control.h). The
// arguments are converted to the kernel's parameter types first, so the signature holds exactly
// the bytes the kernel receives; argument structs have no padding (checked with -Wpadded where
// they are declared), so equal arguments give equal bytes.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/launch_control.h"

namespace deepinfer::cuda {

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count differs from the kernel's");
  LaunchControl& lc = launch_control();
  std::tuple<std::remove_cv_t<P>...> params(static_cast<std::remove_cv_t<P>>(std::forward<A>(args))...);
  if (lc.record) {
    lc.fold_value(reinterpret_cast<const void*>(kernel));
    lc.fold_value(grid);
    lc.fold_value(block);
    lc.fold_value(shared_bytes);
    std::apply([&](const auto&... p) { (lc.fold_value(p), ...); }, params);
  }
  if (lc.suppress) return;
  std::apply(
      [&](auto&... p) {
        void* pointers[sizeof...(P) + 1] = {static_cast<void*>(&p)...};
        // The status also stays in cudaGetLastError, which DEEPINFER_CUDA_LAUNCHED checks.
        (void)cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, pointers, shared_bytes,
                               lc.stream);
      },
      params);
}

// Lets Kernel take `bytes` of dynamic shared memory (above the default 48 KB) on the current
// device, once per kernel and device (a host call per launch would sit in every step); false, the
// error left for the caller's launch check, if that fails. A template on the kernel itself, so
// every instance has its own flags.
template <auto Kernel>
bool allow_dynamic_smem(size_t bytes) {
  if (bytes <= 48 * 1024) return true;
  static std::atomic<uint64_t> done{0};  // a bit per device
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if (done.load(std::memory_order_relaxed) & bit) return true;
  if (cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) != cudaSuccess)
    return false;
  done.fetch_or(bit, std::memory_order_relaxed);
  return true;
}

}  // namespace deepinfer::cuda
