#pragma once
// Scratch for one forward step: the i-th request of a step reuses the i-th buffer of the last step,
// grown only when this step needs more. After the first steps at the largest shape, a step
// allocates nothing. (Requests must come in the same order each step, which a forward's fixed
// sequence of ops guarantees.)
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace deepinfer::model {

class StepWorkspace {
 public:
  void reset() { next_ = 0; }
  TensorView f32(std::initializer_list<int64_t> dims) { return view(DType::F32, dims); }
  TensorView i32(std::initializer_list<int64_t> dims) { return view(DType::I32, dims); }
  int64_t growths() const { return growths_; }  // buffer (re)allocations so far

 private:
  TensorView view(DType dtype, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (next_ == buffers_.size()) buffers_.emplace_back();
    auto& buffer = buffers_[next_++];
    if (buffer.size() < static_cast<size_t>(n)) {
      buffer.resize(static_cast<size_t>(n));
      ++growths_;
    }
    return TensorView::contiguous(buffer.data(), dtype, dims);  // 4-byte elements share float storage
  }

  std::vector<std::vector<float>> buffers_;
  size_t next_ = 0;
  int64_t growths_ = 0;
};

}  // namespace deepinfer::model
