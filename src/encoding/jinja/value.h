#pragma once
// Values of our Jinja2 subset interpreter (written here because Debian packages no C++ Jinja
// library). They follow Python semantics closely enough that Hugging Face chat templates render
// byte for byte as with Jinja2: truthiness, str()/repr(), ==, ordering, insertion-ordered dicts,
// and namespace() objects that loops can mutate.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "encoding/python_json.h"

namespace deepinfer::jinja {

class Value;
using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;  // insertion ordered, like Python dicts

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);  // a list that prints as (a, b)
  static Value dict(ValueDict items);
  static Value make_namespace(ValueDict attrs);
  static Value from_json(const encoding::Json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const;     // bool/int/float (truncated)
  double as_double() const;   // bool/int/float
  const std::string& as_string() const { return string_; }
  const ValueList& items() const { return *list_; }
  const ValueDict& entries() const { return *dict_; }
  ValueDict& namespace_entries() const { return *dict_; }  // shared: mutations are visible to all copies

  // Dict or namespace lookup; nullptr when absent.
  const Value* find(const std::string& key) const;

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()
  encoding::Json to_json() const;  // throws for undefined and namespaces
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;  // dict entries, or namespace attributes
};

bool values_equal(const Value& a, const Value& b);
// Python ordering (<) for numbers and strings; throws for other pairs.
bool value_less(const Value& a, const Value& b);

// UTF-8 helpers for Python-style string indexing by code point.
std::vector<std::string> split_code_points(const std::string& text);

}  // namespace deepinfer::jinja
