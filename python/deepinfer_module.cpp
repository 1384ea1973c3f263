// Python bindings (pybind11), the extension deepinfer._deepinfer: prompt encoding and output
// parsing here, the generation API in llm_bindings.cpp. Requests and messages cross
// the boundary as JSON text (json.dumps / json.loads), which keeps Python's dict order — the order
// DeepSeek's reference encoders render tool schemas and arguments in.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "encoding/chat_encoding.h"
#include "encoding/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;
using namespace deepinfer;
using encoding::Json;

namespace {

Json to_json(const py::handle& object) {
  std::string text = py::module_::import("json").attr("dumps")(object, py::arg("ensure_ascii") = false).cast<std::string>();
  return Json::parse(text);
}

py::object from_json(const Json& json) {
  return py::module_::import("json").attr("loads")(json.dump(-1, ' ', false, Json::error_handler_t::replace));
}

encoding::ChatEncoder make_encoder(const std::string& format, const std::optional<std::string>& tokenizer_config) {
  std::optional<encoding::JinjaTemplateSource> jinja;
  if (tokenizer_config) jinja = encoding::jinja_source_from_tokenizer_config(*tokenizer_config);
  return encoding::ChatEncoder(encoding::parse_chat_format(format), std::move(jinja));
}

std::string render_prompt(const py::dict& request, const std::string& format,
                          const std::optional<std::string>& tokenizer_config) {
  return make_encoder(format, tokenizer_config).render(encoding::chat_request_from_json(to_json(request))).text;
}

encoding::OutputParserOptions parser_options(const std::string& format, bool thinking,
                                             const std::vector<std::string>& stop) {
  encoding::OutputParserOptions options;
  options.format = encoding::parse_chat_format(format);
  options.thinking = thinking;
  options.stop = stop;
  return options;
}

std::string as_bytes(const py::handle& text) {
  if (py::isinstance<py::bytes>(text)) return text.cast<std::string>();
  return text.cast<std::string>();
}

}  // namespace

void bind_llm(py::module_& m);  // llm_bindings.cpp

PYBIND11_MODULE(_deepinfer, m) {
  m.doc() = "deepinfer's C++ core: generation (wrapped by deepinfer.api), DeepSeek prompt encoding (V3 .. V4.1) "
            "and streaming output parsing";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  bind_llm(m);

  m.def("render_prompt", &render_prompt, py::arg("request"), py::arg("format") = "v4.1",
        py::arg("tokenizer_config") = py::none(),
        "Render an OpenAI chat-completions request body (messages, tools, response_format, reasoning_effort,\n"
        "add_generation_prompt, thinking) into the exact prompt text. Format v3 needs the model's\n"
        "tokenizer_config.json (its Jinja chat_template).");

  py::class_<Tokenizer>(m, "Tokenizer")
      .def(py::init([](const std::string& path) { return Tokenizer::from_file(path); }), py::arg("tokenizer_json"))
      .def("encode", [](const Tokenizer& t, const std::string& text) { return t.encode(text); }, py::arg("text"))
      .def("decode", [](const Tokenizer& t, const std::vector<int32_t>& ids) { return t.decode(ids); }, py::arg("ids"))
      .def("token_bytes", [](const Tokenizer& t, int32_t id) { return py::bytes(t.token_bytes(id)); }, py::arg("id"));

  m.def(
      "render_prompt_ids",
      [](const py::dict& request, const std::string& format, const Tokenizer& tokenizer,
         const std::optional<std::string>& tokenizer_config) {
        return tokenizer.encode(render_prompt(request, format, tokenizer_config));
      },
      py::arg("request"), py::arg("format"), py::arg("tokenizer"), py::arg("tokenizer_config") = py::none(),
      "render_prompt() followed by tokenization.");

  py::class_<encoding::StreamingOutputParser>(m, "OutputParser")
      .def(py::init([](const std::string& format, bool thinking, const std::vector<std::string>& stop) {
             return encoding::StreamingOutputParser(parser_options(format, thinking, stop));
           }),
           py::arg("format") = "v4.1", py::arg("thinking") = false, py::arg("stop") = std::vector<std::string>{})
      .def("push", [](encoding::StreamingOutputParser& p, const py::object& text) { return from_json(p.push(as_bytes(text)).to_json()); },
           py::arg("text"), "Feed text (str or bytes); returns the OpenAI-style delta it completed.")
      .def("finish", [](encoding::StreamingOutputParser& p) { return from_json(p.finish().to_json()); })
      .def_property_readonly("done", &encoding::StreamingOutputParser::done)
      .def_property_readonly("message", [](const encoding::StreamingOutputParser& p) { return from_json(p.message().to_json()); });

  m.def(
      "parse_output",
      [](const py::object& text, const std::string& format, bool thinking, const std::vector<std::string>& stop) {
        return from_json(encoding::parse_output(as_bytes(text), parser_options(format, thinking, stop)).to_json());
      },
      py::arg("text"), py::arg("format") = "v4.1", py::arg("thinking") = false,
      py::arg("stop") = std::vector<std::string>{}, "Parse a complete model output into an assistant message dict.");
}
