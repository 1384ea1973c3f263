#include "engine/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "core/error.h"

namespace deepinfer::engine {

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

size_t default_kv_memory_bytes() {
  const size_t ram = physical_memory_bytes();
  return ram ? static_cast<size_t>(static_cast<double>(ram) * kDefaultKvMemoryFraction) : size_t(4) << 30;
}

size_t parse_memory_size(std::string_view text) {
  const std::string original(text);
  auto bad = [&]() -> size_t {
    fail("memory size '{}' is not understood: expected bytes with an optional K/M/G/T suffix (e.g. 2G, 512M) or a "
         "fraction of RAM (e.g. 0.3 or 30%)",
         original);
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) bad();
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  const std::string number(text.substr(0, digits));
  std::string suffix(text.substr(digits));
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1) bad();
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) bad();

  const bool has_point = number.find('.') != std::string::npos;
  if (suffix == "%" || (suffix.empty() && has_point)) {
    const double fraction = suffix == "%" ? value / 100.0 : value;
    DEEPINFER_CHECK(fraction > 0 && fraction <= 1, "memory fraction '{}' must be in (0, 1] (of physical RAM)",
                    original);
    const size_t ram = physical_memory_bytes();
    DEEPINFER_CHECK(ram > 0, "memory size '{}' is a fraction of RAM, but the RAM size is unknown here", original);
    return static_cast<size_t>(fraction * static_cast<double>(ram));
  }
  double scale = 1;
  if (!suffix.empty()) {
    if (suffix.back() == 'B') suffix.pop_back();
    if (suffix.size() == 2 && suffix[1] == 'I') suffix.pop_back();
    if (suffix.size() != 1) {
      if (!suffix.empty()) bad();
    } else {
      const std::string units = "KMGT";
      const size_t at = units.find(suffix[0]);
      if (at == std::string::npos) bad();
      scale = std::pow(1024.0, static_cast<double>(at + 1));
    }
  }
  if (scale == 1 && has_point) bad();  // "1.5" without a unit is a fraction, handled above; "1.5B" is not bytes
  const double bytes = value * scale;
  DEEPINFER_CHECK(bytes >= 1 && bytes < 1.8e19, "memory size '{}' is out of range", original);
  return static_cast<size_t>(bytes);
}

}  // namespace deepinfer::engine
