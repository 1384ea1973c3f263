#include "io/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace deepinfer::io {

namespace {
struct DTypeName {
  DType dtype;
  const char* name;
};
// Safetensors spells packed FP4 "F4"; everything else matches dtype_name().
constexpr DTypeName kDTypeNames[] = {
    {DType::F64, "F64"},         {DType::F32, "F32"},         {DType::F16, "F16"}, {DType::BF16, "BF16"},
    {DType::F8_E4M3, "F8_E4M3"}, {DType::F8_E8M0, "F8_E8M0"}, {DType::F4_E2M1, "F4"}, {DType::I8, "I8"},
    {DType::U8, "U8"},           {DType::I32, "I32"},         {DType::I64, "I64"}, {DType::BOOL, "BOOL"},
};
}  // namespace

std::string safetensors_dtype_name(DType t) {
  for (const auto& e : kDTypeNames) {
    if (e.dtype == t) return e.name;
  }
  fail("no safetensors name for dtype {}", static_cast<int>(t));
}

bool parse_dtype_name(std::string_view name, DType& out) {
  for (const auto& e : kDTypeNames) {
    if (name == e.name) {
      out = e.dtype;
      return true;
    }
  }
  return false;
}

std::string serialize_safetensors(const std::vector<OwnedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    unsigned __int128 numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail("write_safetensors: tensor '{}' has negative dimension {}", t.name, d);
      numel *= static_cast<uint64_t>(d);
    }
    const unsigned __int128 bits = numel * dtype_bits(t.dtype);
    if (bits % 8 != 0 || bits / 8 != t.data.size()) {
      fail("write_safetensors: tensor '{}' ({}) needs {} bits of data but has {} bytes", t.name, dtype_name(t.dtype),
           static_cast<uint64_t>(bits), t.data.size());
    }
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data area 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += text;
  for (const auto& t : tensors) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string bytes = serialize_safetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("write_safetensors: cannot create {}", path.string());
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("write_safetensors: writing {} bytes to {} failed", bytes.size(), path.string());
}

}  // namespace deepinfer::io
