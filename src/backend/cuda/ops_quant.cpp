// CUDA quantisation ops (DeepSeek-V4.1). Not written yet: the CPU backend is the reference for now.
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace deepinfer::cuda {

void CudaBackend::quantize_dequantize(TensorView, backend::ActQuant) {
  fail("quantize_dequantize (DeepSeek-V4.1 activation fake-quantisation) is not implemented on cuda yet; "
       "run DeepSeek-V4.1 with --device cpu");
}

}  // namespace deepinfer::cuda
