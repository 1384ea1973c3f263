// Ceilings for the benchmark: the CPU's from a threaded memcpy, CUDA's from cuda/ceilings.h.
#include "backend/ceilings.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"

#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/ceilings.h"
#endif

namespace deepinfer::backend {

namespace {

DeviceCeilings cpu_ceilings() {
  DeviceCeilings c;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  c.device = fmt::format("cpu ({} hardware threads)", threads);
  // 512 MiB each way: far above any cache; every thread copies its own slice.
  const size_t bytes = size_t{512} << 20;
  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  auto copy_once = [&] {
    std::vector<std::thread> pool;
    const size_t slice = bytes / threads;
    const auto start = std::chrono::steady_clock::now();
    for (unsigned t = 0; t < threads; ++t) {
      const size_t off = t * slice, n = t + 1 == threads ? bytes - off : slice;
      pool.emplace_back([&, off, n] { std::memcpy(dst.get() + off, src.get() + off, n); });
    }
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  copy_once();
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) times.push_back(copy_once());
  std::sort(times.begin(), times.end());
  c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / times[times.size() / 2];
  c.copy_how = fmt::format("memcpy 512 MiB on {} threads, median of 5, read + write", threads);
  c.gemm_how = "not measured on the CPU";
  return c;
}

}  // namespace

DeviceCeilings measure_ceilings(std::string_view device) {
  if (device == "cpu") return cpu_ceilings();
#ifdef DEEPINFER_HAVE_CUDA
  if (device == "cuda") {
    DeviceCeilings c;
    c.device = cuda::device_description();
    const auto copy = cuda::measure_copy();
    c.copy_bytes_per_s = copy.rate;
    c.copy_how = copy.how;
    const auto gemm = cuda::measure_gemm_bf16();
    c.gemm_flops_per_s = gemm.rate;
    c.gemm_how = gemm.how;
    return c;
  }
#endif
  fail("measure_ceilings: no ceilings for device '{}'", device);
}

void profiler_start(std::string_view device) {
#ifdef DEEPINFER_HAVE_CUDA
  if (device == "cuda") cuda::profiler_start();
#else
  (void)device;
#endif
}

void profiler_stop(std::string_view device) {
#ifdef DEEPINFER_HAVE_CUDA
  if (device == "cuda") cuda::profiler_stop();
#else
  (void)device;
#endif
}

}  // namespace deepinfer::backend
