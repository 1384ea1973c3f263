#pragma once
// One error type for the whole engine. Messages say what was expected, what was found and where;
// the CLI prints them as a single line and exits non-zero.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace deepinfer {

// At most `max` bytes of `text` for an error message: longer input (a hostile 2 GB string, a huge
// JSON value) keeps its start and says how much was left out.
inline std::string elide(std::string_view text, size_t max = 80) {
  if (text.size() <= max) return std::string(text);
  return fmt::format("{}... ({} more bytes)", text.substr(0, max), text.size() - max);
}

class Error : public std::runtime_error {
 public:
  // Messages are capped at 8 KB (the middle is elided), so no error can echo a whole input.
  explicit Error(const std::string& message) : std::runtime_error(cap(message)) {}

 private:
  static std::string cap(const std::string& m) {
    constexpr size_t kMax = 8192;
    if (m.size() <= kMax) return m;
    return fmt::format("{} ... ({} bytes elided) ... {}", m.substr(0, kMax - 1024), m.size() - kMax + 512,
                       m.substr(m.size() - 512));
  }
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Checks an invariant that bad input can break (never use assert for those).
#define DEEPINFER_CHECK(cond, ...)            \
  do {                                        \
    if (!(cond)) ::deepinfer::fail(__VA_ARGS__); \
  } while (0)

}  // namespace deepinfer
