#pragma once
// Launcher of the token sampler (Backend::sample): one block of sample_math::kSampleChunks threads
// per row, each thread one chunk of the vocabulary, so every mass is the chunked sum the CPU
// reference computes. Shared by g++ (ops_sample.cpp) and nvcc (sample_kernels.cu).
#include <cuda_runtime.h>

#include <cstdint>

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"

namespace deepinfer::cuda {

struct DevSampleRow {
  double inv_temperature;  // 0: greedy
  double top_p, min_p, uniform;
  double min_p_log_bound;  // log(min_p) - 1e-6 (-inf when off): below it a weight is under min_p
  int64_t top_k;
  int64_t mask_offset;  // first word of the row's allowed mask in the masks array; -1: none
};

struct DevSampleResult {
  int32_t token;
  int32_t error;  // kSampleOk, kSampleBadLogit (bad_id / bad_value say which), kSampleAllMasked
  int32_t bad_id;
  float bad_value;
};

#pragma GCC diagnostic pop

constexpr int64_t kMaxSampleVocab = 1 << 20;  // nth_id's tile counts live in shared memory
constexpr int32_t kSampleOk = 0, kSampleBadLogit = 1, kSampleAllMasked = 2;

// Before launch_sample on the current device.
cudaError_t prepare_sample_kernel();
void launch_sample(const float* logits, int64_t vocab, const DevSampleRow* rows, const uint32_t* masks, int64_t count,
                   DevSampleResult* out);

}  // namespace deepinfer::cuda
