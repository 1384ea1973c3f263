#pragma once
// Crafted huge files that cost no disk space or memory: `prefix`, then NUL bytes up to `size`
// (a sparse file). "A 2 GB string" for the loaders' tests: `{"model_type": "` and 2 GB more.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace deepinfer::testing_util {

inline constexpr uintmax_t kTwoGigabytes = uintmax_t{2} << 30;

inline void write_sparse_file(const std::filesystem::path& path, const std::string& prefix,
                              uintmax_t size = kTwoGigabytes) {
  { std::ofstream(path, std::ios::binary) << prefix; }
  std::filesystem::resize_file(path, size);
}

// One-line errors name what they refuse and never echo the input.
inline bool is_one_line(const std::string& message) {
  return message.find('\n') == std::string::npos && message.size() < 600;
}

}  // namespace deepinfer::testing_util
