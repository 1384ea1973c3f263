// Python bindings of the generation API (deepinfer::LLM): the private `_LLM` and `_Stream`
// classes and `_sampling_params`, wrapped by python/deepinfer/api.py into vLLM's names. Results
// cross as plain dicts and lists; the GIL is released while the model runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "deepinfer/llm.h"
#include "engine/public_params.h"

namespace py = pybind11;
using namespace deepinfer;

namespace {

std::string type_name(const py::handle& v) { return py::str(py::type::of(v).attr("__name__")); }

[[noreturn]] void bad_type(const std::string& field, const char* expected, const py::handle& v) {
  throw py::value_error(field + ": expected " + expected + ", got " + type_name(v) + " " + std::string(py::repr(v)));
}

int64_t as_int(const std::string& field, const py::handle& v) {
  if (!py::isinstance<py::int_>(v)) bad_type(field, "an integer", v);
  return v.cast<int64_t>();
}

double as_float(const std::string& field, const py::handle& v) {
  if (!py::isinstance<py::int_>(v) && !py::isinstance<py::float_>(v)) bad_type(field, "a number", v);
  return v.cast<double>();
}

bool as_bool(const std::string& field, const py::handle& v) {
  if (!py::isinstance<py::bool_>(v)) bad_type(field, "True or False", v);
  return v.cast<bool>();
}

std::string as_str(const std::string& field, const py::handle& v) {
  if (!py::isinstance<py::str>(v)) bad_type(field, "a string", v);
  return v.cast<std::string>();
}

template <typename T, typename Convert>
std::vector<T> as_list(const std::string& field, const py::handle& v, Convert convert) {
  if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) bad_type(field, "a list", v);
  std::vector<T> out;
  size_t i = 0;
  for (const auto& item : v) out.push_back(convert(field + "[" + std::to_string(i++) + "]", item));
  return out;
}

StructuredOutputs structured_from_dict(const py::dict& d) {
  StructuredOutputs so;
  const std::string base = "SamplingParams.structured_outputs.";
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key);
    const std::string field = base + name;
    if (value.is_none()) continue;
    if (name == "json") {
      so.json = py::isinstance<py::str>(value)
                    ? value.cast<std::string>()
                    : py::module_::import("json").attr("dumps")(value, py::arg("ensure_ascii") = false).cast<std::string>();
    } else if (name == "regex") {
      so.regex = as_str(field, value);
    } else if (name == "choice") {
      so.choice = as_list<std::string>(field, value, as_str);
    } else if (name == "grammar") {
      so.grammar = as_str(field, value);
    } else if (name == "json_object") {
      so.json_object = as_bool(field, value);
    } else if (name == "disable_any_whitespace") {
      so.disable_any_whitespace = as_bool(field, value);
    } else {
      throw py::value_error("SamplingParams.structured_outputs: unknown field '" + name +
                            "' (json, regex, choice, grammar, json_object, disable_any_whitespace)");
    }
  }
  return so;
}

// vLLM's SamplingParams keyword arguments -> deepinfer::SamplingParams, checked like the C++ API.
SamplingParams sampling_from_dict(const py::dict& d) {
  SamplingParams p;
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key);
    const std::string field = "SamplingParams." + name;
    if (value.is_none()) continue;  // None = the default, as in vLLM
    if (name == "n") p.n = as_int(field, value);
    else if (name == "temperature") p.temperature = as_float(field, value);
    else if (name == "top_p") p.top_p = as_float(field, value);
    else if (name == "top_k") p.top_k = as_int(field, value);
    else if (name == "min_p") p.min_p = as_float(field, value);
    else if (name == "presence_penalty") p.presence_penalty = as_float(field, value);
    else if (name == "frequency_penalty") p.frequency_penalty = as_float(field, value);
    else if (name == "repetition_penalty") p.repetition_penalty = as_float(field, value);
    else if (name == "seed") p.seed = static_cast<uint64_t>(as_int(field, value));
    else if (name == "max_tokens") p.max_tokens = as_int(field, value);
    else if (name == "min_tokens") p.min_tokens = as_int(field, value);
    else if (name == "stop") p.stop = py::isinstance<py::str>(value) ? std::vector<std::string>{value.cast<std::string>()}
                                                                     : as_list<std::string>(field, value, as_str);
    else if (name == "stop_token_ids") p.stop_token_ids = as_list<int32_t>(field, value, [](const std::string& f, const py::handle& v) { return static_cast<int32_t>(as_int(f, v)); });
    else if (name == "include_stop_str_in_output") p.include_stop_str_in_output = as_bool(field, value);
    else if (name == "ignore_eos") p.ignore_eos = as_bool(field, value);
    else if (name == "logprobs") p.logprobs = as_int(field, value);
    else if (name == "prompt_logprobs") p.prompt_logprobs = as_int(field, value);
    else if (name == "skip_special_tokens") p.skip_special_tokens = as_bool(field, value);
    else if (name == "structured_outputs") {
      if (!py::isinstance<py::dict>(value)) bad_type(field, "a dict or StructuredOutputsParams", value);
      p.structured_outputs = structured_from_dict(value.cast<py::dict>());
    } else if (name == "logit_bias") {
      if (!py::isinstance<py::dict>(value)) bad_type(field, "a dict {token_id: bias}", value);
      for (const auto& [id, bias] : value.cast<py::dict>()) {
        const std::string f = field + "[" + std::string(py::repr(id)) + "]";
        // JSON-style string keys ("17") are accepted as OpenAI sends them.
        const int64_t token = py::isinstance<py::str>(id) ? std::stoll(id.cast<std::string>()) : as_int(f, id);
        p.logit_bias.emplace_back(static_cast<int32_t>(token), as_float(f, bias));
      }
    } else {
      throw py::value_error("SamplingParams: unknown field '" + name + "'");
    }
  }
  to_request_params(p);  // every range check (throws deepinfer.Error, a ValueError, naming the field)
  return p;
}

