// Dense CUDA kernels: straightforward first versions, float32 arithmetic as the CPU ops do it.
#include "backend/cuda/dense_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const float* src, const int64_t* rows, int64_t count, int64_t width, float* dst) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * width) return;
  dst[i] = src[rows[i / width] * width + i % width];
}

__global__ void embed_kernel(DevMatrix table, const int32_t* ids, int64_t tokens, int64_t copies, float* out) {
  const int64_t D = table.cols;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * copies * D) return;
  const int64_t t = i / (copies * D), d = i % D;
  out[i] = weight_at(table, ids[t], d);
}

// One block per row: the sum of squares in double (as the CPU op), then the scaled row.
__global__ void rms_norm_kernel(const float* x, const float* weight, float eps, int64_t n, float* out) {
  __shared__ double partial[kThreads];
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(xr[i]) * xr[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv = 1.0f / sqrtf(static_cast<float>(partial[0] / static_cast<double>(n)) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] * inv;  // every thread reads its elements before writing them (in place is safe)
    o[i] = weight ? weight[i] * v : v;
  }
}

__global__ void rope_kernel(float* x, const int64_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
                            DevRope rope, float sign) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * heads * rope.half) return;
  const int64_t pair = i % rope.half, th = i / rope.half, t = th / heads;
  float c, s;
  rope_angle(rope, pair, positions[t], &c, &s);
  s *= sign;
  float* r = x + th * head_dim + head_dim - 2 * rope.half;
  const float a = r[2 * pair], b = r[2 * pair + 1];
  r[2 * pair] = a * c - b * s;
  r[2 * pair + 1] = b * c + a * s;
}

// mix[t, m] = dot(flat[t], fn[m]): one warp per output, lanes stride the row.
__global__ void mix_kernel(const float* flat, const float* fn, int64_t tokens, int64_t width, int64_t mixes,
                           float* mix) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= tokens * mixes) return;
  const int64_t t = warp / mixes, m = warp % mixes;
  float s = 0.0f;
  for (int64_t c = lane; c < width; c += 32) s += flat[t * width + c] * fn[m * width + c];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) mix[warp] = s;
}

// One thread per token: sigmoid gates and the Sinkhorn-normalised mixing matrix.
__global__ void mhc_weights_kernel(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                                   float eps, int64_t iters, float* pre, float* post, float* comb) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= tokens) return;
  const int64_t M = (2 + n) * n;
  const float* m = mix + t * M;
  for (int64_t i = 0; i < n; ++i) {
    pre[t * n + i] = sigmoid_f(m[i] * scale[0] + base[i]) + eps;
    post[t * n + i] = 2.0f * sigmoid_f(m[n + i] * scale[1] + base[n + i]);
  }
  float* c = comb + t * n * n;  // c[j * n + k]: weight of copy j in output copy k
  for (int64_t j = 0; j < n; ++j) {
    float mx = -INFINITY;
    for (int64_t k = 0; k < n; ++k) {
      c[j * n + k] = m[2 * n + j * n + k] * scale[2] + base[2 * n + j * n + k];
      mx = fmaxf(mx, c[j * n + k]);
    }
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) {
      c[j * n + k] = expf(c[j * n + k] - mx);
      sum += c[j * n + k];
    }
    for (int64_t k = 0; k < n; ++k) c[j * n + k] = c[j * n + k] / sum + eps;
  }
  for (int64_t it = 0; it < (iters > 1 ? iters : 1); ++it) {  // columns at least once, as the CPU op
    if (it > 0) {  // rows, then columns; the first round normalises columns only
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < n; ++k) s += c[j * n + k];
        for (int64_t k = 0; k < n; ++k) c[j * n + k] /= (s + eps);
      }
    }
    for (int64_t k = 0; k < n; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < n; ++j) s += c[j * n + k];
      for (int64_t j = 0; j < n; ++j) c[j * n + k] /= (s + eps);
    }
  }
}

__global__ void premix_kernel(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D,
                              float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * D) return;
  const int64_t t = i / D, d = i % D;
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += pre[t * n + j] * residual[(t * n + j) * D + d];
  out[i] = s;
}

__global__ void head_weights_kernel(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                                    float eps, float* pre) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * n) return;
  pre[i] = sigmoid_f(mix[i] * scale[0] + base[i % n]) + eps;
}

__global__ void mhc_post_kernel(const float* old, const float* out, const float* post, const float* comb,
                                int64_t tokens, int64_t n, int64_t D, float* residual) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * n * D) return;
  const int64_t d = i % D, k = (i / D) % n, t = i / (n * D);
  float s = post[t * n + k] * out[t * D + d];
  for (int64_t j = 0; j < n; ++j) s += comb[(t * n + j) * n + k] * old[(t * n + j) * D + d];
  residual[i] = s;
}

}  // namespace

void launch_gather_rows(const float* src, const int64_t* rows, int64_t count, int64_t width, float* dst) {
  if (count * width == 0) return;
  gather_rows_kernel<<<blocks_for(count * width, kThreads), kThreads>>>(src, rows, count, width, dst);
}

void launch_embed(DevMatrix table, const int32_t* ids, int64_t tokens, int64_t copies, float* out) {
  const int64_t n = tokens * copies * table.cols;
  if (n == 0) return;
  embed_kernel<<<blocks_for(n, kThreads), kThreads>>>(table, ids, tokens, copies, out);
}

void launch_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out) {
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads>>>(x, weight, eps, n, out);
}

void launch_rope(float* x, const int64_t* positions, int64_t tokens, int64_t heads, int64_t head_dim, DevRope rope,
                 bool inverse) {
  const int64_t n = tokens * heads * rope.half;
  if (n == 0) return;
  rope_kernel<<<blocks_for(n, kThreads), kThreads>>>(x, positions, tokens, heads, head_dim, rope, inverse ? -1.0f : 1.0f);
}

void launch_mhc_mix(const float* residual, int64_t tokens, int64_t width, float norm_eps, const float* fn,
                    int64_t mixes, float* flat, float* mix) {
  if (tokens == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(tokens), kThreads>>>(residual, nullptr, norm_eps, width, flat);
  mix_kernel<<<blocks_for(tokens * mixes * 32, kThreads), kThreads>>>(flat, fn, tokens, width, mixes, mix);
}

void launch_mhc_weights(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                        float hc_eps, int64_t sinkhorn_iters, float* pre, float* post, float* comb) {
  if (tokens == 0) return;
  mhc_weights_kernel<<<blocks_for(tokens, 64), 64>>>(mix, tokens, n, base, scale, hc_eps, sinkhorn_iters, pre, post,
                                                     comb);
}

void launch_mhc_premix(const float* residual, const float* pre, int64_t tokens, int64_t n, int64_t D, float* out) {
  if (tokens * D == 0) return;
  premix_kernel<<<blocks_for(tokens * D, kThreads), kThreads>>>(residual, pre, tokens, n, D, out);
}

void launch_mhc_head_weights(const float* mix, int64_t tokens, int64_t n, const float* base, const float* scale,
                             float hc_eps, float* pre) {
  if (tokens * n == 0) return;
  head_weights_kernel<<<blocks_for(tokens * n, kThreads), kThreads>>>(mix, tokens, n, base, scale, hc_eps, pre);
}

void launch_mhc_post(const float* old, const float* out, const float* post, const float* comb, int64_t tokens,
                     int64_t n, int64_t D, float* residual) {
  if (tokens * n * D == 0) return;
  mhc_post_kernel<<<blocks_for(tokens * n * D, kThreads), kThreads>>>(old, out, post, comb, tokens, n, D, residual);
}

}  // namespace deepinfer::cuda
