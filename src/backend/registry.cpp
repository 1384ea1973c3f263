// Which backends this binary has. CUDA registers here once src/backend/cuda exists.
#include <memory>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

#ifdef DEEPINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace deepinfer::backend {

namespace {
int cuda_devices() {
#ifdef DEEPINFER_HAVE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}
bool cuda_device_visible() { return cuda_devices() > 0; }
}  // namespace

int device_count(std::string_view name) {
  if (name == "cpu") return 1;
  if (name == "cuda") return cuda_devices();
  return 0;
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<cpu::CpuBackend>(options);
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names = {"cpu"};
  if (cuda_device_visible()) names.push_back("cuda");
  return names;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options) {
  if (name == "cpu") return make_cpu_backend(options);
#ifdef DEEPINFER_HAVE_CUDA
  if (name == "cuda") return std::make_unique<cuda::CudaBackend>(options);
  fail("unknown backend '{}' (built: cpu, cuda)", name);
#else
  if (name == "cuda") fail("this deepinfer was built without CUDA (configure with -DDEEPINFER_CUDA=ON)");
  fail("unknown backend '{}' (built: cpu)", name);
#endif
}

}  // namespace deepinfer::backend

namespace deepinfer::backend {

std::vector<int64_t> BackendOptions::default_cuda_graph_sizes(int64_t max_size) {
  std::vector<int64_t> sizes;
  for (int64_t s : {1, 2, 4})
    if (s <= max_size) sizes.push_back(s);
  for (int64_t s = 8; s <= max_size; s += 8) sizes.push_back(s);
  return sizes;
}

}  // namespace deepinfer::backend
