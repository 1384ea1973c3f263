#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace deepinfer {

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= kMiB) return fmt::format("{:.0f} MB", static_cast<double>(bytes) / kMiB);
  return fmt::format("{} bytes", bytes);
}

namespace {

// The size of the regular file at `path`, or nullopt when nothing is there.
std::optional<uint64_t> regular_file_size(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return std::nullopt;
  if (ec) fail("cannot open {} ({}): {}", path.string(), what, ec.message());
  if (!std::filesystem::is_regular_file(status)) fail("{} ({}) is not a regular file", path.string(), what);
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read the size of {} ({}): {}", path.string(), what, ec.message());
  return size;
}

}  // namespace

std::optional<std::string> read_text_file_if_exists(const std::filesystem::path& path, uint64_t max_bytes,
                                                    std::string_view what) {
  const auto size = regular_file_size(path, what);
  if (!size) return std::nullopt;
  if (*size > max_bytes) {
    fail("{} ({}) is {}, over the {} limit for a {}; is it the right file?", path.string(), what, human_bytes(*size),
         human_bytes(max_bytes), what);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {} ({}): {}", path.string(), what, std::strerror(errno));
  // Read at most the limit even if the file grew since the size check.
  return read_text_stream(in, max_bytes, fmt::format("{} ({})", path.string(), what));
}

std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes, std::string_view what) {
  auto text = read_text_file_if_exists(path, max_bytes, what);
  if (!text) fail("cannot open {} ({}): no such file", path.string(), what);
  return std::move(*text);
}

std::string read_text_stream(std::istream& in, uint64_t max_bytes, std::string_view what) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    const auto got = static_cast<uint64_t>(in.gcount());
    if (text.size() + got > max_bytes) fail("{} is longer than the {} limit", what, human_bytes(max_bytes));
    text.append(buffer, got);
  }
  if (in.bad()) fail("reading {} failed: {}", what, std::strerror(errno));
  return text;
}

bool read_bounded_line(std::istream& in, std::string& line, uint64_t max_bytes, std::string_view source,
                       int64_t line_number) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) break;
    any = true;
    if (c == '\n') break;
    if (line.size() == max_bytes) {
      fail("{}: line {} is longer than the {} limit for one line", source, line_number, human_bytes(max_bytes));
    }
    line.push_back(static_cast<char>(c));
  }
  if (!any) {
    in.setstate(std::ios::eofbit);
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

}  // namespace deepinfer
