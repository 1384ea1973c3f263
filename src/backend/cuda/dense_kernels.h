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
// mHC sites. The mixing GEMM in chunks of columns fixed by the width (mhc_mix_chunks): per token
// and chunk, the sum of squares sumsq [T, chunks] and the dots [T, chunks, mixes] with fn's rows.
int64_t mhc_mix_chunks(int64_t width);
void launch_mhc_mix_partials(const float* residual, int64_t tokens, int64_t width, const float* fn, int64_t mixes,
                             double* sumsq, float* dots);
// mhc_pre from the partials: mix = dots * rsqrt(mean square + eps), pre / post (sigmoid), comb
// (softmax + Sinkhorn), input [T, D] = sum_i pre[t, i] * residual[t, i, :].
void launch_mhc_pre_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D, float norm_eps,
                           const float* base, const float* scale, float hc_eps, int64_t sinkhorn_iters,
                           const float* residual, float* input, float* post, float* comb);
// The same coefficients without the pre-mix (DeepSeek-V4.1 applies them at the next site): pre [T, n]
// (sigmoid + eps), post, comb, with mhc_pre's bits.
void launch_mhc_coefficients_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D,
                                    float norm_eps, const float* base, const float* scale, float hc_eps,
                                    int64_t sinkhorn_iters, const float* residual, float* pre, float* post,
                                    float* comb);
// mhc_head from the partials (n mixes): pre = sigmoid(mix * scale0 + base) + eps, hidden = the pre-mix.
void launch_mhc_head_finish(const double* sumsq, const float* dots, int64_t tokens, int64_t n, int64_t D,
                            float norm_eps, const float* base, const float* scale, float hc_eps, const float* residual,
                            float* hidden);
// mhc_post in place for hc_mult <= 8 (false: not launched, use launch_mhc_post on a copy).
bool launch_mhc_post_inplace(float* residual, const float* out, const float* post, const float* comb, int64_t tokens,
                             int64_t n, int64_t D);
// residual[t, k] = post[t, k] * out[t] + sum_j comb[t, j, k] * old[t, j] (old: a copy of residual).
void launch_mhc_post(const float* old, const float* out, const float* post, const float* comb, int64_t tokens,
                     int64_t n, int64_t D, float* residual);

}  // namespace deepinfer::cuda