EngineConfig config_from_dict(const py::dict& d) {
  EngineConfig c;
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key);
    const std::string field = "LLM." + name;
    if (value.is_none()) continue;
    if (name == "kv_memory_bytes") c.kv_memory_bytes = static_cast<size_t>(as_int(field, value));
    else if (name == "max_num_seqs") c.max_num_seqs = as_int(field, value);
    else if (name == "max_num_batched_tokens") c.max_num_batched_tokens = as_int(field, value);
    else if (name == "max_prefill_chunk") c.max_prefill_chunk = as_int(field, value);
    else if (name == "threads") c.threads = as_int(field, value);
    else if (name == "batch_invariant") c.batch_invariant = as_bool(field, value);
    else if (name == "seed") c.seed = static_cast<uint64_t>(as_int(field, value));
    else if (name == "device") c.device = as_str(field, value);
    else if (name == "enable_prefix_caching") c.enable_prefix_caching = as_bool(field, value);
    else if (name == "swa_replay_keep") c.swa_replay_keep = as_int(field, value);
    else if (name == "data_parallel_size") c.data_parallel_size = as_int(field, value);
    else if (name == "enable_eplb") c.enable_eplb = as_bool(field, value);
    else if (name == "eplb_window_size") c.eplb_window_size = as_int(field, value);
    else if (name == "eplb_step_interval") c.eplb_step_interval = as_int(field, value);
    else if (name == "num_redundant_experts") c.num_redundant_experts = as_int(field, value);
    else if (name == "enforce_eager") c.enforce_eager = as_bool(field, value);
    else if (name == "cuda_graph_sizes") {
      if (py::isinstance<py::int_>(value)) {
        c.cuda_graph_sizes = {as_int(field, value)};
      } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
        for (const auto& v : value) c.cuda_graph_sizes.push_back(as_int(field, v));
      } else {
        bad_type(field, "an integer or a list of integers", value);
      }
    }
    else throw py::value_error("LLM: unknown option '" + name + "'");
  }
  return c;
}

std::vector<Prompt> prompts_from_list(const py::list& prompts) {
  std::vector<Prompt> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const py::handle p = prompts[i];
    if (py::isinstance<py::str>(p)) out.emplace_back(p.cast<std::string>());
    else out.emplace_back(as_list<int32_t>("prompts[" + std::to_string(i) + "]", p, [](const std::string& f, const py::handle& v) { return static_cast<int32_t>(as_int(f, v)); }));
  }
  return out;
}

std::vector<SamplingParams> params_from_list(const py::list& params) {
  std::vector<SamplingParams> out;
  for (const auto& p : params) out.push_back(sampling_from_dict(p.cast<py::dict>()));
  return out;
}

std::vector<Conversation> conversations_from_list(const std::vector<std::string>& json_texts) {
  std::vector<Conversation> out;
  for (const auto& text : json_texts) out.push_back(Conversation::from_json(text));
  return out;
}

