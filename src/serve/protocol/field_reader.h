#pragma once
// Typed, range-checked reads of a request body's fields. Every read marks the field known;
// finish() then rejects whatever the client sent that no read asked for, as OpenAI does
// ("Unrecognized request argument supplied: X"), so a misspelt parameter is an error, not a
// silently ignored default. null means "not given" for every field.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "encoding/python_json.h"

namespace deepinfer::serve {

class FieldReader {
 public:
  // `body` must be an object and outlive the reader. `prefix` names nested objects in errors
  // ("stream_options.").
  explicit FieldReader(const encoding::Json& body, std::string prefix = {});

  const encoding::Json* get(const std::string& name);  // null when absent or null
  std::optional<double> number(const std::string& name, double lo, double hi);
  std::optional<int64_t> integer(const std::string& name, int64_t lo, int64_t hi);
  std::optional<bool> boolean(const std::string& name);
  std::optional<std::string> string(const std::string& name);
  // A string or an array of strings (OpenAI's `stop`).
  std::optional<std::vector<std::string>> strings(const std::string& name);
  std::optional<std::vector<int32_t>> token_ids(const std::string& name, int64_t vocab_size);
  // Accepted and deliberately unused (OpenAI fields with no meaning here: user, metadata, ...).
  void ignore(std::initializer_list<const char*> names);
  void finish() const;

  std::string param(const std::string& name) const { return prefix_ + name; }

 private:
  const encoding::Json& body_;
  std::string prefix_;
  std::set<std::string> known_;
};

// Describes a JSON value's type for error messages ("a string", "an array", ...).
std::string json_type_phrase(const encoding::Json& value);

}  // namespace deepinfer::serve
