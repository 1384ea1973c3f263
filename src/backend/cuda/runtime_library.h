#pragma once
// CUDA libraries deepinfer opens at run time (dlopen) rather than links: cuBLAS for the benchmark's
// GEMM ceiling, cuBLASLt for prefill GEMMs. Both are hundreds of MB and optional; a machine without
// them still runs deepinfer.
#include <initializer_list>
#include <string>

namespace deepinfer::cuda {

struct RuntimeLibrary {
  void* handle = nullptr;  // null: none of the names opened
  std::string name;        // the name that opened, or every name tried (for the message)
};

// Opens the first of: the file the environment variable `env` names (when set and not empty), then
// `names` in order (sonames the loader searches, then absolute paths).
RuntimeLibrary open_runtime_library(const char* env, std::initializer_list<const char*> names);

}  // namespace deepinfer::cuda
