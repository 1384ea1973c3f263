// `deepinfer generate`: load a model folder and generate through the engine (deepinfer::LLM).
// One prompt (--prompt / --prompt-ids): the continuation streams to stdout as it is produced (ids
// when the folder has no tokenizer). A file of requests (--input prompts.jsonl): all run
// concurrently, results go to --output in input order, a progress bar to stderr. Load progress and
// statistics go to stderr so stdout stays clean for pipes.
#include <cstdio>
#include <cstdlib>
#include <deepinfer/llm.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "core/json_excerpt.h"
#include "cli/generate_fields.h"
#include "cli/generate_request.h"
#include "core/error.h"
#include "core/text_file.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "engine/load_progress.h"
#include "engine/memory_budget.h"
#include "engine/public_params.h"
#include "io/model_config.h"
#include "sampling/guided_decoding.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct GenerateArgs {
  std::string model_dir;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  std::optional<std::string> input, output;
  int64_t max_tokens = 64;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  bool print_ids = false;
  bool ignore_eos = false;
  EngineFlags engine;
};

// Errors reach main() as one line; multi-line messages (e.g. lists of missing tensors) are joined.
[[noreturn]] void rethrow_one_line(const std::exception& e) {
  std::string message = e.what();
  for (size_t pos; (pos = message.find('\n')) != std::string::npos;) message.replace(pos, 1, "; ");
  throw Error(message);
}

// Defaults for unset sampling flags come from the folder's generation_config.json when it sets them
// (temperature, top_p, top_k, do_sample=false -> greedy, as transformers reads it), else
// temperature 1, top_p 1, top_k off.
SamplingParams default_params(const GenerateArgs& args, const fs::path& dir) {
  SamplingParams params;
  const fs::path gen_config = dir / "generation_config.json";
  if (const auto text = read_text_file_if_exists(gen_config, kConfigFileLimit, "generation config")) {
    const auto j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) fail("{}: not a valid JSON object", gen_config.string());
    if (j.contains("temperature") && j["temperature"].is_number()) params.temperature = j["temperature"];
    // transformers decodes greedily when do_sample is false, whatever the temperature says.
    if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"]) params.temperature = 0.0;
    if (j.contains("top_p") && j["top_p"].is_number()) params.top_p = j["top_p"];
    if (j.contains("top_k") && j["top_k"].is_number_integer()) params.top_k = j["top_k"];
  }
  if (args.temperature) params.temperature = *args.temperature;
  if (args.top_p) params.top_p = *args.top_p;
  if (args.top_k) params.top_k = *args.top_k;
  params.max_tokens = args.max_tokens;
  params.ignore_eos = args.ignore_eos;
  params.skip_special_tokens = false;  // the single-prompt stream shows every token's text
  return params;
}

// Says so when the state pool, not the model, limits how long a sequence may grow.
void note_pool_limit(const LLM& llm, const io::ModelConfig& config) {
  if (config.max_position_embeddings > 0 && llm.context_limit() < config.max_position_embeddings)
    std::fprintf(stderr,
                 "note: the state pool holds %lld positions per sequence, less than the model's context of %lld "
                 "(raise --kv-memory for longer sequences)\n",
                 static_cast<long long>(llm.context_limit()), static_cast<long long>(config.max_position_embeddings));
}

EngineConfig engine_config(const GenerateArgs& args, std::function<void(size_t, size_t)> progress) {
  return cli::engine_config(args.engine, args.seed, std::move(progress));
}

// --- one prompt, streamed ---

