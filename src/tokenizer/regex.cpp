#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace deepinfer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// One match-data block per thread, reused across calls and patterns (we read only ovector[0..1]).
pcre2_match_data* thread_match_data() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2 rejects UCP together with LITERAL; a literal needs no character classes anyway.
  const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                  &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    fail("tokenizer: cannot compile regex /{}/ at offset {}: {}", pattern, error_offset, pcre2_message(error_code));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

void Regex::find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& matches) const {
  pcre2_match_data* match_data = thread_match_data();
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t offset = 0;
  while (offset <= subject.size()) {
    // Input is validated once by the tokenizer, so skip PCRE2's per-call UTF check.
    const int rc = compiled_->jit
                       ? pcre2_jit_match(compiled_->code, data, subject.size(), offset, PCRE2_NO_UTF_CHECK, match_data, nullptr)
                       : pcre2_match(compiled_->code, data, subject.size(), offset, PCRE2_NO_UTF_CHECK, match_data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0 && rc != 0) fail("tokenizer: regex /{}/ failed on a {}-byte input: {}", pattern_, subject.size(), pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    matches.emplace_back(start, end);
    if (end > start) {
      offset = end;
    } else {
      // Empty match: step over one whole character.
      offset = end + 1;
      while (offset < subject.size() && (static_cast<unsigned char>(subject[offset]) & 0xC0) == 0x80) ++offset;
    }
  }
}

bool Regex::matches_at_start(std::string_view subject) const {
  pcre2_match_data* match_data = thread_match_data();
  const int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                             PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, match_data, nullptr);
  return rc >= 0;
}

}  // namespace deepinfer
