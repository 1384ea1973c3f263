// Widening conversions and block dequantisation of mmapped tensors (declared in io/safetensors.h).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/safetensors.h"

namespace deepinfer::io {

namespace {

// Tensor data may sit at any byte offset in the mmap, so every element is read with memcpy.
template <typename T>
T load(const std::byte* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// One element of a scalar (non-packed) tensor as float.
float element_as_float(const TensorView& t, size_t i) {
  const std::byte* p = t.data;
  switch (t.dtype) {
    case DType::F32: return load<float>(p, i);
    case DType::F64: return static_cast<float>(load<double>(p, i));
    case DType::F16: return f16_to_f32(load<uint16_t>(p, i));
    case DType::BF16: return bf16_to_f32(load<uint16_t>(p, i));
    case DType::F8_E4M3: return f8e4m3_to_f32(load<uint8_t>(p, i));
    case DType::F8_E8M0: return e8m0_to_f32(load<uint8_t>(p, i));
    case DType::I8: return static_cast<float>(load<int8_t>(p, i));
    case DType::U8: return static_cast<float>(load<uint8_t>(p, i));
    case DType::I32: return static_cast<float>(load<int32_t>(p, i));
    case DType::I64: return static_cast<float>(load<int64_t>(p, i));
    case DType::BOOL: return load<uint8_t>(p, i) ? 1.0f : 0.0f;
    case DType::F4_E2M1: break;
  }
  fail("{}: tensor '{}' has packed dtype {}; use dequantize_fp4", t.file, t.name, dtype_name(t.dtype));
}

void check_data(const TensorView& t) {
  const uint64_t bits = static_cast<uint64_t>(t.numel()) * dtype_bits(t.dtype);
  if (t.numel() > 0 && t.data == nullptr) fail("{}: tensor '{}' has no data", t.file, t.name);
  if (bits / 8 != t.nbytes) {
    fail("{}: tensor '{}' shape {} x {} needs {} bytes but the view has {}", t.file, t.name, t.shape_string(),
         dtype_name(t.dtype), bits / 8, t.nbytes);
  }
}

void check_2d(const TensorView& t, const char* what) {
  if (t.shape.size() != 2) {
    fail("{}: {} '{}' must be 2-D, found shape {}", t.file, what, t.name, t.shape_string());
  }
}

bool is_float_scale(DType d) {
  return d == DType::F32 || d == DType::BF16 || d == DType::F16 || d == DType::F8_E8M0;
}

// Block edge along one axis: dim elements covered by scale_dim blocks. Blocks are powers of two,
// and ceil(dim / scale_dim) lies in (block/2, block] whenever scale_dim > 1, so rounding it up to
// a power of two recovers the block even when dim is not a multiple of it.
int64_t derive_block(int64_t dim, int64_t scale_dim) {
  int64_t per = (dim + scale_dim - 1) / scale_dim;
  int64_t block = 1;
  while (block < per) block <<= 1;
  return block;
}

}  // namespace

std::vector<float> to_float(const TensorView& t) {
  check_data(t);
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  switch (t.dtype) {  // fast paths for the common dtypes, the generic path for the rest
    case DType::F32:
      if (n) std::memcpy(out.data(), t.data, n * sizeof(float));
      return out;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load<uint16_t>(t.data, i));
      return out;
    default:
      for (size_t i = 0; i < n; ++i) out[i] = element_as_float(t, i);
      return out;
  }
}

std::vector<int64_t> to_int64(const TensorView& t) {
  check_data(t);
  const auto n = static_cast<size_t>(t.numel());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::I8: out[i] = load<int8_t>(t.data, i); break;
      case DType::U8: out[i] = load<uint8_t>(t.data, i); break;
      case DType::I32: out[i] = load<int32_t>(t.data, i); break;
      case DType::I64: out[i] = load<int64_t>(t.data, i); break;
      case DType::BOOL: out[i] = load<uint8_t>(t.data, i) ? 1 : 0; break;
      default:
        fail("{}: tensor '{}' has dtype {} but an integer tensor (I8, U8, I32, I64, BOOL) was expected", t.file,
             t.name, dtype_name(t.dtype));
    }
  }
  return out;
}