int run_single(const GenerateArgs& args, const fs::path& dir, const io::ModelConfig& config,
               const std::optional<Tokenizer>& tokenizer) {
  DEEPINFER_CHECK(!args.prompt || tokenizer,
                  "'{}' has no tokenizer.json, so --prompt cannot be encoded; pass token ids with --prompt-ids",
                  dir.string());
  const std::vector<int32_t> prompt =
      args.prompt ? tokenizer->encode_with_bos(*args.prompt) : engine::parse_token_ids(*args.prompt_ids, config.vocab_size);
  for (int32_t id : prompt)
    DEEPINFER_CHECK(id < config.vocab_size, "the tokenizer produced id {} but the model's vocabulary has {} entries",
                    id, config.vocab_size);
  SamplingParams params = default_params(args, dir);
  params.seed = args.seed ? *args.seed : std::random_device{}() * 0x100000001ull + std::random_device{}();
  validate(params, config.vocab_size);

  engine::LoadProgress progress;
  LLM llm(dir, engine_config(args, [&](size_t d, size_t t) { progress.update(d, t); }));
  progress.finish();
  note_pool_limit(llm, config);

  bool ends_with_newline = true;
  bool first = true;
  const auto out = llm.generate(std::vector<Prompt>{Prompt(prompt)}, params, [&](const StreamEvent& event) {
    if (tokenizer) {
      if (event.text.empty()) return;
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      ends_with_newline = event.text.back() == '\n';
    } else {
      for (int32_t id : event.new_token_ids) {
        std::fprintf(stdout, first ? "%d" : " %d", id);
        first = false;
      }
      ends_with_newline = false;
    }
    std::fflush(stdout);
  });
  if (!ends_with_newline) std::fputc('\n', stdout);
  const CompletionOutput& result = out.at(0).outputs.at(0);
  if (args.print_ids && tokenizer) {  // without a tokenizer the streamed line already is the ids
    for (size_t i = 0; i < result.token_ids.size(); ++i) std::fprintf(stdout, i ? " %d" : "%d", result.token_ids[i]);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);

  const auto& m = out[0].metrics;
  const auto generated = static_cast<double>(result.token_ids.size());
  const double prefill_rate = m.time_to_first_token > 0 ? static_cast<double>(prompt.size()) / m.time_to_first_token : 0;
  const double decode_time = m.total_time - m.time_to_first_token;
  const double decode_rate = generated > 1 && decode_time > 0 ? (generated - 1) / decode_time : 0;
  std::fprintf(stderr,
               "prompt tokens: %zu | generated: %zu (%s) | prefill: %.1f tok/s | decode: %.1f tok/s | seed: %s | "
               "threads: %zu\n",
               prompt.size(), result.token_ids.size(), result.finish_reason.c_str(), prefill_rate, decode_rate,
               params.temperature == 0 || params.top_k == 1 ? "- (greedy)" : std::to_string(*params.seed).c_str(),
               ThreadPool::global().size());
  return 0;
}

// --- a file of requests ---

