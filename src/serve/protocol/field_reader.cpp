#include "serve/protocol/field_reader.h"

#include <fmt/format.h>

#include <cmath>

#include "core/json_excerpt.h"
#include "serve/protocol/api_error.h"

namespace deepinfer::serve {

using encoding::Json;

std::string json_type_phrase(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

FieldReader::FieldReader(const Json& body, std::string prefix) : body_(body), prefix_(std::move(prefix)) {}

const Json* FieldReader::get(const std::string& name) {
  known_.insert(name);
  const auto it = body_.find(name);
  return it == body_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> FieldReader::number(const std::string& name, double lo, double hi) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw bad_request(fmt::format("'{}' must be a number, got {}", param(name), json_type_phrase(*v)), param(name));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_request(fmt::format("'{}' must be in [{}, {}], got {}", param(name), lo, hi, x), param(name));
  return x;
}

std::optional<int64_t> FieldReader::integer(const std::string& name, int64_t lo, int64_t hi) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  // 2.0 is accepted as 2 (JavaScript clients cannot tell them apart); 2.5 is not.
  const bool integral_float = v->is_number_float() && std::isfinite(v->get<double>()) &&
                              std::floor(v->get<double>()) == v->get<double>() && std::fabs(v->get<double>()) < 9e15;
  if (!v->is_number_integer() && !integral_float)
    throw bad_request(fmt::format("'{}' must be an integer, got {}", param(name), json_excerpt(*v)), param(name));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw bad_request(fmt::format("'{}' must be in [{}, {}], got {}", param(name), lo, hi, v->get<uint64_t>()),
                      param(name));
  const int64_t x = integral_float ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_request(fmt::format("'{}' must be in [{}, {}], got {}", param(name), lo, hi, x), param(name));
  return x;
}

std::optional<bool> FieldReader::boolean(const std::string& name) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw bad_request(fmt::format("'{}' must be true or false, got {}", param(name), json_type_phrase(*v)), param(name));
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(const std::string& name) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    throw bad_request(fmt::format("'{}' must be a string, got {}", param(name), json_type_phrase(*v)), param(name));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::strings(const std::string& name) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array())
    throw bad_request(fmt::format("'{}' must be a string or an array of strings, got {}", param(name),
                                  json_type_phrase(*v)),
                      param(name));
  std::vector<std::string> out;
  for (const Json& s : *v) {
    if (!s.is_string())
      throw bad_request(fmt::format("'{}' must hold strings only, got {}", param(name), json_type_phrase(s)),
                        param(name));
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> FieldReader::token_ids(const std::string& name, int64_t vocab_size) {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_array())
    throw bad_request(fmt::format("'{}' must be an array of token ids, got {}", param(name), json_type_phrase(*v)),
                      param(name));
  std::vector<int32_t> out;
  for (const Json& id : *v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
      throw bad_request(fmt::format("'{}': {} is not a token id in [0, {})", param(name), json_excerpt(id), vocab_size),
                        param(name));
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

void FieldReader::ignore(std::initializer_list<const char*> names) {
  for (const char* n : names) known_.insert(n);
}

void FieldReader::finish() const {
  for (const auto& [key, value] : body_.items())
    if (!known_.count(key))
      throw bad_request(fmt::format("Unrecognized request argument supplied: {}", param(key)), param(key),
                        "unknown_parameter");
}

}  // namespace deepinfer::serve
