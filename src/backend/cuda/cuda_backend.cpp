// The CUDA backend's plumbing: device memory, host copies, weight mirrors, per-op staging.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/bf16_row_scale.h"
#include "backend/cuda/cublas_linear.h"

namespace deepinfer::cuda {

void* CudaAllocator::do_allocate(size_t bytes, size_t alignment) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);  // 256-byte aligned, more than any alignment asked
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error state
    fail("out of device memory allocating {} bytes ({})", bytes, cudaGetErrorString(status));
  }
  DEEPINFER_CHECK(reinterpret_cast<uintptr_t>(p) % alignment == 0, "cudaMalloc returned memory aligned below {}",
                  alignment);
  return p;
}

void CudaAllocator::do_deallocate(void* p, size_t, size_t) noexcept { cudaFree(p); }

void CudaAllocator::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) DEEPINFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

void CudaAllocator::write(void* dst, const void* host_src, size_t bytes) {
  if (bytes) DEEPINFER_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

CudaBackend::CudaBackend(const backend::BackendOptions& options) : options_(options) {
  int count = 0;
  DEEPINFER_CUDA_CHECK(cudaGetDeviceCount(&count));
  DEEPINFER_CHECK(count > 0, "the CUDA backend needs a GPU; none is visible");
  DEEPINFER_CHECK(options.device_index >= 0 && options.device_index < count,
                  "CUDA device {} does not exist: {} visible (CUDA_VISIBLE_DEVICES chooses them)", options.device_index,
                  count);
  make_current();
  int sms = 0;
  DEEPINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, options.device_index));
  idle_plan_ = plan_step({}, false, sms, options_);
  plan_ = idle_plan_;
  DEEPINFER_CUDA_CHECK(cudaStreamCreate(&stream_));
  launch_control().stream = stream_;
}

CudaBackend::~CudaBackend() {
  make_current();
  cudaDeviceSynchronize();
  cublas_.reset();
  graphs_.clear();
  if (launch_control().stream == stream_) launch_control().stream = nullptr;
  if (stream_) cudaStreamDestroy(stream_);
  if (pinned_) cudaFreeHost(pinned_);
}

void CudaBackend::make_current() {
  DEEPINFER_CUDA_CHECK(cudaSetDevice(options_.device_index));
  launch_control().stream = stream_;
}

void CudaBackend::copy_to_backend(void* dst, const void* host_src, size_t bytes) {
  if (bytes) DEEPINFER_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) DEEPINFER_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void CudaBackend::synchronize() { DEEPINFER_CUDA_CHECK(cudaDeviceSynchronize()); }

namespace {

// Whether every FP8 value times its scale is exact in f16: E4M3's values are 2^-9 (granularity) ..
// 448, f16's 2^-24 .. 65504, so scales 2^-15 .. 2^7 (or none) keep them all (DevMatrix).
bool fp8_exact_in_f16(const WeightMatrix& w) {
  if (w.dtype != DType::F8_E4M3) return false;
  if (!w.scale) return true;
  if (w.scale_dtype != DType::F8_E8M0) return false;
  const int64_t scale_rows = (w.rows + w.block_rows - 1) / w.block_rows;
  const auto* codes = reinterpret_cast<const uint8_t*>(w.scale);
  return std::all_of(codes, codes + scale_rows * w.scale_cols, [](uint8_t c) { return c >= 127 - 15 && c <= 127 + 7; });
}

}  // namespace

const DeviceWeight& CudaBackend::weight(const WeightMatrix& w) {
  DEEPINFER_CHECK(w.valid(), "CUDA backend: weight has no data");
  const auto key = w.identity();
  std::lock_guard lock(mutex_);
  if (auto it = weights_.find(key); it != weights_.end()) return it->second.first;
  DeviceWeight d;
  d.host = w;
  d.host.keep_alive = nullptr;
  std::vector<Buffer> owned;
  const size_t data_bytes = w.dtype == DType::F4_E2M1 ? static_cast<size_t>(w.rows * (w.cols / 2))
                                                      : static_cast<size_t>(w.rows * w.cols) * (dtype_bits(w.dtype) / 8);
  owned.emplace_back(data_bytes, allocator_);
  copy_to_backend(owned.back().data(), w.data, data_bytes);
  d.data = owned.back().data();
  if (w.scale) {
    size_t scale_bytes = 0;
    if (w.dtype == DType::F4_E2M1) {
      scale_bytes = static_cast<size_t>(w.rows * w.scale_cols);
    } else {
      const int64_t scale_rows = (w.rows + w.block_rows - 1) / w.block_rows;
      scale_bytes = static_cast<size_t>(scale_rows * w.scale_cols) * (w.scale_dtype == DType::F32 ? 4 : 1);
    }
    owned.emplace_back(scale_bytes, allocator_);
    copy_to_backend(owned.back().data(), w.scale, scale_bytes);
    d.scale = owned.back().data();
  }
  d.fp8_exact_in_f16 = fp8_exact_in_f16(w);
  if (w.dtype == DType::BF16) {  // rows exact in f16 times a power of two: f16 GEMM operands (kBF16H)
    const std::vector<float> scales = bf16_row_f16_scales(reinterpret_cast<const uint16_t*>(w.data), w.rows, w.cols);
    if (!scales.empty()) {
      owned.emplace_back(scales.size() * sizeof(float), allocator_);
      copy_to_backend(owned.back().data(), scales.data(), scales.size() * sizeof(float));
      d.row_scale = owned.back().as<float>();
    }
  }
  auto [it, inserted] = weights_.emplace(key, std::make_pair(d, std::move(owned)));
  return it->second.first;
}