std::vector<float> dequantize_fp8_blocks(const TensorView& weight, const TensorView& scale) {
  if (weight.dtype != DType::F8_E4M3) {
    fail("{}: FP8 weight '{}' must be F8_E4M3, found {}", weight.file, weight.name, dtype_name(weight.dtype));
  }
  if (!is_float_scale(scale.dtype)) {
    fail("{}: FP8 scale '{}' must be F32 or F8_E8M0, found {}", scale.file, scale.name, dtype_name(scale.dtype));
  }
  check_2d(weight, "FP8 weight");
  check_2d(scale, "FP8 scale");
  check_data(weight);
  check_data(scale);
  const int64_t rows = weight.dim(0), cols = weight.dim(1);
  const int64_t srows = scale.dim(0), scols = scale.dim(1);
  if ((rows > 0 && srows == 0) || (cols > 0 && scols == 0)) {
    fail("{}: FP8 scale '{}' shape {} cannot cover weight '{}' shape {}", scale.file, scale.name, scale.shape_string(),
         weight.name, weight.shape_string());
  }
  const int64_t brow = rows ? derive_block(rows, srows) : 1;
  const int64_t bcol = cols ? derive_block(cols, scols) : 1;
  if ((rows + brow - 1) / brow != srows || (cols + bcol - 1) / bcol != scols) {
    fail("{}: FP8 scale '{}' shape {} does not tile weight '{}' shape {} with power-of-two blocks", scale.file,
         scale.name, scale.shape_string(), weight.name, weight.shape_string());
  }
  std::vector<float> scales = to_float(scale);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const auto* w = reinterpret_cast<const uint8_t*>(weight.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scales.data() + (r / brow) * scols;
    const uint8_t* wrow = w + r * cols;
    float* orow = out.data() + r * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += bcol) {  // one scale per column block
      const float s = srow[c0 / bcol];
      const int64_t c1 = std::min(cols, c0 + bcol);
      for (int64_t c = c0; c < c1; ++c) orow[c] = f8e4m3_to_f32(wrow[c]) * s;  // a table lookup (core/dtype.h)
    }
  }
  return out;
}

std::vector<float> dequantize_fp4(const TensorView& weight, const TensorView& scale) {
  if (weight.dtype != DType::I8 && weight.dtype != DType::U8 && weight.dtype != DType::F4_E2M1) {
    fail("{}: FP4 weight '{}' must be I8/U8 (two e2m1 codes per byte) or F4, found {}", weight.file, weight.name,
         dtype_name(weight.dtype));
  }
  if (!is_float_scale(scale.dtype)) {
    fail("{}: FP4 scale '{}' must be F8_E8M0 (or a float type), found {}", scale.file, scale.name,
         dtype_name(scale.dtype));
  }
  check_2d(weight, "FP4 weight");
  check_2d(scale, "FP4 scale");
  check_data(weight);
  check_data(scale);
  const int64_t rows = weight.dim(0);
  // I8/U8 store [out, in/2] bytes; F4 stores the logical [out, in] shape.
  const int64_t cols = weight.dtype == DType::F4_E2M1 ? weight.dim(1) : weight.dim(1) * 2;
  if (cols % 2 != 0) fail("{}: FP4 weight '{}' has odd input width {}", weight.file, weight.name, cols);
  constexpr int64_t kGroup = 32;
  const int64_t groups = (cols + kGroup - 1) / kGroup;
  if (scale.dim(0) != rows || scale.dim(1) != groups) {
    fail("{}: FP4 scale '{}' shape {} does not match weight '{}' shape {} (expected [{}, {}]: one scale per {} inputs)",
         scale.file, scale.name, scale.shape_string(), weight.name, weight.shape_string(), rows, groups, kGroup);
  }
  std::vector<float> scales = to_float(scale);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const auto* w = reinterpret_cast<const uint8_t*>(weight.data);
  const int64_t row_bytes = cols / 2;
  float table[16];
  for (int c = 0; c < 16; ++c) table[c] = f4e2m1_to_f32(static_cast<uint8_t>(c));
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scales.data() + r * groups;
    const uint8_t* wrow = w + r * row_bytes;
    float* orow = out.data() + r * cols;
    for (int64_t g = 0; g < groups; ++g) {  // a group is 32 elements = 16 bytes (the last may be shorter)
      const float s = srow[g];
      const int64_t b1 = std::min(row_bytes, (g + 1) * (kGroup / 2));
      for (int64_t b = g * (kGroup / 2); b < b1; ++b) {
        orow[2 * b] = table[wrow[b] & 0xf] * s;  // low nibble = even element
        orow[2 * b + 1] = table[wrow[b] >> 4] * s;
      }
    }
  }
  return out;
}

}  // namespace deepinfer::io
