#pragma once
// How much memory the state pool may take: a byte count ("2G", "512M", "1073741824") or a
// fraction of physical RAM ("0.3", "30%").
#include <cstddef>
#include <string_view>

namespace deepinfer::engine {

// The default budget: this fraction of physical RAM. The pool's storage is reserved, not touched,
// so an unused budget costs address space only; blocks are handed out lowest first and reused
// last-freed first, so the pages touched follow the peak use.
inline constexpr double kDefaultKvMemoryFraction = 0.25;

size_t physical_memory_bytes();  // 0 if unknown
size_t default_kv_memory_bytes();

// Parses a memory size: an integer with an optional K/M/G/T suffix (binary: K = 1024, with or
// without a trailing 'B' or 'iB', e.g. "512M", "2GiB", "1.5G"), or a fraction of physical RAM
// written with a decimal point or a percent sign ("0.3", "30%"; in (0, 1]). Plain integers are
// bytes. Throws Error naming the text on anything else.
size_t parse_memory_size(std::string_view text);

}  // namespace deepinfer::engine
