#pragma once
// Launcher of the DeepSeek-V4.1 activation fake-quantisation kernel (backend.h, ActQuant). Plain
// pointers and sizes only: shared by g++ (ops_quant.cpp) and nvcc (quant_kernels.cu).
#include <cstdint>

namespace deepinfer::cuda {

// format: 0 = Fp8Ue8m0 (group 32), 1 = Fp4Ue8m0 (group 32), 2 = Fp4E4m3x16 (group 16); in place.
void launch_quantize_dequantize(float* x, int64_t groups, int format);

}  // namespace deepinfer::cuda
