#pragma once
// Helpers for the io tests: scratch folders, raw file writing and error-message matching.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "core/error.h"

namespace deepinfer::io::testing {

namespace fs = std::filesystem;

// A fresh folder under the gtest temp dir, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device rd;
    path_ = fs::path(::testing::TempDir()) /
            ("deepinfer_io_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(rd()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file from a header text and a data area, exactly as given (no padding, no checks),
// so tests can build every kind of broken file.
inline std::string raw_safetensors(const std::string& header, const std::string& data, uint64_t declared_len) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((declared_len >> (8 * i)) & 0xff));
  return out + header + data;
}
inline std::string raw_safetensors(const std::string& header, const std::string& data) {
  return raw_safetensors(header, data, header.size());
}

// Runs `fn`, expects a deepinfer::Error whose one-line message contains every fragment.
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const deepinfer::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error message is not one line: " << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
    return;
  }
  ADD_FAILURE() << "expected a deepinfer::Error";
}

}  // namespace deepinfer::io::testing
