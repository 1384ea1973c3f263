#pragma once
// The two hardware ceilings a benchmark divides by, measured on the device in the same run: memory
// copy bandwidth (bytes read + written per second) and a dense bf16 GEMM rate. `deepinfer bench`
// prints every time next to its floor (bytes / bandwidth, FLOPs / GEMM rate) from these.
#include <string>
#include <string_view>

namespace deepinfer::backend {

struct DeviceCeilings {
  std::string device;        // e.g. "NVIDIA H200 (132 SMs, 139.8 GiB)" or "cpu (16 threads)"
  double copy_bytes_per_s = 0;  // read + write
  std::string copy_how;      // what was timed
  double gemm_flops_per_s = 0;  // 0 when not measured
  std::string gemm_how;
};

// Measures both on `device` ("cpu" or "cuda"); a ceiling that cannot be measured stays 0 with
// the reason in its *_how field. Takes about a second.
DeviceCeilings measure_ceilings(std::string_view device);

// Brackets a region for a profiler started with collection off (ncu --profile-from-start off);
// no-ops on the CPU.
void profiler_start(std::string_view device);
void profiler_stop(std::string_view device);

}  // namespace deepinfer::backend
