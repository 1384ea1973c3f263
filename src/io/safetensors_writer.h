#pragma once
// Writes .safetensors files (tests build hand-made checkpoints with it; tools can dump tensors).
// The header is padded with spaces to a multiple of 8 bytes, as the reference writer does.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace deepinfer::io {

struct OwnedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // raw little-endian bytes, exactly shape x dtype long
};

// Copies `count` elements of trivially copyable T into an OwnedTensor (no conversion).
template <typename T>
OwnedTensor make_owned_tensor(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  OwnedTensor t{std::move(name), dtype, std::move(shape), {}};
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// Safetensors dtype string ("BF16", "F8_E4M3", ...) for a DType; parse_dtype_name is its inverse
// and returns false for names this engine does not read.
std::string safetensors_dtype_name(DType t);
bool parse_dtype_name(std::string_view name, DType& out);

// The complete file contents (8-byte length, JSON header, data). Throws Error if a tensor's byte
// length does not match its shape and dtype.
std::string serialize_safetensors(const std::vector<OwnedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace deepinfer::io