ChatOptions chat_options_from_dict(const py::dict& d) {
  ChatOptions o;
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key);
    const std::string field = "chat." + name;
    if (value.is_none()) continue;
    if (name == "tools_json") o.tools_json = as_str(field, value);
    else if (name == "response_format_json") o.response_format_json = as_str(field, value);
    else if (name == "thinking") o.thinking = as_bool(field, value);
    else if (name == "reasoning_effort") o.reasoning_effort = py::isinstance<py::int_>(value) ? std::to_string(value.cast<int64_t>()) : as_str(field, value);
    else if (name == "add_generation_prompt") o.add_generation_prompt = as_bool(field, value);
    else if (name == "drop_thinking") o.drop_thinking = as_bool(field, value);
    else if (name == "chat_format") o.chat_format = as_str(field, value);
    else throw py::value_error("chat: unknown option '" + name + "'");
  }
  return o;
}

// ---- results -> dicts ----------------------------------------------------------------------------

class Converter {
 public:
  explicit Converter(const LLM& llm) : llm_(llm) {}

  // vLLM's shape: {token_id: (logprob, rank, decoded_token)} with the chosen token and the top N.
  py::dict position(const TokenLogprob& t) const {
    py::dict out;
    for (size_t r = 0; r < t.top.size(); ++r)
      out[py::int_(t.top[r].token_id)] = py::make_tuple(t.top[r].logprob, r + 1, decoded(t.top[r].token_id));
    out[py::int_(t.token_id)] = py::make_tuple(t.logprob, t.rank, decoded(t.token_id));
    return out;
  }
  py::list positions(const std::vector<TokenLogprob>& list) const {
    py::list out;
    for (const auto& t : list) out.append(position(t));
    return out;
  }

  static py::dict message(const AssistantMessage& m, bool delta) {
    py::dict out;
    if (!delta) out["role"] = "assistant";
    if (!delta || !m.content.empty()) out["content"] = m.content;
    if (!delta || !m.reasoning_content.empty()) out["reasoning_content"] = m.reasoning_content;
    if (!m.tool_calls.empty() || !delta) {
      py::list calls;
      for (const auto& c : m.tool_calls) {
        py::dict function;
        function["name"] = c.name;
        function["arguments"] = c.arguments;
        py::dict call;
        call["id"] = c.id;
        call["type"] = "function";
        call["function"] = function;
        calls.append(call);
      }
      out["tool_calls"] = calls;
    }
    if (!m.error.empty()) out["error"] = m.error;
    return out;
  }

  py::dict completion(const CompletionOutput& c) const {
    py::dict out;
    out["index"] = c.index;
    out["text"] = c.text;
    out["token_ids"] = c.token_ids;
    out["finish_reason"] = c.finish_reason.empty() ? py::object(py::none()) : py::str(c.finish_reason);
    out["stop_reason"] = c.stop_string ? py::object(py::str(*c.stop_string))
                         : c.stop_token_id ? py::object(py::int_(*c.stop_token_id)) : py::object(py::none());
    out["seed"] = c.seed;
    out["cumulative_logprob"] = c.cumulative_logprob ? py::object(py::float_(*c.cumulative_logprob)) : py::object(py::none());
    out["logprobs"] = c.cumulative_logprob ? py::object(positions(c.logprobs)) : py::object(py::none());
    out["message"] = c.message ? py::object(message(*c.message, false)) : py::object(py::none());
    return out;
  }

  py::object prompt_logprobs(const std::vector<std::optional<TokenLogprob>>& list) const {
    if (list.empty()) return py::none();
    py::list out;
    for (const auto& t : list) out.append(t ? py::object(position(*t)) : py::object(py::none()));
    return out;
  }

  py::dict request(const RequestOutput& r) const {
    py::dict out;
    out["index"] = r.index;
    out["prompt"] = r.prompt ? py::object(py::str(*r.prompt)) : py::object(py::none());
    out["prompt_token_ids"] = r.prompt_token_ids;
    out["prompt_logprobs"] = prompt_logprobs(r.prompt_logprobs);
    py::list outputs;
    for (const auto& c : r.outputs) outputs.append(completion(c));
    out["outputs"] = outputs;
    out["finished"] = r.finished;
    out["num_cached_tokens"] = r.num_cached_tokens;
    out["time_to_first_token"] = r.metrics.time_to_first_token;
    out["total_time"] = r.metrics.total_time;
    return out;
  }

