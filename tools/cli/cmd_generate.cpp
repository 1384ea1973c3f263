// `deepinfer generate`: load a model folder, run one prompt, stream the continuation to stdout.
// Text goes to stdout as it is produced (ids when the folder has no tokenizer); load progress and
// timing statistics go to stderr so stdout stays clean for pipes.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "engine/load_progress.h"
#include "io/model_config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model_dir;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  int64_t max_tokens = 64;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  bool print_ids = false;
  bool ignore_eos = false;
  int64_t threads = 0;
  int64_t prefill_chunk = 512;
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
sampling::SamplingParams sampling_params(const GenerateArgs& args, const fs::path& dir) {
  sampling::SamplingParams params;
  const fs::path gen_config = dir / "generation_config.json";
  if (fs::exists(gen_config)) {
    std::ifstream in(gen_config);
    const auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) fail("{}: not a valid JSON object", gen_config.string());
    if (json.contains("temperature") && json["temperature"].is_number()) params.temperature = json["temperature"];
    // transformers decodes greedily when do_sample is false, whatever the temperature says.
    if (json.contains("do_sample") && json["do_sample"].is_boolean() && !json["do_sample"]) params.temperature = 0.0;
    if (json.contains("top_p") && json["top_p"].is_number()) params.top_p = json["top_p"];
    if (json.contains("top_k") && json["top_k"].is_number_integer()) params.top_k = json["top_k"];
  }
  if (args.temperature) params.temperature = *args.temperature;
  if (args.top_p) params.top_p = *args.top_p;
  if (args.top_k) params.top_k = *args.top_k;
  params.max_tokens = args.max_tokens;
  params.ignore_eos = args.ignore_eos;
  params.seed = args.seed ? *args.seed : std::random_device{}() * 0x100000001ull + std::random_device{}();
  params.validate();
  return params;
}

int run_generate(const GenerateArgs& args) {
  DEEPINFER_CHECK(args.prompt.has_value() != args.prompt_ids.has_value(),
                  "give exactly one of --prompt TEXT or --prompt-ids \"ID ID ...\"");
  const fs::path dir = args.model_dir;
  DEEPINFER_CHECK(fs::is_directory(dir), "model folder '{}' does not exist or is not a directory", dir.string());
  if (args.threads > 0) setenv("DEEPINFER_THREADS", std::to_string(args.threads).c_str(), 1);  // read by the pool

  // Everything cheap is checked before the weights are read: config, tokenizer, ids, sampling.
  const io::ModelConfig config = io::load_model_config(dir);
  const bool has_tokenizer = fs::exists(dir / "tokenizer.json");
  DEEPINFER_CHECK(!args.prompt || has_tokenizer,
                  "'{}' has no tokenizer.json, so --prompt cannot be encoded; pass token ids with --prompt-ids",
                  dir.string());
  std::optional<Tokenizer> tokenizer;
  if (has_tokenizer) tokenizer.emplace(Tokenizer::from_model_dir(dir));
  const std::vector<int32_t> prompt =
      args.prompt ? tokenizer->encode_with_bos(*args.prompt) : engine::parse_token_ids(*args.prompt_ids, config.vocab_size);
  for (int32_t id : prompt)
    DEEPINFER_CHECK(id < config.vocab_size, "the tokenizer produced id {} but the model's vocabulary has {} entries",
                    id, config.vocab_size);
  const sampling::SamplingParams params = sampling_params(args, dir);

  engine::LoadProgress progress;
  model::LoadOptions load_options = model::load_options_from_env();  // DEEPINFER_BATCH_INVARIANT
  load_options.progress = [&](size_t d, size_t t) { progress.update(d, t); };
  const auto model = model::load_model(dir, load_options);
  progress.finish();

  engine::Generator generator(*model, tokenizer ? &*tokenizer : nullptr,
                              engine::GeneratorOptions{.prefill_chunk = args.prefill_chunk});
  bool ends_with_newline = true;
  const auto result = generator.generate(prompt, params, [&](const engine::TokenEvent& event) {
    if (tokenizer) {
      if (event.text.empty()) return;
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      ends_with_newline = event.text.back() == '\n';
    } else {
      std::fprintf(stdout, event.index == 0 ? "%d" : " %d", event.id);
      ends_with_newline = false;
    }
    std::fflush(stdout);
  });
  if (!ends_with_newline) std::fputc('\n', stdout);
  if (args.print_ids && tokenizer) {  // without a tokenizer the streamed line already is the ids
    for (size_t i = 0; i < result.ids.size(); ++i) std::fprintf(stdout, i ? " %d" : "%d", result.ids[i]);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);

  const auto& s = result.stats;
  std::fprintf(stderr,
               "prompt tokens: %lld | generated: %lld (%s) | prefill: %.1f tok/s | decode: %.1f tok/s | "
               "seed: %s | threads: %zu\n",
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens),
               engine::to_string(result.finish), s.prefill_tokens_per_second(), s.decode_tokens_per_second(),
               params.greedy() ? "- (greedy)" : std::to_string(params.seed).c_str(),
               ThreadPool::global().size());
  return 0;
}

const CommandRegistration registration{Command{
    "generate", "Generate text from a prompt with a model folder",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<GenerateArgs>();
      sub.add_option("--model", args->model_dir, "Model folder (config.json, *.safetensors, tokenizer.json)")
          ->required();
      auto* prompt = sub.add_option("--prompt", args->prompt, "Prompt text (BOS added when tokenizer_config says so)");
      auto* ids = sub.add_option("--prompt-ids", args->prompt_ids,
                                 "Prompt as token ids, fed verbatim, e.g. \"0 17 5\" (for folders without a tokenizer)");
      prompt->excludes(ids);
      sub.add_option("--max-tokens", args->max_tokens, "Most tokens to generate")
          ->default_val(64)
          ->check(CLI::PositiveNumber);
      sub.add_option("--temperature", args->temperature,
                     "Sampling temperature; 0 = greedy. Default: generation_config.json (do_sample false = greedy), else 1.0");
      sub.add_option("--top-p", args->top_p, "Nucleus sampling mass in (0, 1]. Default: generation_config.json, else 1.0");
      sub.add_option("--top-k", args->top_k, "Keep the K most likely tokens; 0 = off. Default: generation_config.json, else 0");
      sub.add_option("--seed", args->seed, "Random seed; the same seed gives the same tokens. Default: random (printed)");
      sub.add_flag("--print-ids", args->print_ids, "Print the generated ids, space-separated, on the last line of stdout");
      sub.add_flag("--ignore-eos", args->ignore_eos, "Keep generating past EOS (for benchmarks)");
      sub.add_option("--threads", args->threads, "CPU threads (default: all cores, or DEEPINFER_THREADS)")
          ->check(CLI::PositiveNumber);
      sub.add_option("--prefill-chunk", args->prefill_chunk, "Prompt tokens per forward pass during prefill")
          ->default_val(512)
          ->check(CLI::PositiveNumber);
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
