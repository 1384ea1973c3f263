// Formatting shared by the `deepinfer inspect` printers.
#include "cli/inspect_print.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/load_progress.h"

namespace deepinfer::cli {

using engine::human_bytes;

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  for (int pos = static_cast<int>(digits.size()) - 3; pos > 0; pos -= 3) digits.insert(static_cast<size_t>(pos), ",");
  return value < 0 ? "-" + digits : digits;
}

std::string short_count(double value) {
  if (value >= 1e12) return fmt::format("{:.2f}T", value / 1e12);
  if (value >= 1e9) return fmt::format("{:.2f}B", value / 1e9);
  if (value >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f}K", value / 1e3);
  return fmt::format("{:.0f}", value);
}

void print_row(const std::string& label, const std::string& value) {
  std::printf("  %-22s %s\n", label.c_str(), value.c_str());
}

void print_parameters(const std::vector<model::ParameterGroup>& groups) {
  int64_t total_count = 0, total_bytes = 0;
  for (const auto& g : groups) total_count += g.count, total_bytes += g.bytes;
  std::vector<model::ParameterGroup> sorted = groups;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  std::printf("\nParameters\n  %-24s %-16s %16s %8s %12s\n", "component", "dtype", "count", "share", "bytes");
  for (const auto& g : sorted) {
    const double share = total_count ? 100.0 * static_cast<double>(g.count) / static_cast<double>(total_count) : 0.0;
    std::printf("  %-24s %-16s %16s %7.1f%% %12s\n", g.component.c_str(), g.dtype.c_str(), with_commas(g.count).c_str(),
                share, human_bytes(static_cast<double>(g.bytes)).c_str());
  }
  std::printf("  %-24s %-16s %16s %8s %12s\n", "total", "", with_commas(total_count).c_str(), "",
              human_bytes(static_cast<double>(total_bytes)).c_str());
  std::printf("  total parameters: %s (%s), %s bytes (%s)\n", with_commas(total_count).c_str(),
              short_count(static_cast<double>(total_count)).c_str(), with_commas(total_bytes).c_str(),
              human_bytes(static_cast<double>(total_bytes)).c_str());
}

// What the state pools really allocate for this layout: the per-token cost is the compressed KV
// and indexer-key entries in blocks (one block covers block_tokens positions), the per-sequence
// cost is one slot (window rings plus the compressors' unfinished windows).
void print_state(const kv::StateLayout& layout, int64_t max_positions) {
  int64_t window_elems = 0, compressor_elems = 0, rings = 0;
  for (const auto& l : layout.layers) {
    window_elems += l.window.window * l.window.head_dim;
    rings += l.window.window > 0;
    for (const auto* c : {&l.compressor, &l.indexer})
      if (*c) compressor_elems += (*c)->slot_elems();
  }
  const auto element = static_cast<int64_t>(layout.element_bytes());
  const auto slot = static_cast<int64_t>(layout.slot_bytes()), block = static_cast<int64_t>(layout.block_bytes());
  std::printf("\nSequence state (what the state pools allocate, %s)\n", std::string(dtype_name(layout.dtype)).c_str());
  const std::string per_token_text = bytes_text(layout.bytes_per_token());
  print_row("per token", fmt::format("{} B (compressed KV + indexer keys; blocks of {} positions, {} B each)",
                                     per_token_text, layout.block_tokens, with_commas(block)));
  print_row("per sequence slot", fmt::format("{} B ({}): window rings {} B over {} layers, unfinished "
                                             "compression windows {} B",
                                             with_commas(slot), human_bytes(static_cast<double>(slot)),
                                             with_commas(window_elems * element), rings,
                                             with_commas(compressor_elems * element)));
  std::printf("  %-22s %s\n", "context", "state per sequence (slot + blocks)");
  for (int64_t tokens : {int64_t{4096}, int64_t{131072}, int64_t{1048576}}) {
    const std::string label = tokens >= 1048576 ? fmt::format("{}M tokens", tokens / 1048576)
                                                : fmt::format("{}K tokens", tokens / 1024);
    const std::string note = max_positions > 0 && tokens > max_positions ? " (beyond the model's context)" : "";
    const double bytes = static_cast<double>(slot) + static_cast<double>(layout.blocks_for(tokens) * block);
    print_row(label, human_bytes(bytes) + note);
  }
}


std::string bytes_text(double bytes) {
  const auto whole = static_cast<int64_t>(std::floor(bytes));
  if (static_cast<double>(whole) == bytes) return with_commas(whole);
  std::string frac = fmt::format("{:.2f}", bytes - static_cast<double>(whole)).substr(1);  // ".25"
  while (frac.back() == '0') frac.pop_back();
  return with_commas(whole) + frac;
}

void print_released_state(const kv::StateLayout& layout, const kv::StoredFormats& f) {
  const kv::StoredStateBytes b = kv::stored_state_bytes(layout, f);
  int64_t kv_width = 0, index_width = 0, window_width = 0;
  for (const auto& l : layout.layers) {
    if (l.compressor) kv_width = l.compressor->head_dim;
    if (l.indexer) index_width = l.indexer->head_dim;
    window_width = std::max(window_width, l.window.head_dim);
  }
  std::printf("\nSequence state in the released encodings (what a pool storing them allocates)\n");
  print_row("global KV per token", fmt::format("{} B", bytes_text(b.global_per_token)));
  if (kv_width)
    print_row("  compressed KV", fmt::format("{} B ({} B per entry: {})", bytes_text(b.kv_per_token),
                                             kv::encoded_row_bytes(f.kv_entry, kv_width, f.rope_dims),
                                             kv::row_encoding_name(f.kv_entry)));
  if (index_width)
    print_row("  indexer keys", fmt::format("{} B ({} B per entry: {})", bytes_text(b.index_per_token),
                                            kv::encoded_row_bytes(f.index_key, index_width, f.rope_dims),
                                            kv::row_encoding_name(f.index_key)));
  if (window_width)
    print_row("window rings", fmt::format("{} B per sequence ({} B per row: {})", with_commas(b.window_bytes),
                                          kv::encoded_row_bytes(f.window, window_width, f.rope_dims),
                                          kv::row_encoding_name(f.window)));
}

}  // namespace deepinfer::cli