int run_file(const GenerateArgs& args, const fs::path& dir, const io::ModelConfig& config,
             const std::optional<Tokenizer>& tokenizer) {
  DEEPINFER_CHECK(args.output.has_value(), "--input needs --output FILE (results, one JSON object per line; - = stdout)");
  std::ifstream in(*args.input, std::ios::binary);
  DEEPINFER_CHECK(in.good(), "cannot read the input file '{}'", *args.input);
  const SamplingParams defaults = default_params(args, dir);
  validate(defaults, config.vocab_size);

  // Every line is checked before any work starts.
  std::vector<FileRequest> requests;
  std::string line;
  for (int64_t number = 1; read_bounded_line(in, line, kRequestLineLimit, *args.input, number); ++number) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no request
    try {
      requests.push_back(parse_request(line, defaults, config, tokenizer));
    } catch (const std::exception& e) {
      fail("{} line {}: {}", *args.input, number, e.what());
    }
  }
  DEEPINFER_CHECK(!requests.empty(), "the input file '{}' holds no requests", *args.input);

  std::ofstream file_out;
  const bool to_stdout = *args.output == "-";
  if (!to_stdout) {
    file_out.open(*args.output, std::ios::binary | std::ios::trunc);
    DEEPINFER_CHECK(file_out.good(), "cannot write the output file '{}'", *args.output);
  }
  std::ostream& out = to_stdout ? std::cout : file_out;

  engine::LoadProgress load_progress;
  LLM llm(dir, engine_config(args, [&](size_t d, size_t t) { load_progress.update(d, t); }));
  load_progress.finish();
  note_pool_limit(llm, config);

  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (const auto& r : requests) {
    prompts.emplace_back(r.prompt_ids);
    params.push_back(r.params);
  }
  // Results are written in input order as soon as every earlier one is done.
  struct Completion {
    std::vector<int32_t> ids;
    std::string text, finish_reason;
    json logprobs = json::array();
  };
  struct Pending {
    std::vector<Completion> outputs;
    json prompt_logprobs;
    int64_t cached_tokens = 0;  // prompt tokens served by the prefix cache
    bool done = false;
  };
  std::vector<Pending> pending(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) pending[i].outputs.resize(static_cast<size_t>(requests[i].params.n));
  // n = 1 keeps the single-output fields at the top level; n > 1 lists the completions in "outputs".
  auto result_json = [&](size_t i, const Pending& w) {
    const SamplingParams& sp = requests[i].params;
    auto completion = [&](json& j, const Completion& c) {
      j["token_ids"] = c.ids;
      j["text"] = c.text;
      j["finish_reason"] = c.finish_reason;
      if (sp.logprobs) j["logprobs"] = c.logprobs;
    };
    json result = {{"index", i}, {"prompt_token_ids", requests[i].prompt_ids}};
    if (sp.n == 1) {
      completion(result, w.outputs[0]);
    } else {
      result["outputs"] = json::array();
      for (size_t k = 0; k < w.outputs.size(); ++k) {
        json c = {{"index", k}};
        completion(c, w.outputs[k]);
        result["outputs"].push_back(std::move(c));
      }
    }
    if (sp.prompt_logprobs) result["prompt_logprobs"] = w.prompt_logprobs;
    result["cached_tokens"] = w.cached_tokens;
    return result;
  };
  size_t next_to_write = 0, done = 0;
  int64_t tokens = 0;
  engine::RequestProgress progress(requests.size());
  llm.generate(prompts, params, [&](const StreamEvent& e) {
    Pending& p = pending[e.index];
    Completion& c = p.outputs.at(e.output_index);
    c.ids.insert(c.ids.end(), e.new_token_ids.begin(), e.new_token_ids.end());
    c.text += e.text;
    for (const auto& l : logprobs_json(e.logprobs)) c.logprobs.push_back(l);
    if (!e.prompt_logprobs.empty()) p.prompt_logprobs = prompt_logprobs_json(e.prompt_logprobs);
    tokens += static_cast<int64_t>(e.new_token_ids.size());
    if (e.finished) c.finish_reason = e.finish_reason;
    if (e.request_finished) {
      p.done = true;
      p.cached_tokens = e.num_cached_tokens;
      ++done;
      for (; next_to_write < pending.size() && pending[next_to_write].done; ++next_to_write) {
        Pending& w = pending[next_to_write];
        out << result_json(next_to_write, w).dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
        w = Pending{};  // free the memory
        w.done = true;
      }
      out.flush();
    }
    progress.update(done, tokens);
  });
  DEEPINFER_CHECK(out.good(), "writing the output file '{}' failed", *args.output);
  const auto stats = llm.stats();
  progress.finish(done, tokens,
                  fmt::format(" | {} steps, {} preemptions | kv pool: {} blocks of {} tokens ({}) | prefix cache: "
                              "{} of {} prompt tokens cached",
                              stats.steps, stats.preemptions, llm.kv_num_blocks(), llm.kv_block_tokens(),
                              engine::human_bytes(static_cast<double>(llm.kv_memory_bytes())),
                              stats.cached_prompt_tokens, stats.prompt_tokens));
  return 0;
}

