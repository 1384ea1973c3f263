// Which backends this binary has. CUDA registers here once src/backend/cuda exists.
#include <memory>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace deepinfer::backend {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<cpu::CpuBackend>(options);
}

std::vector<std::string> available_backends() { return {"cpu"}; }

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options) {
  if (name == "cpu") return make_cpu_backend(options);
  fail("unknown backend '{}' (available: cpu)", name);
}

}  // namespace deepinfer::backend
