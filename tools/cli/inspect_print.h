#pragma once
// Table and number formatting shared by the `deepinfer inspect` printers (V4 in cmd_inspect.cpp,
// V4.1 in inspect_deepseek_v41.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "kv/state_layout.h"
#include "kv/stored_format.h"
#include "model/model.h"

namespace deepinfer::cli {

std::string with_commas(int64_t value);  // 1,234,567
std::string short_count(double value);   // 9.1M, 284B
std::string bytes_text(double bytes);    // "890", "3,514.25"
void print_row(const std::string& label, const std::string& value);
// Parameters by component and stored dtype, largest first, with totals.
void print_parameters(const std::vector<model::ParameterGroup>& groups);
// What the pools allocate for `layout` (F32 on the CPU backend): per token, per slot, at 4K/128K/1M.
void print_state(const kv::StateLayout& layout, int64_t max_positions);
// The same layout with its rows in the released encodings: the global KV per token and the rings.
void print_released_state(const kv::StateLayout& layout, const kv::StoredFormats& formats);

}  // namespace deepinfer::cli
