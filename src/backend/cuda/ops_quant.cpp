// CUDA quantisation ops (DeepSeek-V4.1): checks and the launch; semantics in cpu/quant_ops.cpp.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/quant_kernels.h"
#include "core/error.h"

namespace deepinfer::cuda {

void CudaBackend::quantize_dequantize(TensorView x, backend::ActQuant format) {
  begin_op();
  DEEPINFER_CHECK(x.dtype == DType::F32 && x.device == Device::CUDA && x.is_contiguous(),
                  "cuda quantize_dequantize: expected a contiguous F32 tensor in device memory");
  const int64_t group = format == backend::ActQuant::Fp4E4m3x16 ? 16 : 32;
  DEEPINFER_CHECK(x.last_dim() % group == 0,
                  "cuda quantize_dequantize: last dimension {} is not a multiple of the group {}", x.last_dim(), group);
  const int code = format == backend::ActQuant::Fp8Ue8m0 ? 0 : format == backend::ActQuant::Fp4Ue8m0 ? 1 : 2;
  launch_quantize_dequantize(x.f32(), x.numel() / group, code);
  DEEPINFER_CUDA_LAUNCHED();
}

}  // namespace deepinfer::cuda
