#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/sample_kernels.h"
#include "core/error.h"

namespace deepinfer::cuda {

namespace {
constexpr int kSampleScratch = 8;  // scratch() slot of the results (no other op uses it)
}

void CudaBackend::sample(TensorView logits, std::span<const backend::SampleRow> rows, std::span<int32_t> tokens) {
  begin_op();
  check_device(logits, DType::F32, "sample logits");
  DEEPINFER_CHECK(logits.rank == 2 && logits.dim(0) == static_cast<int64_t>(rows.size()) && tokens.size() == rows.size(),
                  "sample: logits of rank {} with {} rows for {} sample rows and {} tokens", logits.rank,
                  logits.rank ? logits.dim(0) : 0, rows.size(), tokens.size());
  const auto R = static_cast<int64_t>(rows.size());
  if (R == 0) return;
  const int64_t V = logits.dim(1);
  DEEPINFER_CHECK(V > 0, "cannot pick a token from an empty logits row");
  DEEPINFER_CHECK(V <= kMaxSampleVocab, "sample: vocabularies above {} tokens are not supported on CUDA (got {})",
                  kMaxSampleVocab, V);
  const auto words = static_cast<size_t>((V + 31) / 32);
  std::vector<DevSampleRow> args(rows.size());
  std::vector<uint32_t> masks;
  for (size_t r = 0; r < rows.size(); ++r) {
    const backend::SampleRow& row = rows[r];
    const double inv_temperature = row.temperature == 0.0 ? 0.0 : 1.0 / row.temperature;
    args[r] = {.inv_temperature = std::isfinite(inv_temperature) ? inv_temperature : 0.0,  // 0: greedy (cpu::sample_row)
               .top_p = row.top_p,
               .min_p = row.min_p,
               .uniform = row.uniform,
               .min_p_log_bound = row.min_p > 0.0 ? std::log(row.min_p) - 1e-6 : -HUGE_VAL,
               .top_k = row.top_k,
               .mask_offset = -1};
    if (row.allowed.empty()) continue;
    DEEPINFER_CHECK(row.allowed.size() >= words, "sample: row {} has a mask of {} words for vocab {}", r,
                    row.allowed.size(), V);
    args[r].mask_offset = static_cast<int64_t>(masks.size());
    masks.insert(masks.end(), row.allowed.begin(), row.allowed.begin() + static_cast<std::ptrdiff_t>(words));
  }
  auto* results = static_cast<DevSampleResult*>(scratch(rows.size() * sizeof(DevSampleResult), kSampleScratch));
  const DevSampleRow* d_rows = stage(std::span<const DevSampleRow>(args));
  const uint32_t* d_masks = masks.empty() ? nullptr : stage(std::span<const uint32_t>(masks));
  DEEPINFER_CUDA_CHECK(prepare_sample_kernel());  // per call: attributes are per device, and it is cheap
  launch_sample(logits.f32(), V, d_rows, d_masks, R, results);
  DEEPINFER_CUDA_LAUNCHED();
  std::vector<DevSampleResult> host(rows.size());
  copy_to_host(host.data(), results, host.size() * sizeof(DevSampleResult));
  for (size_t r = 0; r < rows.size(); ++r) {
    if (host[r].error == kSampleBadLogit) fail("logits contain {} at token id {}", host[r].bad_value, host[r].bad_id);
    DEEPINFER_CHECK(host[r].error != kSampleAllMasked, "every token has logit -inf (all tokens masked)");
    DEEPINFER_CHECK(host[r].error == kSampleOk && host[r].token >= 0 && host[r].token < V,
                    "internal error: the device sampler returned token {} (status {}) for row {}", host[r].token,
                    host[r].error, r);
    tokens[r] = host[r].token;
  }
}

}  // namespace deepinfer::cuda
