// Source checks of the CUDA kernel files, run everywhere (no GPU needed): launch.cuh launches every
// kernel with programmatic dependent launch, which is only correct if each kernel waits for the
// previous one before it touches memory, so each __global__ body must open with that wait (or with
// its form that first asks the L2 for weight rows, wait_for_previous_kernel(L2Rows...): launch.cuh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first statement of the body of each __global__ function in `source`: the text after its
// opening brace up to the next ';' (whitespace trimmed), with the kernel's line for messages.
struct KernelOpening {
  int line;
  std::string first_statement;
};

std::vector<KernelOpening> kernel_openings(const std::string& source) {
  std::vector<KernelOpening> out;
  for (size_t at = source.find("__global__"); at != std::string::npos; at = source.find("__global__", at + 1)) {
    const size_t brace = source.find('{', at);
    if (brace == std::string::npos) break;
    size_t b = brace + 1;
    while (b < source.size() && std::isspace(static_cast<unsigned char>(source[b]))) ++b;
    const size_t semi = source.find(';', b);
    const int line = 1 + static_cast<int>(std::count(source.begin(), source.begin() + static_cast<long>(at), '\n'));
    out.push_back({line, source.substr(b, semi == std::string::npos ? 0 : semi + 1 - b)});
  }
  return out;
}

TEST(KernelSources, FinderSeesAMissingWait) {
  const auto k = kernel_openings("__global__ void a(int* p) {\n  wait_for_previous_kernel();\n}\n"
                                 "__global__ void __launch_bounds__(64) b(int* p) { p[0] = 1; }\n");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].first_statement, "wait_for_previous_kernel();");
  EXPECT_EQ(k[1].first_statement, "p[0] = 1;");
  EXPECT_EQ(k[1].line, 4);
}

// The plain wait, or the one after an L2 prefetch of weight rows (arguments, then the wait).
bool opens_with_wait(const std::string& statement) {
  static const std::string kWait = "wait_for_previous_kernel(";
  return statement.rfind(kWait, 0) == 0 && statement.size() >= kWait.size() + 2 &&
         statement.compare(statement.size() - 2, 2, ");") == 0;
}

TEST(KernelSources, WaitFormsAreRecognised) {
  EXPECT_TRUE(opens_with_wait("wait_for_previous_kernel();"));
  EXPECT_TRUE(opens_with_wait("wait_for_previous_kernel(first_rows(a), first_rows(b));"));
  EXPECT_FALSE(opens_with_wait("p[0] = wait_for_previous_kernel();"));
  EXPECT_FALSE(opens_with_wait("prefetch(a);"));
}

TEST(KernelSources, EveryKernelFirstWaitsForThePreviousKernel) {
  const std::filesystem::path dir = std::filesystem::path(DEEPINFER_SOURCE_DIR) / "src" / "backend" / "cuda";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int kernels = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (ext != ".cu" && ext != ".cuh") continue;
    for (const auto& k : kernel_openings(read_file(entry.path()))) {
      ++kernels;
      EXPECT_TRUE(opens_with_wait(k.first_statement))
          << k.first_statement << "\n"
          << entry.path().filename().string() << ":" << k.line
          << ": a kernel launched with programmatic dependent launch must wait for the previous kernel first";
    }
  }
  EXPECT_GE(kernels, 40) << "the kernel files moved? found only " << kernels << " kernels in " << dir;
}

}  // namespace
