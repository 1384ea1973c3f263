// Shared harness of the CLI tests: runs the `deepinfer` binary through the shell with stdout and
// stderr captured to files in a per-test scratch folder (removed afterwards).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::cli_test {

namespace fs = std::filesystem;

// `arg` as one single-quoted shell word.
inline std::string shell_quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines() const { return lines_of(err); }
  std::vector<std::string> out_lines() const { return lines_of(out); }
};

// Base fixture: each test gets its own scratch folder, `<temp>/<prefix><pid>_<n>`, unique within
// the process by a counter and across processes (ctest -j runs tests in parallel) by the pid.
class CliHarness : public ::testing::Test {
 protected:
  explicit CliHarness(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    static std::atomic<int> counter{0};
    scratch_ = fs::temp_directory_path() / (prefix_ + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(scratch_);
  }
  void TearDown() override { fs::remove_all(scratch_); }

  // Runs `deepinfer args...` with no stdin; stdout and stderr land in the scratch folder.
  RunResult run(const std::vector<std::string>& args) const {
    std::string command = shell_quote(DEEPINFER_CLI_PATH);
    for (const auto& a : args) command += " " + shell_quote(a);
    const fs::path out = scratch_ / "stdout", err = scratch_ / "stderr";
    command += " > " + shell_quote(out.string()) + " 2> " + shell_quote(err.string()) + " < /dev/null";
    const int status = std::system(command.c_str());
    RunResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = read_file(out);
    result.err = read_file(err);
    return result;
  }

  fs::path scratch_;

 private:
  std::string prefix_;
};

}  // namespace deepinfer::cli_test