  py::dict event(const StreamEvent& e) const {
    py::dict out;
    out["index"] = e.index;
    out["output_index"] = e.output_index;
    out["new_token_ids"] = e.new_token_ids;
    out["text"] = e.text;
    out["logprobs"] = e.logprobs.empty() ? py::object(py::none()) : py::object(positions(e.logprobs));
    out["prompt_logprobs"] = prompt_logprobs(e.prompt_logprobs);
    out["finished"] = e.finished;
    out["finish_reason"] = e.finish_reason.empty() ? py::object(py::none()) : py::str(e.finish_reason);
    out["request_finished"] = e.request_finished;
    out["num_cached_tokens"] = e.num_cached_tokens;
    out["delta"] = e.delta ? py::object(message(*e.delta, true)) : py::object(py::none());
    return out;
  }

 private:
  std::string decoded(int32_t id) const { return llm_.has_tokenizer() ? llm_.decode({id}, false) : std::string(); }
  const LLM& llm_;
};

// A GenerationStream for Python: next() runs steps with the GIL released.
class PyStream {
 public:
  PyStream(std::shared_ptr<LLM> llm, GenerationStream stream) : llm_(std::move(llm)), stream_(std::move(stream)) {}
  py::object next() {
    std::optional<StreamEvent> event;
    {
      py::gil_scoped_release release;
      event = stream_.next();
    }
    if (!event) return py::none();
    return Converter(*llm_).event(*event);
  }
  py::list outputs() const {
    py::list out;
    for (const auto& r : stream_.outputs()) out.append(Converter(*llm_).request(r));
    return out;
  }
  bool finished() const { return stream_.finished(); }

 private:
  std::shared_ptr<LLM> llm_;  // keeps the LLM alive while the stream is
  GenerationStream stream_;
};

}  // namespace

void bind_llm(py::module_& m) {
  m.def("_sampling_params", [](const py::dict& d) { sampling_from_dict(d); }, py::arg("fields"),
        "Checks SamplingParams fields (raises ValueError naming a bad one).");

  py::class_<PyStream>(m, "_Stream")
      .def("next", &PyStream::next)
      .def("outputs", &PyStream::outputs)
      .def_property_readonly("finished", &PyStream::finished);

  py::class_<LLM, std::shared_ptr<LLM>>(m, "_LLM")
      .def(py::init([](const std::string& model, const py::dict& config) {
             EngineConfig c = config_from_dict(config);
             py::gil_scoped_release release;  // loading weights takes a while
             return std::make_shared<LLM>(model, std::move(c));
           }),
           py::arg("model"), py::arg("config"))
      .def("generate_stream",
           [](const std::shared_ptr<LLM>& llm, const py::list& prompts, const py::list& params) {
             return PyStream(llm, llm->generate_stream(prompts_from_list(prompts), params_from_list(params)));
           })
      .def("chat_stream",
           [](const std::shared_ptr<LLM>& llm, const std::vector<std::string>& conversations, const py::list& params,
              const py::dict& options) {
             const ChatOptions o = chat_options_from_dict(options);
             return PyStream(llm, llm->chat_stream(conversations_from_list(conversations), params_from_list(params), o));
           })
      .def("render_chat",
           [](LLM& llm, const std::string& conversation, const py::dict& options) {
             return llm.render_chat(Conversation::from_json(conversation), chat_options_from_dict(options));
           })
      .def("chat_prompt_ids",
           [](LLM& llm, const std::string& conversation, const py::dict& options) {
             return llm.chat_prompt_ids(Conversation::from_json(conversation), chat_options_from_dict(options));
           })
      .def("chat_format", [](LLM& llm, const py::dict& options) { return llm.chat_format(chat_options_from_dict(options)); })
      .def("encode", &LLM::encode, py::arg("text"))
      .def("decode", &LLM::decode, py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def_property_readonly("vocab_size", &LLM::vocab_size)
      .def_property_readonly("context_limit", &LLM::context_limit)
      .def_property_readonly("kv_block_tokens", &LLM::kv_block_tokens)
      .def_property_readonly("batch_invariant", &LLM::batch_invariant)
      .def("stats", [](const LLM& llm) {
        const EngineStats s = llm.stats();
        py::dict out;
        out["steps"] = s.steps;
        out["preemptions"] = s.preemptions;
        out["scheduled_tokens"] = s.scheduled_tokens;
        out["prompt_tokens"] = s.prompt_tokens;
        out["generated_tokens"] = s.generated_tokens;
        out["computed_prompt_tokens"] = s.computed_prompt_tokens;
        out["cached_prompt_tokens"] = s.cached_prompt_tokens;
        out["replayed_tokens"] = s.replayed_tokens;
        out["backend_sampled_steps"] = s.backend_sampled_steps;
        out["prefix_cache_hit_rate"] = s.prefix_cache_hit_rate;
        out["prefix_cache_evicted_blocks"] = s.prefix_cache_evicted_blocks;
        return out;
      });
}