const float* CudaBackend::floats(const float* host, size_t count) {
  DEEPINFER_CHECK(host || count == 0, "CUDA backend: null weight array");
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(static_cast<const void*>(host), count * sizeof(float));
  if (auto it = arrays_.find(key); it != arrays_.end()) return it->second.as<float>();
  Buffer b(std::max<size_t>(count, 1) * sizeof(float), allocator_);
  copy_to_backend(b.data(), host, count * sizeof(float));
  auto [it, inserted] = arrays_.emplace(key, std::move(b));
  return it->second.as<float>();
}

const int32_t* CudaBackend::ints(const int32_t* host, size_t count) {
  return reinterpret_cast<const int32_t*>(floats(reinterpret_cast<const float*>(host), count));
}

void* CudaBackend::stage_bytes(const void* host, size_t bytes) {
  const size_t need = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  while (staging_chunk_ < staging_.size() && staging_used_ + need > staging_[staging_chunk_].size()) {
    ++staging_chunk_;
    staging_used_ = 0;
  }
  if (staging_chunk_ == staging_.size()) {
    staging_.emplace_back(std::max<size_t>(need, size_t{1} << 20), allocator_);
    staging_used_ = 0;
  }
  std::byte* p = staging_[staging_chunk_].data() + staging_used_;
  staging_used_ += need;
  if (bytes == 0) return p;
  if (!pinned_) DEEPINFER_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_), kPinnedBytes, cudaHostAllocDefault));
  // A recorded step's copies read the ring when the graph runs: it must neither wait nor wrap.
  const bool recorded = launch_control().record;
  if (need > kPinnedBytes) {  // larger than the ring: a plain (synchronising) copy
    if (recorded) {
      step_unusable_ = true;
      return p;
    }
    copy_to_backend(p, host, bytes);
    return p;
  }
  if (pinned_used_ + need > kPinnedBytes) {
    if (recorded) {
      step_unusable_ = true;
      return p;
    }
    // Wrapping: every copy queued from the ring must have run before its bytes are rewritten.
    DEEPINFER_CUDA_CHECK(cudaStreamSynchronize(stream()));
    pinned_used_ = 0;
  }
  std::byte* h = pinned_ + pinned_used_;
  pinned_used_ += need;
  std::memcpy(h, host, bytes);
  // Replaying a recording, the graph's own copy node moves these bytes (same ring offset).
  DEEPINFER_CUDA_CHECK(stream_copy(p, h, bytes, cudaMemcpyHostToDevice));
  return p;
}

CudaBackend::StagedSeqs CudaBackend::stage_seqs(std::span<const backend::SeqSlice> seqs, int64_t tokens,
                                                const backend::StateStorage& state) {
  StagedSeqs out;
  std::vector<int32_t> tables;
  backend::check_slices(seqs, tokens, state);
  // In a recorded step every table is padded to the step's capacity, so the staged sizes (and the
  // recording's copies) stay the same while sequences grow into new blocks.
  const auto capacity = static_cast<size_t>(plan_.block_capacity);
  for (const auto& s : seqs) {
    out.host.push_back(
        {s.begin, s.count, s.start, s.slot, static_cast<int32_t>(tables.size()), s.window_floor, s.cached_until});
    tables.insert(tables.end(), s.blocks.begin(), s.blocks.end());
    if (capacity) {
      DEEPINFER_CHECK(s.blocks.size() <= capacity, "cuda: a block table of {} blocks in a step recorded for {}",
                      s.blocks.size(), capacity);
      tables.resize(tables.size() + (capacity - s.blocks.size()), 0);
    }
  }
  out.seqs = stage(std::span<const DeviceSeq>(out.host));
  out.blocks = stage(std::span<const int32_t>(tables));
  out.count = static_cast<int32_t>(out.host.size());
  return out;
}

void* CudaBackend::scratch(size_t bytes, int which) {
  if (scratch_.size() <= static_cast<size_t>(which)) scratch_.resize(static_cast<size_t>(which) + 1);
  Buffer& b = scratch_[static_cast<size_t>(which)];
  if (b.size() < bytes) {
    if (capturing_) {
      retired_scratch_.push_back(std::move(b));  // the graph being recorded may read it
    } else {
      synchronize();  // a kernel may still read the old buffer
    }
    b = Buffer(bytes, allocator_);
  }
  return b.data();
}

}  // namespace deepinfer::cuda