int run_generate(const GenerateArgs& args) {
  const int sources = args.prompt.has_value() + args.prompt_ids.has_value() + args.input.has_value();
  DEEPINFER_CHECK(sources == 1, "give exactly one of --prompt TEXT, --prompt-ids \"ID ID ...\" or --input FILE.jsonl");
  DEEPINFER_CHECK(!args.output || args.input, "--output is for --input runs; a single prompt streams to stdout");
  const fs::path dir = args.model_dir;
  DEEPINFER_CHECK(fs::is_directory(dir), "model folder '{}' does not exist or is not a directory", dir.string());

  // Everything cheap is checked before the weights are read: config, tokenizer, prompts, sampling.
  const io::ModelConfig config = io::load_model_config(dir);
  std::optional<Tokenizer> tokenizer;
  if (fs::exists(dir / "tokenizer.json")) tokenizer.emplace(Tokenizer::from_model_dir(dir));
  check_engine_flags(args.engine);
  return args.input ? run_file(args, dir, config, tokenizer) : run_single(args, dir, config, tokenizer);
}

const CommandRegistration registration{Command{
    "generate", "Generate text from a prompt, or from a file of requests, with a model folder",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<GenerateArgs>();
      sub.add_option("--model", args->model_dir, "Model folder (config.json, *.safetensors, tokenizer.json)")
          ->required();
      auto* prompt = sub.add_option("--prompt", args->prompt, "Prompt text (BOS added when tokenizer_config says so)");
      auto* ids = sub.add_option("--prompt-ids", args->prompt_ids,
                                 "Prompt as token ids, fed verbatim, e.g. \"0 17 5\" (for folders without a tokenizer)");
      auto* input = sub.add_option(
          "--input", args->input,
          "File of requests, one JSON object per line (blank lines skipped), run concurrently: {\"prompt\": \"text\"} "
          "or {\"prompt_token_ids\": [0, 17, 5]}, optionally with max_tokens, temperature, top_p, top_k, seed, stop "
          "(string or list), stop_token_ids, ignore_eos, n, min_p, presence_penalty, frequency_penalty, "
          "repetition_penalty, logit_bias ({\"17\": 2.5}), min_tokens, include_stop_str_in_output, logprobs (top N), "
          "prompt_logprobs, skip_special_tokens, and guided decoding as \"structured_outputs\": {\"json\": {schema}} "
          "or {\"regex\": ...}, {\"grammar\": GBNF}, {\"choice\": [...]}, {\"json_object\": true} (vLLM names; "
          "unset fields take the flags' values). Every line is checked before any work; a bad one is an error naming "
          "its line number");
      sub.add_option("--output", args->output,
                     "With --input: results file ('-' = stdout), one line per request in input order: {\"index\", "
                     "\"prompt_token_ids\", \"token_ids\", \"text\", \"finish_reason\": \"stop\"|\"length\"}, plus "
                     "\"logprobs\" / \"prompt_logprobs\" when asked; with n > 1 the completions are listed in "
                     "\"outputs\": [{\"index\", \"token_ids\", \"text\", \"finish_reason\"}, ...]");
      prompt->excludes(ids);
      input->excludes(prompt)->excludes(ids);
      sub.add_option("--max-tokens", args->max_tokens, "Most tokens to generate")
          ->default_val(64)
          ->check(CLI::PositiveNumber);
      sub.add_option("--temperature", args->temperature,
                     "Sampling temperature; 0 = greedy. Default: generation_config.json (do_sample false = greedy), else 1.0");
      sub.add_option("--top-p", args->top_p, "Nucleus sampling mass in (0, 1]. Default: generation_config.json, else 1.0");
      sub.add_option("--top-k", args->top_k, "Keep the K most likely tokens; 0 = off. Default: generation_config.json, else 0");
      sub.add_option("--seed", args->seed,
                     "Random seed; the same seed gives the same tokens. Default: random (printed). With --input: the "
                     "base from which lines without a seed get their own (reproducible run to run)");
      sub.add_flag("--print-ids", args->print_ids, "Print the generated ids, space-separated, on the last line of stdout");
      sub.add_flag("--ignore-eos", args->ignore_eos, "Keep generating past EOS (for benchmarks)");
      add_engine_flags(sub, args->engine);
      return [args] {
        try {
          return run_generate(*args);
        } catch (const std::exception& e) {
          rethrow_one_line(e);
        }
      };
    }}};

}  // namespace
}  // namespace deepinfer::cli
