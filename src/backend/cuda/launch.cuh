#pragma once
// launch(kernel, grid, block, shared_bytes, args...): every kernel launch of the backend, on this
// thread's stream, folded into the step signature while recording (launch_control.h). The
// arguments are converted to the kernel's parameter types first, so the signature holds exactly
// the bytes the kernel receives; argument structs have no padding (checked with -Wpadded where
// they are declared), so equal arguments give equal bytes.
//
// Kernels are launched with programmatic dependent launch (Hopper's griddepcontrol): a kernel's
// CTAs may start while the kernel before it in the stream is still running, which hides the launch
// gap between the many small kernels of a decode step (in CUDA graphs too). So the first statement
// of every kernel is wait_for_previous_kernel(): nothing of it reads or writes memory before the
// previous kernel has finished, and since every kernel waits, finishing implies all earlier ones
// finished too (tests/backend/kernel_sources_test.cpp checks every kernel of the kernel files).
// One exception, weights: a kernel that streams them may ask the L2 for its first bytes before
// the wait (wait_for_previous_kernel(L2Rows...)), as no kernel writes weights. Its CTAs are resident
// while the kernel before it runs (a small one, typically: a norm, a split of x, the router), so
// the DRAM works during that kernel instead of idling until the weights are asked for.
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
        cudaLaunchAttribute attribute{};
        attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = shared_bytes;
        config.stream = lc.stream;
        config.attrs = &attribute;
        config.numAttrs = dependent_launch_enabled() ? 1 : 0;
        // The status also stays in cudaGetLastError, which DEEPINFER_CUDA_LAUNCHED checks.
        (void)cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel), pointers);
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

#ifdef __CUDACC__
// The first statement of every kernel: wait until the previous kernel in the stream has finished
// and its writes are visible, then let the next kernel's CTAs launch (they wait in turn, so at most
// two kernels overlap: this one and the next one's prologue). Both are no-ops in a kernel launched
// without the attribute.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Rows of a weight a CTA reads first: row i (i < rows) at first + i * pitch, `bytes` of it from
// there (l2_prefetch_row_bytes; 0: none). Weights only: memory no kernel writes.
struct L2Rows {
  const void* first;
  int64_t pitch;
  int32_t rows, bytes;
};

// Thread i < rows asks the L2 for row i's bytes (one bulk prefetch: a hint, no register or shared
// memory is written, nothing waits for it), from the 16-byte boundary at or below its first byte.
__device__ __forceinline__ void prefetch_rows_l2(const L2Rows& r, int thread) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (thread >= 0 && thread < r.rows && r.bytes >= 16) {
    const auto a = reinterpret_cast<uintptr_t>(r.first) + static_cast<uintptr_t>(thread) * r.pitch;
    const uintptr_t lo = a & ~uintptr_t{15};
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"(static_cast<uint32_t>(r.bytes))
                 : "memory");
  }
#endif
}

// wait_for_previous_kernel() after asking the L2 for the weights' rows the CTA reads first: `a`
// with threads 0 .., `b` (SwiGLU's up rows) with threads a.rows ...
__device__ __forceinline__ void wait_for_previous_kernel(const L2Rows& a, const L2Rows& b = L2Rows{}) {
  const int t = static_cast<int>(threadIdx.x);
  prefetch_rows_l2(a, t);
  prefetch_rows_l2(b, t - a.rows);
  wait_for_previous_kernel();
}
#endif

}  // namespace deepinfer::cuda
