#include "backend/cuda/runtime_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <vector>

namespace deepinfer::cuda {

RuntimeLibrary open_runtime_library(const char* env, std::initializer_list<const char*> names) {
  std::vector<std::string> tried;
  if (const char* file = std::getenv(env); file && *file) tried.emplace_back(file);
  tried.insert(tried.end(), names.begin(), names.end());
  for (const auto& n : tried)
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return {h, n};
  return {nullptr, fmt::format("{}", fmt::join(tried, ", "))};
}

}  // namespace deepinfer::cuda
