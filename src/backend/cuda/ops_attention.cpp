// CUDA state ops: compressors, indexer, window ring, sparse attention. (Being written.)
#include "backend/cuda/cuda_backend.h"

namespace deepinfer::cuda {

void CudaBackend::compress(const backend::CompressorLayout&, const backend::CompressorWeights&,
                           const backend::RopeFreqs&, TensorView, TensorView, std::span<const backend::SeqSlice>,
                           const backend::StateStorage&) {
  fail("cuda compress: not written yet");
}
void CudaBackend::indexer_select(const backend::CompressorLayout&, TensorView, TensorView, float, float, int64_t,
                                 backend::TopKTies, std::span<const backend::SeqSlice>, const backend::StateStorage&,
                                 TensorView) {
  fail("cuda indexer_select: not written yet");
}
void CudaBackend::store_window(const backend::WindowLayout&, TensorView, std::span<const backend::SeqSlice>,
                               const backend::StateStorage&) {
  fail("cuda store_window: not written yet");
}
void CudaBackend::sparse_attention(TensorView, TensorView, const backend::WindowLayout&,
                                   const backend::CompressorLayout*, TensorView, const float*, float,
                                   std::span<const backend::SeqSlice>, const backend::StateStorage&, TensorView) {
  fail("cuda sparse_attention: not written yet");
}

}  // namespace deepinfer::cuda
