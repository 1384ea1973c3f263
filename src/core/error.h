#pragma once
// One error type for the whole engine. Messages say what was expected, what was found and where;
// the CLI prints them as a single line and exits non-zero.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace deepinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
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
