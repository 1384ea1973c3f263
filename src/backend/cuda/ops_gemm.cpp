// CUDA linear layers over stored weight formats, and the MoE pipeline. (Being written.)
#include "backend/cuda/cuda_backend.h"

namespace deepinfer::cuda {

void CudaBackend::linear(const WeightMatrix&, TensorView, TensorView) { fail("cuda linear: not written yet"); }
void CudaBackend::grouped_linear(const WeightMatrix&, int64_t, TensorView, TensorView) {
  fail("cuda grouped_linear: not written yet");
}
void CudaBackend::moe_route(const backend::RoutingParams&, TensorView, std::span<const int32_t>, TensorView,
                            TensorView) {
  fail("cuda moe_route: not written yet");
}
void CudaBackend::moe_experts(const backend::MoeWeights&, TensorView, TensorView, TensorView, TensorView) {
  fail("cuda moe_experts: not written yet");
}

}  // namespace deepinfer::cuda
