#pragma once
// The GPU's copy bandwidth and bf16 GEMM rate, measured now (backend/ceilings.h is the interface).
#include <string>

namespace deepinfer::cuda {

struct Measured {
  double rate = 0;  // bytes/s or FLOP/s; 0 when it could not be measured
  std::string how;
};

std::string device_description();
// cudaMemcpy device to device of 2 GiB, median of 10, counting bytes read + written.
Measured measure_copy();
// cuBLAS bf16 GEMM (fp32 accumulate) 8192 x 4096 x 4096 on random data, median of 10. cuBLAS is
// opened at run time (dlopen): a machine without it still runs the benchmark, with no GEMM ceiling.
Measured measure_gemm_bf16();
void profiler_start();
void profiler_stop();

}  // namespace deepinfer::cuda
