// Evaluates a parsed template against a context, with Python/Jinja2 semantics where chat
// templates depend on them (undefined values, truthiness, str(), string methods, loop scoping).
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "encoding/jinja/ast.h"
#include "encoding/jinja/template.h"

namespace deepinfer::jinja {

namespace {

constexpr size_t kMaxOutputBytes = 64u << 20;   // a runaway template stops instead of eating memory
constexpr size_t kMaxIterations = 1u << 20;     // total loop iterations per render
constexpr int64_t kMaxRange = 1 << 20;

enum class Flow { kNormal, kBreak, kContinue };

[[noreturn]] void runtime_error(int line, const std::string& message) {
  fail("template error (line {}): {}", line, message);
}

bool is_blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto strip_this = [&](char c) {
    if (!chars || chars->is_none()) return is_blank(static_cast<unsigned char>(c));
    return chars->as_string().find(c) != std::string::npos;
  };
  size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strip_this(s[begin])) ++begin;
  if (right)
    while (end > begin && strip_this(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

Value python_split(const std::string& s, const Value* sep, int64_t max_split) {
  ValueList parts;
  if (!sep || sep->is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_blank(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        size_t end = s.size();
        while (end > i && is_blank(static_cast<unsigned char>(s[end - 1]))) --end;
        parts.push_back(Value::string(s.substr(i, end - i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_blank(static_cast<unsigned char>(s[j]))) ++j;
      parts.push_back(Value::string(s.substr(i, j - i)));
      i = j;
    }
    return Value::list(std::move(parts));
  }
  DEEPINFER_CHECK(sep->is_string() && !sep->as_string().empty(), "template error: empty separator");
  const std::string& d = sep->as_string();
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    size_t found = s.find(d, start);
    if (found == std::string::npos) break;
    parts.push_back(Value::string(s.substr(start, found - start)));
    start = found + d.size();
  }
  parts.push_back(Value::string(s.substr(start)));
  return Value::list(std::move(parts));
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  size_t pos = 0;
  int64_t done = 0;
  while ((count < 0 || done < count) && (pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
    ++done;
  }
  return s;
}

// Python's index normalisation for lists/strings.
int64_t normalize_index(int64_t index, size_t size) { return index < 0 ? index + static_cast<int64_t>(size) : index; }

class Renderer {
 public:
  explicit Renderer(const ValueDict& context) { frames_.emplace_back(context.begin(), context.end()); }

  std::string output;

  Flow render(const NodeList& nodes) {
    for (const auto& node : nodes) {
      Flow flow = render_node(*node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  using Frame = std::unordered_map<std::string, Value>;
  std::vector<Frame> frames_;
  size_t iterations_ = 0;

  void emit(const std::string& text) {
    output += text;
    DEEPINFER_CHECK(output.size() <= kMaxOutputBytes, "template error: output exceeds {} bytes", kMaxOutputBytes);
  }

  const Value* lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  Flow render_node(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kText: emit(node.text); return Flow::kNormal;
      case Node::Kind::kOutput: emit(eval(*node.expr).str()); return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [condition, body] : node.branches)
          if (!condition || eval(*condition).truthy()) return render(body);
        return Flow::kNormal;
      case Node::Kind::kFor: return render_for(node);
      case Node::Kind::kSet: assign(node, eval(*node.expr)); return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string saved = std::move(output);
        output.clear();
        render(node.body);
        std::string captured = std::move(output);
        output = std::move(saved);
        assign(node, Value::string(captured));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void assign(const Node& node, const Value& value) {
    if (!node.attribute.empty()) {
      const Value* target = lookup(node.targets[0]);
      if (!target || !target->is_namespace())
        runtime_error(node.line, "cannot assign attribute on non-namespace '" + node.targets[0] + "'");
      auto& entries = target->namespace_entries();
      for (auto& [key, existing] : entries)
        if (key == node.attribute) {
          existing = value;
          return;
        }
      entries.emplace_back(node.attribute, value);
      return;
    }
    if (node.targets.size() == 1) {
      frames_.back()[node.targets[0]] = value;
      return;
    }
    ValueList items = iterate(value, node.line);
    if (items.size() != node.targets.size()) runtime_error(node.line, "wrong number of values to unpack");
    for (size_t i = 0; i < items.size(); ++i) frames_.back()[node.targets[i]] = items[i];
  }

  ValueList iterate(const Value& value, int line) {
    switch (value.kind()) {
      case Value::Kind::kUndefined: return {};
      case Value::Kind::kList: return value.items();
      case Value::Kind::kDict: {
        ValueList keys;
        for (const auto& [k, v] : value.entries()) keys.push_back(Value::string(k));
        return keys;
      }
      case Value::Kind::kString: {
        ValueList chars;
        for (auto& c : split_code_points(value.as_string())) chars.push_back(Value::string(c));
        return chars;
      }
      default: runtime_error(line, std::string("'") + value.type_name() + "' object is not iterable");
    }
  }

  Flow render_for(const Node& node) {
    ValueList all = iterate(eval(*node.expr), node.line);
    ValueList items;
    frames_.emplace_back();
    for (auto& item : all) {
      if (node.loop_filter) {
        bind_targets(node, item);
        if (!eval(*node.loop_filter).truthy()) continue;
      }
      items.push_back(item);
    }
    frames_.pop_back();
    if (items.empty()) return render(node.else_body);
    const Value* outer_loop = lookup("loop");
    Value parent = outer_loop ? *outer_loop : Value();
    size_t n = items.size();
    for (size_t i = 0; i < n; ++i) {
      DEEPINFER_CHECK(++iterations_ <= kMaxIterations, "template error: more than {} loop iterations", kMaxIterations);
      frames_.emplace_back();
      bind_targets(node, items[i]);
      auto idx = static_cast<int64_t>(i);
      auto len = static_cast<int64_t>(n);
      ValueDict loop = {{"index", Value::integer(idx + 1)},
                        {"index0", Value::integer(idx)},
                        {"revindex", Value::integer(len - idx)},
                        {"revindex0", Value::integer(len - idx - 1)},
                        {"first", Value::boolean(i == 0)},
                        {"last", Value::boolean(i + 1 == n)},
                        {"length", Value::integer(len)},
                        {"previtem", i > 0 ? items[i - 1] : Value()},
                        {"nextitem", i + 1 < n ? items[i + 1] : Value()},
                        {"depth", Value::integer(1)},
                        {"depth0", Value::integer(0)}};
      if (!parent.is_undefined()) loop.emplace_back("parent", parent);
      frames_.back()["loop"] = Value::dict(std::move(loop));
      Flow flow = render(node.body);
      frames_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void bind_targets(const Node& node, const Value& item) {
    if (node.targets.size() == 1) {
      frames_.back()[node.targets[0]] = item;
      return;
    }
    ValueList parts = iterate(item, node.line);
    if (parts.size() != node.targets.size()) runtime_error(node.line, "wrong number of values to unpack in for");
    for (size_t i = 0; i < parts.size(); ++i) frames_.back()[node.targets[i]] = parts[i];
  }

  // ------------------------------------------------------------------------------------------
  // Expressions
  // ------------------------------------------------------------------------------------------

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* found = lookup(e.name);
        return found ? *found : Value();
      }
      case Expr::Kind::kAttribute: return get_attribute(eval(*e.children[0]), e.name, e.line);
      case Expr::Kind::kItem: return get_item(eval(*e.children[0]), eval(*e.children[1]), e.line);
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return limited(call(e), e.line);
      case Expr::Kind::kFilter: return limited(filter(e), e.line);
      case Expr::Kind::kTest: return Value::boolean(test(e) != e.negated);
      case Expr::Kind::kUnary: {
        Value operand = eval(*e.children[0]);
        if (e.name == "not") return Value::boolean(!operand.truthy());
        if (!operand.is_number()) runtime_error(e.line, std::string("bad operand for unary ") + e.name + ": " + operand.type_name());
        if (e.name == "+") return operand;
        return operand.kind() == Value::Kind::kFloat ? Value::floating(-operand.as_double()) : Value::integer(-operand.as_int());
      }
      case Expr::Kind::kBinary: return limited(binary(e), e.line);
      case Expr::Kind::kCondition:
        if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value();
      case Expr::Kind::kList: {
        ValueList items;
        for (const auto& child : e.children) items.push_back(eval(*child));
        return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict entries;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value key = eval(*e.children[i]);
          if (!key.is_string()) runtime_error(e.line, "only string dict keys are supported");
          bool replaced = false;
          for (auto& [k, v] : entries)
            if (k == key.as_string()) {
              v = eval(*e.children[i + 1]);
              replaced = true;
            }
          if (!replaced) entries.emplace_back(key.as_string(), eval(*e.children[i + 1]));
        }
        return Value::dict(std::move(entries));
      }
    }
    return Value();
  }

  // Strings and lists built by expressions obey the output limit too (e.g. repeated doubling).
  static Value limited(Value value, int line) {
    if ((value.is_string() && value.as_string().size() > kMaxOutputBytes) ||
        (value.is_list() && value.items().size() > kMaxIterations))
      runtime_error(line, "value too large");
    return value;
  }

  Value get_attribute(const Value& object, const std::string& name, int line) {
    if (object.is_undefined()) runtime_error(line, "'" + name + "' of an undefined value");
    if (const Value* found = object.find(name)) return *found;
    return Value();
  }

  Value get_item(const Value& object, const Value& key, int line) {
    switch (object.kind()) {
      case Value::Kind::kUndefined: runtime_error(line, "subscript of an undefined value");
      case Value::Kind::kDict:
      case Value::Kind::kNamespace: {
        if (!key.is_string()) return Value();
        const Value* found = object.find(key.as_string());
        return found ? *found : Value();
      }
      case Value::Kind::kList: {
        if (!key.is_number()) runtime_error(line, "list indices must be integers");
        int64_t i = normalize_index(key.as_int(), object.items().size());
        if (i < 0 || i >= static_cast<int64_t>(object.items().size())) return Value();
        return object.items()[i];
      }
      case Value::Kind::kString: {
        if (!key.is_number()) runtime_error(line, "string indices must be integers");
        auto chars = split_code_points(object.as_string());
        int64_t i = normalize_index(key.as_int(), chars.size());
        if (i < 0 || i >= static_cast<int64_t>(chars.size())) return Value();
        return Value::string(chars[i]);
      }
      default: return Value();
    }
  }

  Value slice(const Expr& e) {
    Value target = eval(*e.children[0]);
    auto bound = [&](size_t i) -> std::optional<int64_t> {
      if (!e.children[i]) return std::nullopt;
      Value v = eval(*e.children[i]);
      if (v.is_none()) return std::nullopt;
      if (!v.is_number()) runtime_error(e.line, "slice indices must be integers");
      return v.as_int();
    };
    auto start = bound(1), stop = bound(2), step_opt = bound(3);
    int64_t step = step_opt.value_or(1);
    if (step == 0) runtime_error(e.line, "slice step cannot be zero");
    ValueList source;
    bool is_string = target.is_string();
    if (is_string) {
      for (auto& c : split_code_points(target.as_string())) source.push_back(Value::string(c));
    } else if (target.is_list()) {
      source = target.items();
    } else {
      runtime_error(e.line, std::string("cannot slice ") + target.type_name());
    }
    auto n = static_cast<int64_t>(source.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t fallback, bool upper) {
      if (!v) return fallback;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1) + (upper ? 0 : 0);
    };
    int64_t lo = clamp(start, step > 0 ? 0 : n - 1, false);
    int64_t hi = clamp(stop, step > 0 ? n : -1, true);
    ValueList out;
    if (step > 0)
      for (int64_t i = lo; i < hi; i += step) out.push_back(source[i]);
    else
      for (int64_t i = lo; i > hi; i += step) out.push_back(source[i]);
    if (!is_string) return Value::list(std::move(out));
    std::string text;
    for (auto& v : out) text += v.as_string();
    return Value::string(text);
  }

  std::vector<Value> eval_args(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
    return args;
  }

  const Value* kwarg(const std::map<std::string, Value>& kwargs, const std::string& name) {
    auto it = kwargs.find(name);
    return it == kwargs.end() ? nullptr : &it->second;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.children[0];
    std::vector<Value> args = eval_args(e, 1);
    std::map<std::string, Value> kwargs;
    for (const auto& [name, expr] : e.kwargs) kwargs[name] = eval(*expr);
    auto arg = [&](size_t i, const char* name) -> const Value* {
      if (i < args.size()) return &args[i];
      return kwarg(kwargs, name);
    };
    if (callee.kind == Expr::Kind::kAttribute) {
      Value object = eval(*callee.children[0]);
      return call_method(object, callee.name, arg, args.size(), e.line);
    }
    if (callee.kind == Expr::Kind::kName) {
      const std::string& name = callee.name;
      if (name == "namespace" || name == "dict") {
        ValueDict entries;
        if (!args.empty() && args[0].is_dict()) entries = args[0].entries();
        for (const auto& [key, _] : e.kwargs) entries.emplace_back(key, kwargs[key]);
        return name == "namespace" ? Value::make_namespace(std::move(entries)) : Value::dict(std::move(entries));
      }
      if (name == "range") {
        int64_t start = 0, stop = 0, step = 1;
        if (args.size() == 1) stop = args[0].as_int();
        else if (args.size() >= 2) {
          start = args[0].as_int();
          stop = args[1].as_int();
          if (args.size() >= 3) step = args[2].as_int();
        }
        if (step == 0) runtime_error(e.line, "range() step must not be zero");
        ValueList items;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          if (static_cast<int64_t>(items.size()) >= kMaxRange) runtime_error(e.line, "range() too large");
          items.push_back(Value::integer(i));
        }
        return Value::list(std::move(items));
      }
      if (name == "raise_exception") {
        fail("template raised an exception: {}", args.empty() ? std::string() : args[0].str());
      }
      runtime_error(e.line, "unknown function '" + name + "'");
    }
    runtime_error(e.line, "this expression cannot be called");
  }

  template <typename ArgFn>
  Value call_method(const Value& object, const std::string& name, ArgFn arg, size_t positional, int line) {
    if (object.is_string()) {
      const std::string& s = object.as_string();
      if (name == "startswith" || name == "endswith") {
        const Value* what = arg(0, "prefix");
        if (!what) runtime_error(line, name + "() needs an argument");
        ValueList options = what->is_list() ? what->items() : ValueList{*what};
        for (const auto& option : options) {
          if (!option.is_string()) runtime_error(line, name + "() needs strings");
          const std::string& p = option.as_string();
          bool hit = name == "startswith" ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                                          : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
          if (hit) return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      if (name == "split") {
        const Value* max = arg(1, "maxsplit");
        return python_split(s, arg(0, "sep"), max ? max->as_int() : -1);
      }
      if (name == "strip") return Value::string(strip_chars(s, arg(0, "chars"), true, true));
      if (name == "lstrip") return Value::string(strip_chars(s, arg(0, "chars"), true, false));
      if (name == "rstrip") return Value::string(strip_chars(s, arg(0, "chars"), false, true));
      if (name == "upper" || name == "lower") {
        std::string out = s;
        for (auto& c : out) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                                  : std::tolower(static_cast<unsigned char>(c)));
        return Value::string(out);
      }
      if (name == "replace") {
        const Value* from = arg(0, "old");
        const Value* to = arg(1, "new");
        const Value* count = arg(2, "count");
        if (!from || !to || !from->is_string() || !to->is_string()) runtime_error(line, "replace() needs two strings");
        return Value::string(replace_all(s, from->as_string(), to->as_string(), count ? count->as_int() : -1));
      }
      if (name == "find") {
        const Value* what = arg(0, "sub");
        if (!what || !what->is_string()) runtime_error(line, "find() needs a string");
        size_t at = s.find(what->as_string());
        return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(split_code_points(s.substr(0, at)).size()));
      }
    } else if (object.is_dict()) {
      if (name == "items") {
        ValueList pairs;
        for (const auto& [k, v] : object.entries()) pairs.push_back(Value::tuple({Value::string(k), v}));
        return Value::list(std::move(pairs));
      }
      if (name == "keys" || name == "values") {
        ValueList out;
        for (const auto& [k, v] : object.entries()) out.push_back(name == "keys" ? Value::string(k) : v);
        return Value::list(std::move(out));
      }
      if (name == "get") {
        const Value* key = arg(0, "key");
        const Value* fallback = arg(1, "default");
        if (key && key->is_string())
          if (const Value* found = object.find(key->as_string())) return *found;
        return fallback ? *fallback : Value::none();
      }
    }
    (void)positional;
    runtime_error(line, std::string("unknown method '") + name + "' on " + object.type_name());
  }

  Value filter(const Expr& e) {
    Value input = eval(*e.children[0]);
    std::vector<Value> args = eval_args(e, 1);
    std::map<std::string, Value> kwargs;
    for (const auto& [name, expr] : e.kwargs) kwargs[name] = eval(*expr);
    const std::string& name = e.name;
    if (name == "tojson") {
      if (const Value* indent = kwarg(kwargs, "indent"); indent && !indent->is_none())
        runtime_error(e.line, "tojson(indent=...) is not supported");
      return Value::string(encoding::python_json_dumps(input.to_json()));
    }
    if (name == "length" || name == "count") {
      switch (input.kind()) {
        case Value::Kind::kString: return Value::integer(static_cast<int64_t>(split_code_points(input.as_string()).size()));
        case Value::Kind::kList: return Value::integer(static_cast<int64_t>(input.items().size()));
        case Value::Kind::kDict: return Value::integer(static_cast<int64_t>(input.entries().size()));
        case Value::Kind::kUndefined: return Value::integer(0);
        default: runtime_error(e.line, std::string("object of type ") + input.type_name() + " has no len()");
      }
    }
    if (name == "string") return Value::string(input.str());
    if (name == "trim") {
      if (!input.is_string()) runtime_error(e.line, "trim needs a string");
      return Value::string(strip_chars(input.as_string(), args.empty() ? nullptr : &args[0], true, true));
    }
    if (name == "upper" || name == "lower") {
      std::string out = input.str();
      for (auto& c : out) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                                : std::tolower(static_cast<unsigned char>(c)));
      return Value::string(out);
    }
    if (name == "default" || name == "d") {
      bool boolean = args.size() > 1 && args[1].truthy();
      if (input.is_undefined() || (boolean && !input.truthy())) return args.empty() ? Value::string("") : args[0];
      return input;
    }
    if (name == "join") {
      std::string separator = args.empty() ? "" : args[0].str();
      std::string out;
      ValueList items = iterate(input, e.line);
      for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i].str();
      return Value::string(out);
    }
    if (name == "first" || name == "last") {
      ValueList items = iterate(input, e.line);
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "list") return Value::list(iterate(input, e.line));
    if (name == "reverse") {
      if (input.is_string()) {
        auto chars = split_code_points(input.as_string());
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
        return Value::string(out);
      }
      ValueList items = iterate(input, e.line);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    }
    if (name == "items") {
      if (!input.is_dict()) runtime_error(e.line, "items needs a dict");
      ValueList pairs;
      for (const auto& [k, v] : input.entries()) pairs.push_back(Value::list({Value::string(k), v}));
      return Value::list(std::move(pairs));
    }
    if (name == "safe" || name == "e" || name == "escape") return name == "safe" ? input : Value::string(input.str());
    if (name == "int") {
      if (input.is_number()) return Value::integer(input.as_int());
      try {
        return Value::integer(input.is_string() ? std::stoll(input.as_string()) : 0);
      } catch (const std::exception&) {
        return Value::integer(0);
      }
    }
    if (name == "float") return Value::floating(input.is_number() ? input.as_double() : 0.0);
    if (name == "abs") {
      if (!input.is_number()) runtime_error(e.line, "abs needs a number");
      return input.kind() == Value::Kind::kFloat ? Value::floating(std::fabs(input.as_double()))
                                                 : Value::integer(std::llabs(input.as_int()));
    }
    if (name == "capitalize") {
      std::string out = input.str();
      for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value::string(out);
    }
    if (name == "replace") {
      if (args.size() < 2) runtime_error(e.line, "replace needs two arguments");
      return Value::string(replace_all(input.str(), args[0].str(), args[1].str(), args.size() > 2 ? args[2].as_int() : -1));
    }
    runtime_error(e.line, "unknown filter '" + name + "'");
  }

  bool test(const Expr& e) {
    const std::string& name = e.name;
    Value input = eval(*e.children[0]);
    std::vector<Value> args = eval_args(e, 1);
    if (name == "defined") return !input.is_undefined();
    if (name == "undefined") return input.is_undefined();
    if (name == "none") return input.is_none();
    if (name == "string") return input.is_string();
    if (name == "number") return input.kind() == Value::Kind::kInt || input.kind() == Value::Kind::kFloat;
    if (name == "integer") return input.kind() == Value::Kind::kInt;
    if (name == "float") return input.kind() == Value::Kind::kFloat;
    if (name == "boolean") return input.kind() == Value::Kind::kBool;
    if (name == "true") return input.kind() == Value::Kind::kBool && input.as_bool();
    if (name == "false") return input.kind() == Value::Kind::kBool && !input.as_bool();
    if (name == "mapping") return input.is_dict();
    if (name == "sequence" || name == "iterable") return input.is_list() || input.is_string() || input.is_dict();
    if (name == "odd" || name == "even") {
      if (!input.is_number()) runtime_error(e.line, "odd/even need a number");
      return (input.as_int() % 2 != 0) == (name == "odd");
    }
    if (name == "divisibleby") {
      if (args.empty() || args[0].as_int() == 0) runtime_error(e.line, "divisibleby needs a non-zero number");
      return input.as_int() % args[0].as_int() == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return !args.empty() && values_equal(input, args[0]);
    if (name == "ne" || name == "!=") return args.empty() || !values_equal(input, args[0]);
    if (name == "in") return !args.empty() && contains(args[0], input, e.line);
    if (name == "sameas") return !args.empty() && values_equal(input, args[0]) && input.kind() == args[0].kind();
    runtime_error(e.line, "unknown test '" + name + "'");
  }

  bool contains(const Value& container, const Value& item, int line) {
    switch (container.kind()) {
      case Value::Kind::kString:
        if (!item.is_string()) runtime_error(line, "'in <string>' requires a string on the left");
        return container.as_string().find(item.as_string()) != std::string::npos;
      case Value::Kind::kList:
        for (const auto& v : container.items())
          if (values_equal(v, item)) return true;
        return false;
      case Value::Kind::kDict: return item.is_string() && container.find(item.as_string()) != nullptr;
      default: runtime_error(line, std::string("argument of type ") + container.type_name() + " is not iterable");
    }
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? eval(*e.children[1]) : left;
    }
    if (op == "or") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? left : eval(*e.children[1]);
    }
    Value a = eval(*e.children[0]);
    Value b = eval(*e.children[1]);
    if (op == "~") return Value::string(a.str() + b.str());
    if (op == "==") return Value::boolean(values_equal(a, b));
    if (op == "!=") return Value::boolean(!values_equal(a, b));
    if (op == "in") return Value::boolean(contains(b, a, e.line));
    if (op == "not in") return Value::boolean(!contains(b, a, e.line));
    if (op == "<") return Value::boolean(value_less(a, b));
    if (op == ">") return Value::boolean(value_less(b, a));
    if (op == "<=") return Value::boolean(!value_less(b, a));
    if (op == ">=") return Value::boolean(!value_less(a, b));
    if (a.is_undefined() || b.is_undefined()) runtime_error(e.line, "operator '" + op + "' on an undefined value");
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
      if (a.is_list() && b.is_list()) {
        ValueList items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(items));
      }
    }
    if (op == "*" && ((a.is_string() && b.kind() == Value::Kind::kInt) || (b.is_string() && a.kind() == Value::Kind::kInt))) {
      const Value& text = a.is_string() ? a : b;
      int64_t times = a.is_string() ? b.as_int() : a.as_int();
      if (times > 0 && text.as_string().size() * static_cast<size_t>(times) > kMaxOutputBytes)
        runtime_error(e.line, "string repetition too large");
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += text.as_string();
      return Value::string(out);
    }
    if (!a.is_number() || !b.is_number())
      runtime_error(e.line, std::string("unsupported operand types for ") + op + ": " + a.type_name() + " and " + b.type_name());
    bool floating = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
    if (op == "/") {
      if (b.as_double() == 0) runtime_error(e.line, "division by zero");
      return Value::floating(a.as_double() / b.as_double());
    }
    if (floating) {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value::floating(x + y);
      if (op == "-") return Value::floating(x - y);
      if (op == "*") return Value::floating(x * y);
      if (op == "**") return Value::floating(std::pow(x, y));
      if (y == 0) runtime_error(e.line, "division by zero");
      if (op == "//") return Value::floating(std::floor(x / y));
      if (op == "%") return Value::floating(x - std::floor(x / y) * y);
    } else {
      int64_t x = a.as_int(), y = b.as_int();
      // Unsigned arithmetic wraps instead of invoking undefined behaviour on overflow.
      auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
      if (op == "+") return Value::integer(wrap(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)));
      if (op == "-") return Value::integer(wrap(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)));
      if (op == "*") return Value::integer(wrap(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)));
      if (op == "**") {
        if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
        uint64_t result = 1;
        for (int64_t i = 0; i < std::min<int64_t>(y, 64); ++i) result *= static_cast<uint64_t>(x);
        return Value::integer(wrap(result));
      }
      if (y == 0) runtime_error(e.line, "division by zero");
      if (x == INT64_MIN && y == -1) runtime_error(e.line, "integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
      if (op == "//") return Value::integer(q);
      if (op == "%") return Value::integer(x - q * y);
    }
    runtime_error(e.line, "unsupported operator " + op);
  }
};

}  // namespace

std::string Template::render(const ValueDict& context) const {
  Renderer renderer(context);
  renderer.render(body_);
  return std::move(renderer.output);
}

}  // namespace deepinfer::jinja
