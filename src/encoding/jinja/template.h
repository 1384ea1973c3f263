#pragma once
// A Jinja2 subset for Hugging Face chat templates. Our own implementation: Debian ships no C++
// Jinja library. Supported: {{ }}, {% if/elif/else %}, {% for %} (loop.*, else, inline if,
// tuple targets), {% set %} (names, namespace attributes, set blocks), break/continue,
// {# #}, whitespace control ({%- -%}, trim_blocks, lstrip_blocks), literals, arithmetic, ~,
// comparisons, and/or/not, in, is-tests, conditional expressions, filters (tojson, length,
// trim, join, default, ...), string/dict methods and namespace()/range()/raise_exception().
#include <memory>
#include <string>
#include <string_view>

#include "encoding/jinja/value.h"

namespace deepinfer::jinja {

struct TemplateOptions {
  // Hugging Face renders chat templates with trim_blocks and lstrip_blocks on.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

struct Node;

class Template {
 public:
  // Throws Error with the line of the problem on a syntax error.
  static Template parse(std::string_view source, TemplateOptions options = {});
  // Throws Error on runtime errors (undefined arithmetic, raise_exception, limits exceeded).
  std::string render(const ValueDict& context) const;

  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
  ~Template();

 private:
  Template();
  std::vector<std::unique_ptr<Node>> body_;
};

}  // namespace deepinfer::jinja
