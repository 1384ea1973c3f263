#include "encoding/jinja/value.h"

#include <cstdio>

#include "core/error.h"

namespace deepinfer::jinja {

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}
Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(ValueDict items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>(std::move(items));
  return v;
}
Value Value::make_namespace(ValueDict attrs) {
  Value v = dict(std::move(attrs));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::from_json(const encoding::Json& json) {
  using T = encoding::Json::value_t;
  switch (json.type()) {
    case T::null: return none();
    case T::boolean: return boolean(json.get<bool>());
    case T::number_integer: return integer(json.get<int64_t>());
    case T::number_unsigned: return integer(static_cast<int64_t>(json.get<uint64_t>()));
    case T::number_float: return floating(json.get<double>());
    case T::string: return string(json.get<std::string>());
    case T::array: {
      ValueList items;
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case T::object: {
      ValueDict entries;
      for (const auto& [key, item] : json.items()) entries.emplace_back(key, from_json(item));
      return dict(std::move(entries));
    }
    default: return none();
  }
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return bool_ ? 1 : 0;
  if (kind_ == Kind::kFloat) {
    // Python's int() of a float past 64 bits is a big integer, of inf / nan an error; an error
    // here (a cast out of range is undefined behaviour; found by fuzz_jinja).
    if (!(float_ >= -0x1p63 && float_ < 0x1p63)) fail("template error: {} does not fit a 64-bit integer", float_);
    return static_cast<int64_t>(float_);
  }
  return int_;
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return float_;
  return static_cast<double>(as_int());
}

const Value* Value::find(const std::string& key) const {
  if (kind_ != Kind::kDict && kind_ != Kind::kNamespace) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !string_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->empty();
    case Kind::kNamespace: return true;
  }
  return false;
}

static std::string python_string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) { out += '\\'; out += quote; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return string_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return bool_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return encoding::python_float_repr(float_);
    case Kind::kString: return python_string_repr(string_);
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i)
        out += (i ? ", " : "") + python_string_repr((*dict_)[i].first) + ": " + (*dict_)[i].second.repr();
      return out + "}";
    }
    case Kind::kNamespace: {
      std::string out = "<Namespace {";
      for (size_t i = 0; i < dict_->size(); ++i)
        out += (i ? ", " : "") + python_string_repr((*dict_)[i].first) + ": " + (*dict_)[i].second.repr();
      return out + "}>";
    }
  }
  return "";
}

encoding::Json Value::to_json() const {
  switch (kind_) {
    case Kind::kNone: return nullptr;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_;
    case Kind::kFloat: return float_;
    case Kind::kString: return string_;
    case Kind::kList: {
      encoding::Json out = encoding::Json::array();
      for (const auto& item : *list_) out.push_back(item.to_json());
      return out;
    }
    case Kind::kDict: {
      encoding::Json out = encoding::Json::object();
      for (const auto& [k, v] : *dict_) out[k] = v.to_json();
      return out;
    }
    default: fail("template error: cannot convert {} to JSON", type_name());
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "namespace";
  }
  return "?";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* other = b.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.namespace_entries() == &b.namespace_entries();
    default: return false;
  }
}

bool value_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
  fail("template error: cannot compare {} with {}", a.type_name(), b.type_name());
}

std::vector<std::string> split_code_points(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    len = std::min(len, text.size() - i);
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace deepinfer::jinja
