#pragma once
// Tensor views: what an op sees of its operands (dtype, shape, strides in elements, device, data).
// Views never own memory; Buffer (core/buffer.h) and Workspace (core/workspace.h) do.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "core/dtype.h"
#include "core/error.h"

namespace deepinfer {

enum class Device : uint8_t { CPU, CUDA };

struct TensorView {
  static constexpr int kMaxRank = 4;
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};  // in elements

  // A contiguous row-major view.
  static TensorView contiguous(void* data, DType dtype, std::span<const int64_t> dims, Device device = Device::CPU) {
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    v.rank = static_cast<int>(dims.size());
    DEEPINFER_CHECK(v.rank <= kMaxRank, "tensor rank {} above {}", v.rank, kMaxRank);
    for (int k = 0; k < v.rank; ++k) {
      DEEPINFER_CHECK(dims[static_cast<size_t>(k)] >= 0, "negative tensor dimension {}", dims[static_cast<size_t>(k)]);
      v.shape[static_cast<size_t>(k)] = dims[static_cast<size_t>(k)];
    }
    int64_t s = 1;
    for (int k = v.rank - 1; k >= 0; --k) {
      v.stride[static_cast<size_t>(k)] = s;
      s *= v.shape[static_cast<size_t>(k)];
    }
    return v;
  }
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> dims,
                               Device device = Device::CPU) {
    return contiguous(data, dtype, std::span<const int64_t>(dims.begin(), dims.size()), device);
  }
  static TensorView f32(float* data, std::initializer_list<int64_t> dims) {
    return contiguous(data, DType::F32, dims);
  }
  static TensorView i32(int32_t* data, std::initializer_list<int64_t> dims) {
    return contiguous(data, DType::I32, dims);
  }

  // The same contiguous data under another shape (same element count, dtype and device).
  TensorView reshape(std::initializer_list<int64_t> dims) const {
    DEEPINFER_CHECK(is_contiguous(), "reshape needs a contiguous tensor");
    TensorView v = contiguous(data, dtype, dims, device);
    DEEPINFER_CHECK(v.numel() == numel(), "reshape to {} elements from {}", v.numel(), numel());
    return v;
  }

  int64_t dim(int k) const { return shape[static_cast<size_t>(k)]; }
  // The last dimension, and how many rows of it the tensor holds (ops treat leading dims as rows).
  int64_t last_dim() const { return rank == 0 ? 0 : shape[static_cast<size_t>(rank - 1)]; }
  int64_t rows() const { return last_dim() == 0 ? 0 : numel() / last_dim(); }
  int64_t numel() const {
    int64_t n = 1;
    for (int k = 0; k < rank; ++k) n *= shape[static_cast<size_t>(k)];
    return n;
  }
  // Bytes of a contiguous view of this shape (packed FP4: two elements per byte, rounded up).
  size_t nbytes() const { return (static_cast<size_t>(numel()) * dtype_bits(dtype) + 7) / 8; }
  bool is_contiguous() const {
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; --k) {
      if (shape[static_cast<size_t>(k)] != 1 && stride[static_cast<size_t>(k)] != s) return false;
      s *= shape[static_cast<size_t>(k)];
    }
    return true;
  }
  bool empty() const { return data == nullptr || numel() == 0; }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  float* f32() const {
    DEEPINFER_CHECK(dtype == DType::F32, "expected an F32 tensor, got {}", dtype_name(dtype));
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    DEEPINFER_CHECK(dtype == DType::I32, "expected an I32 tensor, got {}", dtype_name(dtype));
    return static_cast<int32_t*>(data);
  }
};

}  // namespace deepinfer
