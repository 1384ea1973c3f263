#pragma once
// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it: ", " and ": "
// separators, keys in insertion order, floats in Python's repr form. The reference encoders embed
// tool schemas, arguments and response formats this way, so a prompt only matches byte for byte
// when we serialize the same way.
#include <nlohmann/json.hpp>

#include <string>

namespace deepinfer::encoding {

using Json = nlohmann::ordered_json;  // insertion order matters: Python dicts keep it

std::string python_json_dumps(const Json& value);
// Python's repr() of a float (shortest round-trip digits, exponent form outside [1e-4, 1e16)).
std::string python_float_repr(double value);
// Appends `text` as a JSON string literal (quotes included), escaping like Python's json module.
void append_python_json_string(std::string& out, const std::string& text);

}  // namespace deepinfer::encoding
