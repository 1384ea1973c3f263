#pragma once
// Every CUDA call and launch is checked; a failure is a deepinfer::Error naming the call and place.
#include <cuda_runtime.h>

#include "core/error.h"

#define DEEPINFER_CUDA_CHECK(call)                                                                   \
  do {                                                                                              \
    const cudaError_t deepinfer_cuda_status = (call);                                               \
    if (deepinfer_cuda_status != cudaSuccess)                                                       \
      ::deepinfer::fail("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(deepinfer_cuda_status), \
                        cudaGetErrorString(deepinfer_cuda_status), #call, __FILE__, __LINE__);       \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (execution errors surface at
// the next synchronising call).
#define DEEPINFER_CUDA_LAUNCHED() DEEPINFER_CUDA_CHECK(cudaGetLastError())
