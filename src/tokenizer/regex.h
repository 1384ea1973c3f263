#pragma once
// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that lists the
// non-overlapping matches of a subject the way Oniguruma's find_iter does for HF tokenizers.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer {

class Regex {
 public:
  // `literal` compiles the pattern as a plain string (HF's Split pattern {"String": ...}).
  explicit Regex(std::string_view pattern, bool literal = false);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Appends [start, end) byte ranges of all matches in `subject`, which must be valid UTF-8.
  // After an empty match the search resumes one character later.
  void find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& matches) const;
  // True when the pattern matches at the very start of `subject` (anchored).
  bool matches_at_start(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace deepinfer
