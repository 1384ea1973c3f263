// Bounded text-file reads: a file over its limit is refused from its size alone, a long line or
// stream stops at the limit, and every error is one line naming the file.
#include "core/text_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "core/error.h"
#include "testing/big_file.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using testing_util::is_one_line;
using testing_util::kTwoGigabytes;
using testing_util::write_sparse_file;

class TextFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("deepinfer_text_file_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  template <typename F>
  std::string error_of(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_TRUE(is_one_line(e.what())) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "expected deepinfer::Error";
    return {};
  }

  fs::path dir_;
};

TEST_F(TextFile, ATwoGigabyteFileIsRefusedFromItsSizeAlone) {
  const fs::path path = dir_ / "config.json";
  write_sparse_file(path, R"({"model_type": ")");
  ASSERT_EQ(fs::file_size(path), kTwoGigabytes);
  const std::string message = error_of([&] { read_text_file(path, kConfigFileLimit, "model config"); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("is 2.0 GB, over the 16 MB limit for a model config"), std::string::npos) << message;
}

TEST_F(TextFile, ReadsFilesUpToTheLimitAndNamesWhatIsMissing) {
  const fs::path path = dir_ / "small.json";
  { std::ofstream(path, std::ios::binary) << "{\"a\": 1}\n"; }
  EXPECT_EQ(read_text_file(path, 9, "test file"), "{\"a\": 1}\n");
  EXPECT_NE(error_of([&] { read_text_file(path, 8, "test file"); }).find("over the 8 bytes limit"), std::string::npos);
  EXPECT_FALSE(read_text_file_if_exists(dir_ / "missing.json", 100, "test file").has_value());
  EXPECT_NE(error_of([&] { read_text_file(dir_ / "missing.json", 100, "test file"); }).find("no such file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_text_file(dir_, 100, "test file"); }).find("not a regular file"), std::string::npos);
}

TEST_F(TextFile, StreamsStopAtTheLimit) {
  std::istringstream small(std::string(1000, 'x'));
  EXPECT_EQ(read_text_stream(small, 1000, "stdin").size(), 1000u);
  std::istringstream big(std::string(200000, 'x'));
  EXPECT_NE(error_of([&] { read_text_stream(big, 100000, "the request on stdin"); })
                .find("the request on stdin is longer than the"),
            std::string::npos);
}

TEST_F(TextFile, BoundedLinesSplitOnNewlinesAndStopAtTheLimit) {
  std::istringstream in("one\r\ntwo\n\nlast");
  std::string line;
  std::vector<std::string> lines;
  for (int64_t n = 1; read_bounded_line(in, line, 8, "in.jsonl", n); ++n) lines.push_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "", "last"}));

  std::istringstream exact("12345678\n123456789\n");
  ASSERT_TRUE(read_bounded_line(exact, line, 8, "in.jsonl", 1));
  EXPECT_EQ(line, "12345678");
  const std::string message = error_of([&] { read_bounded_line(exact, line, 8, "in.jsonl", 2); });
  EXPECT_NE(message.find("in.jsonl: line 2 is longer than the 8 bytes limit"), std::string::npos) << message;

  // A 2 GB line without a newline: the read stops at the limit.
  const fs::path path = dir_ / "requests.jsonl";
  write_sparse_file(path, "{\"prompt\": \"");
  std::ifstream file(path, std::ios::binary);
  EXPECT_NE(error_of([&] { read_bounded_line(file, line, kMiB, path.string(), 1); }).find("line 1 is longer"),
            std::string::npos);
  EXPECT_LE(static_cast<uint64_t>(file.tellg()), kMiB + 1);
}

TEST(HumanBytes, PicksTheUnit) {
  EXPECT_EQ(human_bytes(812), "812 bytes");
  EXPECT_EQ(human_bytes(16 * kMiB), "16 MB");
  EXPECT_EQ(human_bytes(kTwoGigabytes), "2.0 GB");
}

}  // namespace
}  // namespace deepinfer
