#pragma once
// Typed reads from one object of a config.json, shared by the V4 and V4.1 parsers. A missing key or
// a JSON null means "use the default" (or, for the required_* reads, an error naming the key); any
// other type mismatch is an error naming the key with its full path ("text_config.head_dim").
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/text_file.h"

namespace deepinfer::io {

// The text of DIR/config.json, or nullopt when there is none (a file over kConfigFileLimit, or
// something that is not a file, is an error).
inline std::optional<std::string> read_config_text(const std::filesystem::path& model_dir) {
  return read_text_file_if_exists(model_dir / "config.json", kConfigFileLimit, "model config");
}

// The same, as an error naming the file when there is none.
inline std::string require_config_text(const std::filesystem::path& model_dir) {
  auto text = read_config_text(model_dir);
  if (!text) fail("cannot read {} (expected a model folder with config.json)", (model_dir / "config.json").string());
  return std::move(*text);
}

class ConfigReader {
 public:
  using json = nlohmann::json;

  ConfigReader(const json& obj, std::string source, std::string prefix = "")
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& at(const char* key) const { return obj_[key]; }
  std::string where(const char* key) const { return prefix_ + key; }
  const std::string& source() const { return source_; }

  int64_t integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    return as_integer(obj_[key], where(key));
  }
  std::optional<int64_t> optional_integer(const char* key) const {
    if (!has(key)) return std::nullopt;
    return as_integer(obj_[key], where(key));
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_number()) fail("{}: '{}' must be a number, found {}", source_, where(key), json_excerpt(v));
    return v.get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_boolean()) fail("{}: '{}' must be true or false, found {}", source_, where(key), json_excerpt(v));
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_string()) fail("{}: '{}' must be a string, found {}", source_, where(key), json_excerpt(v));
    return v.get<std::string>();
  }

  // Keys a model cannot default without silently becoming another model.
  void require(const char* key) const {
    if (!has(key)) fail("{}: missing required key '{}'", source_, where(key));
  }
  int64_t required_integer(const char* key) const {
    require(key);
    return as_integer(obj_[key], where(key));
  }
  double required_number(const char* key) const {
    require(key);
    return number(key, 0.0);
  }
  // A list of integers; absent means empty unless `required`.
  std::vector<int64_t> integer_list(const char* key, bool required = false) const {
    if (required) require(key);
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = obj_[key];
    if (!v.is_array()) fail("{}: '{}' must be a list of integers, found {}", source_, where(key), json_excerpt(v));
    for (size_t i = 0; i < v.size(); ++i) out.push_back(as_integer(v[i], where(key) + "[" + std::to_string(i) + "]"));
    return out;
  }

  int64_t as_integer(const json& v, const std::string& name) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    // Some exporters write integral values as floats (4096.0).
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    fail("{}: '{}' must be an integer, found {}", source_, name, json_excerpt(v));
  }

 private:
  const json& obj_;
  std::string source_;
  std::string prefix_;
};

}  // namespace deepinfer::io
