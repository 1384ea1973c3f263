#pragma once
// Launchers of the dense CUDA kernels (gather, embedding, RMSNorm, rope, mHC). Plain pointers and
// sizes only: this header is shared by g++ (ops_dense.cpp) and nvcc (dense_kernels.cu).
#include <cstdint>

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

void launch_gather_rows(const float* src, const int64_t* rows, int64_t count, int64_t width, float* dst);
void launch_embed(DevMatrix table, const int32_t* ids, int64_t tokens, int64_t copies, float* out);
// out = x * rsqrt(mean(x^2) + eps) * weight (weight may be null) over rows of n; out may alias x.
void launch_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out);
void launch_rope(float* x, const int64_t* positions, int64_t tokens, int64_t heads, int64_t head_dim, DevRope rope,
                 bool inverse);
// mHC pieces. flat [T, n*D] = unweighted RMSNorm of residual rows; mix [T, m] = flat fn^T.
void launch_mhc_mix(const float* residual, int64_t tokens, int64_t width, float norm_eps, const float* fn,
                    int64_t mixes, float* flat, float* mix);
// From mix [T, (2+n)*n]: pre [T, n], post [T, n], comb [T, n, n] (sigmoid, softmax + Sinkhorn).
void launch_mhc_weights(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                        float hc_eps, int64_t sinkhorn_iters, float* pre, float* post, float* comb);
// out [T, D] = sum_i pre[t, i] * residual[t, i, :].
void launch_mhc_premix(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D, float* out);
// From mix [T, n]: pre = sigmoid(mix * scale0 + base) + eps.
void launch_mhc_head_weights(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                             float hc_eps, float* pre);
// residual[t, k] = post[t, k] * out[t] + sum_j comb[t, j, k] * old[t, j] (old: a copy of residual).
void launch_mhc_post(const float* old, const float* out, const float* post, const float* comb, int64_t tokens,
                     int64_t n, int64_t D, float* residual);

}  // namespace deepinfer::cuda
