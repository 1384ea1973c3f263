#pragma once
// Tensor views: what an op sees of its operands (dtype, shape, strides in elements, device, data).
// Views never own memory; Buffer (core/buffer.h) and Workspace (core/workspace.h) do.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

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
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> dims,
                               Device device = Device::CPU) {
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    v.rank = static_cast<int>(dims.size());
    DEEPINFER_CHECK(v.rank <= kMaxRank, "tensor rank {} above {}", v.rank, kMaxRank);
    int i = 0;
    for (int64_t d : dims) v.shape[static_cast<size_t>(i++)] = d;
    int64_t s = 1;
    for (int k = v.rank - 1; k >= 0; --k) {
      v.stride[static_cast<size_t>(k)] = s;
      s *= v.shape[static_cast<size_t>(k)];
    }
    return v;
  }
  static TensorView f32(float* data, std::initializer_list<int64_t> dims) {
    return contiguous(data, DType::F32, dims);
  }
  static TensorView i32(int32_t* data, std::initializer_list<int64_t> dims) {
    return contiguous(data, DType::I32, dims);
  }

  int64_t dim(int k) const { return shape[static_cast<size_t>(k)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int k = 0; k < rank; ++k) n *= shape[static_cast<size_t>(k)];
    return n;
  }
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
