#pragma once
// The offline C++ API: load a model folder once, generate for many prompts at once. Requests run
// concurrently (continuous batching over a paged state pool); results come back in input order.
//
//   deepinfer::LLM llm("models/kjv-tiny-v4", {.max_num_seqs = 32});
//   deepinfer::SamplingParams params{.temperature = 0.8, .max_tokens = 64, .stop = {"\n"}};
//   for (const auto& out : llm.generate({"In the beginning", "The LORD is"}, params))
//     std::cout << out.outputs[0].text << "\n";
//   auto reply = llm.chat({{.role = "user", .content = "Hi"}}, params, {.thinking = true});
//   reply[0].outputs[0].message->content;   // ->reasoning_content, ->tool_calls
//
// User guide (C++ and Python): docs/generation-api.md.
//
// Names follow vLLM (SamplingParams, RequestOutput, CompletionOutput, finish_reason "stop" /
// "length"). Errors throw std::runtime_error (deepinfer::Error) with a one-line message. One LLM
// serves one generate()/chat() call (or open GenerationStream) at a time (not thread-safe).
// This header uses only the standard library: no internal type is visible through it.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace deepinfer {

// Guided decoding (vLLM's StructuredOutputsParams): set at most one kind. The output is then
// always in the language: a JSON Schema's instances, the regex's full matches, one of the
// choices, the GBNF grammar's sentences (start rule `root`), or any JSON object. Generation ends
// ("stop") when the grammar is complete. Every spec is compiled once (cached, 64 most recent) when
// a request using it is added; a spec that does not compile is an error naming the field.
// Reasoning models: if the prompt ends inside `<think>` (the vocabulary has `</think>` and the
// prompt's last `<think>` is open), the constraint starts after the model writes `</think>`.
// What each front end accepts: docs/structured-outputs.md.
struct StructuredOutputs {
  std::optional<std::string> json;                 // JSON Schema, as JSON text
  std::optional<std::string> regex;
  std::optional<std::vector<std::string>> choice;
  std::optional<std::string> grammar;              // GBNF
  bool json_object = false;
  bool disable_any_whitespace = false;             // JSON kinds: no whitespace between tokens
};

struct SamplingParams {
  // Completions per prompt, each its own sequence: RequestOutput::outputs[i] has index i and seed
  // `seed + i` when seed is set (vLLM's rule), its own engine-chosen seed otherwise.
  int64_t n = 1;
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;        // nucleus mass in (0, 1]; 1 = off
  int64_t top_k = 0;         // keep the k most likely tokens; 0 or -1 = off
  double min_p = 0.0;        // drop tokens less likely than min_p x the top token's probability, [0, 1]
  // OpenAI penalties over the generated tokens, [-2, 2]: logit -= frequency_penalty x count and
  // -= presence_penalty once a token appeared.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  // Over prompt and generated tokens, > 0, 1 = off: seen tokens' positive logits are divided by
  // it, negative ones multiplied (vLLM / CTRL).
  double repetition_penalty = 1.0;
  std::vector<std::pair<int32_t, double>> logit_bias;  // token id -> added to its logit (ids checked)
  // Same seed + same prompt + same parameters = same tokens, whatever else is in the batch.
  // Unset: the engine gives each request its own seed (reported in CompletionOutput::seed).
  std::optional<uint64_t> seed;
  int64_t max_tokens = 16;                // generated tokens at most (a stop token counts)
  int64_t min_tokens = 0;                 // EOS / stop_token_ids / stop strings ignored until this many
  std::vector<std::string> stop;          // stop strings: generation ends there, the text excludes them
  std::vector<int32_t> stop_token_ids;    // in addition to EOS; the id is kept in token_ids, not in text
  bool include_stop_str_in_output = false;  // keep the matched stop string at the end of the text
  bool ignore_eos = false;                // keep generating past EOS
  // Log-probabilities (0..20), of the model's raw distribution: log_softmax of its logits, with
  // only the guided-decoding mask applied (vLLM V1's default logprobs_mode "raw_logprobs");
  // temperature, penalties, bias and top-k/p/min-p do not change them.
  std::optional<int64_t> logprobs;         // per generated token: its logprob and rank + the top N
  std::optional<int64_t> prompt_logprobs;  // per prompt token but the first: the same
  StructuredOutputs structured_outputs;
  bool skip_special_tokens = true;        // leave special tokens out of the text
  // Testing/debugging: CompletionOutput::logits, the row logprobs are read from.
  bool return_logits = false;
};

struct EngineConfig {
  // Memory for the model state of running sequences, in bytes; 0 = a quarter of physical RAM.
  // Never more is taken than max_num_seqs sequences at full context need.
  size_t kv_memory_bytes = 0;
  int64_t max_num_seqs = 64;              // sequences running at once
  // Tokens per step: the running sequences' decodes first, then chunks of waiting prompts. Keep it
  // >= max_num_seqs, or the newest running sequences wait while older ones decode.
  int64_t max_num_batched_tokens = 2048;
  int64_t max_prefill_chunk = 0;          // prompt tokens of one sequence per step; 0 = no extra limit
  int64_t threads = 0;                    // CPU threads; 0 = DEEPINFER_THREADS or all cores (first LLM wins)
  // Batch-invariant numerics (results independent of batching and chunking); unset: on when the
  // environment has DEEPINFER_BATCH_INVARIANT=1.
  std::optional<bool> batch_invariant;
  // Base of the seeds given to requests without one; unset: random per LLM.
  std::optional<uint64_t> seed;
  // Backend: "cpu" or "cuda"; empty = DEEPINFER_DEVICE from the environment, else "cpu".
  std::string device;
  // Weight-loading progress: (bytes done, bytes total).
  std::function<void(size_t, size_t)> load_progress;
  // Automatic prefix caching (vLLM's enable_prefix_caching): full blocks of earlier prompts and
  // outputs are reused by later requests that start with the same tokens (hit granularity: one
  // block, 64 positions on the kjv model, 128 on V4-Flash).
  bool enable_prefix_caching = true;
  // Sliding-window state on a hit. > 0 (default 140, must be >= the model's window): bounded
  // replay — the last swa_replay_keep tokens before the hit are recomputed with the window clamped
  // there (approximate, O(keep) work). 0: exact — window-state snapshots at block boundaries are
  // cached too and a hit ends where one exists; outputs equal uncached ones bit for bit under
  // batch-invariant numerics. On DeepSeek-V4.1 it also bounds prefill: the layers after the last
  // KV-source layer run over only the last swa_replay_keep tokens of a prompt (0: all; exact).
  int64_t swa_replay_keep = 140;
  // Attention data parallelism with expert parallelism (vLLM's data_parallel_size, DeepSeek's way
  // of serving V4): this many ranks, each with its own model instance, scheduler, state pool
  // (kv_memory_bytes and max_num_seqs are per rank) and prefix cache, stepping in lockstep; each
  // holds a share of the routed experts and the MoE layers exchange token rows between ranks. A
  // request runs on the rank with the fewest unfinished ones. Ranks are threads of this process
  // (DeepSeek-V4 models): on the CPU they share the cores; on GPUs (device "cuda") rank r runs on
  // GPU r and the ranks exchange rows over NCCL. With batch-invariant numerics the outputs equal one
  // engine's bit for bit (a rank's batch holds other requests than one engine's would).
  int64_t data_parallel_size = 1;
  // Expert load balancing (EPLB) across the ranks: every eplb_step_interval steps, expert
  // placement is re-planned from the routed-token counts of the last eplb_window_size steps, with
  // num_redundant_experts extra replicas of hot experts per layer (vLLM's names and defaults).
  bool enable_eplb = false;
  int64_t eplb_window_size = 1000;
  int64_t eplb_step_interval = 3000;
  int64_t num_redundant_experts = 0;
  // CUDA graphs for decode steps (vLLM's names): a step whose every sequence decodes one token and
  // whose batch size is in cuda_graph_sizes is recorded the second time its shape is seen and
  // replayed after that, while its launches match the recording; a batch between two sizes runs
  // padded up to the next (rows that change no real row), one past the largest launches kernel by
  // kernel. cuda_graph_sizes follows vLLM's
  // --cuda-graph-sizes: empty = {512}; one value N = 1, 2, 4 and every multiple of 8 up to N; more
  // values = exactly those. enforce_eager: never record (every step launches kernel by kernel).
  bool enforce_eager = false;
  std::vector<int64_t> cuda_graph_sizes;
};

// One prompt: text (tokenized, BOS added when tokenizer_config.json asks for it) or token ids
// (fed verbatim). Converts implicitly from either, so {"text", "more text"} and {{0, 17, 5}} work.
struct Prompt {
  Prompt() = default;
  Prompt(std::string prompt) : text(std::move(prompt)) {}  // NOLINT: implicit by design
  Prompt(const char* prompt) : text(prompt) {}             // NOLINT
  Prompt(std::vector<int32_t> ids) : token_ids(std::move(ids)) {}       // NOLINT
  Prompt(std::initializer_list<int32_t> ids) : token_ids(ids) {}        // NOLINT
  std::optional<std::string> text;  // set: a text prompt
  std::vector<int32_t> token_ids;   // used when text is unset
};

struct RequestMetrics {
  double time_to_first_token = 0;  // seconds from submission to the first generated token
  double total_time = 0;           // seconds from submission to the last
};

struct Logprob {
  int32_t token_id = 0;
  float logprob = 0;
};

struct TokenLogprob {
  int32_t token_id = 0;      // the generated (or prompt) token
  float logprob = 0;
  int64_t rank = 0;          // 1 + the number of tokens more likely than it
  std::vector<Logprob> top;  // the N most likely tokens, descending (ties: lower id); masked ones left out
};

// ---- Chat -------------------------------------------------------------------------------------

struct ChatToolCall {
  std::string id;         // generated calls: "call_<index>"
  std::string name;
  std::string arguments;  // a JSON object, as text
};

// One message of a conversation, OpenAI's chat format. Roles: system, user, assistant, tool;
// developer from V3.2, latest_reminder from V4.
struct ChatMessage {
  std::string role;
  std::optional<std::string> content;            // unset (null) renders as empty
  std::optional<std::string> reasoning_content;  // assistant turns of a thinking conversation
  std::vector<ChatToolCall> tool_calls;          // assistant turns that called tools
  std::optional<std::string> tool_call_id;       // tool results: the call they answer
};

// One conversation: typed messages, or OpenAI's "messages" JSON array as text (for content parts
// or fields ChatMessage lacks; objects keep the key order written, as the encoders render it).
struct Conversation {
  Conversation(std::vector<ChatMessage> m) : messages(std::move(m)) {}            // NOLINT: implicit by design
  Conversation(std::initializer_list<ChatMessage> m) : messages(m) {}             // NOLINT
  static Conversation from_json(std::string messages_json) {
    Conversation c{std::vector<ChatMessage>{}};
    c.messages_json = std::move(messages_json);
    return c;
  }
  std::vector<ChatMessage> messages;
  std::string messages_json;  // used when not empty
};

// A function the model may call (OpenAI's tools[i].function).
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters = R"({"type": "object", "properties": {}})";  // JSON Schema, as text
};

struct ChatOptions {
  std::vector<ChatTool> tools;
  std::string tools_json;            // or OpenAI's "tools" array as JSON text (not both)
  std::string response_format_json;  // optional OpenAI response_format object, rendered into the prompt
  // Thinking mode: the prompt opens <think>, and the output's reasoning is parsed out of it.
  bool thinking = false;
  // V4: "max" adds DeepSeek's maximum-effort preamble (low/medium/high/xhigh add nothing); V4.1:
  // low/high/xhigh/max or an integer 1-100 as text ("high" when unset). Rendered in thinking mode.
  std::optional<std::string> reasoning_effort;
  bool add_generation_prompt = true;
  bool drop_thinking = true;  // drop the reasoning of turns before the last user message
  // Prompt format: "v3", "v3.1", "v3.2", "v4" or "v4.1"; empty = the model folder's (LLM::chat).
  std::string chat_format;
};

// An assistant message parsed from generated text (CompletionOutput::message), or what one step
// added to it (StreamEvent::delta; tool calls appear there once complete).
struct AssistantMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ChatToolCall> tool_calls;
  std::string error;  // set when tool-call text could not be parsed (that text is then content)
};

struct CompletionOutput {
  size_t index = 0;  // completion index within the request, 0 .. n-1
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;                  // "stop" (EOS, stop token, stop string) or "length"
  std::optional<std::string> stop_string;     // the stop string that ended it
  std::optional<int32_t> stop_token_id;       // the EOS / stop token id that ended it
  uint64_t seed = 0;                          // the seed its samples were drawn with
  std::vector<float> logits;                  // return_logits: vocab_size floats per token
  std::vector<TokenLogprob> logprobs;         // SamplingParams::logprobs: one per token of token_ids
  std::optional<double> cumulative_logprob;   // with logprobs: their sum
  // chat(): the output parsed into reasoning, content and tool calls (complete once finished).
  std::optional<AssistantMessage> message;
};

struct RequestOutput {
  size_t index = 0;                   // position in the generate() input
  std::optional<std::string> prompt;  // the prompt text, when given as text
  std::vector<int32_t> prompt_token_ids;
  // SamplingParams::prompt_logprobs: one per prompt token; the first is empty (nothing predicts it).
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  std::vector<CompletionOutput> outputs;  // n, in index order
  RequestMetrics metrics;
  bool finished = true;
  int64_t num_cached_tokens = 0;  // prompt tokens served by the prefix cache (OpenAI's cached_tokens)
};

// Passed to the streaming callback after every step, for each request that produced a token.
struct StreamEvent {
  size_t index = 0;                     // position in the generate() input
  size_t output_index = 0;              // which completion (CompletionOutput::index)
  std::vector<int32_t> new_token_ids;
  std::string text;                     // text that became final (stop strings never appear)
  std::vector<TokenLogprob> logprobs;   // SamplingParams::logprobs: one per new token
  // SamplingParams::prompt_logprobs: in the first event of completion 0, as RequestOutput's.
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  bool finished = false;                // this completion is finished
  std::string finish_reason;            // when finished
  bool request_finished = false;        // every completion of the request is finished
  int64_t num_cached_tokens = 0;        // when request_finished: RequestOutput::num_cached_tokens
  // chat(): what this step added to the parsed message (reasoning, content, completed tool calls).
  std::optional<AssistantMessage> delta;
};
using StreamCallback = std::function<void(const StreamEvent&)>;

class GenerationRun;  // internal

// Iterator-style streaming (LLM::generate_stream / chat_stream): each next() runs engine steps on
// the calling thread until an event is ready. Borrows the LLM, which must outlive it and serves
// nothing else while it is open; destroying it early aborts the unfinished requests.
//
//   auto stream = llm.generate_stream({"In the beginning"}, params);
//   while (auto event = stream.next()) std::cout << event->text << std::flush;
//   const auto& results = stream.outputs();  // what generate() would have returned
class GenerationStream {
 public:
  explicit GenerationStream(std::unique_ptr<GenerationRun> run);
  GenerationStream(GenerationStream&&) noexcept;
  GenerationStream& operator=(GenerationStream&&) noexcept;
  ~GenerationStream();

  std::optional<StreamEvent> next();  // empty once every request finished
  bool finished() const;              // next() has nothing more to give
  // RequestOutputs in input order, filled as events arrive (complete once finished()).
  const std::vector<RequestOutput>& outputs() const;

 private:
  std::unique_ptr<GenerationRun> run_;
  std::vector<StreamEvent> pending_;
  size_t next_ = 0;  // first event of pending_ not yet returned
};

struct EngineStats {
  int64_t steps = 0;             // forward passes
  int64_t preemptions = 0;       // sequences sent back to wait for memory (recomputed later)
  int64_t scheduled_tokens = 0;  // tokens run through the model, recomputation included
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t computed_prompt_tokens = 0;  // prompt positions run through the model (replay included)
  int64_t cached_prompt_tokens = 0;    // tokens served by the prefix cache
  int64_t replayed_tokens = 0;         // recomputed by bounded replay after hits
  // Steps whose tokens were drawn where the logits are (on the GPU with --device cuda): every step
  // whose rows need no logprobs, logits, penalties, logit_bias or min_tokens on the host.
  int64_t backend_sampled_steps = 0;
  double prefix_cache_hit_rate = 0;    // cached / looked-up tokens, over this LLM's lifetime
  int64_t prefix_cache_evicted_blocks = 0;
};

class LLM {
 public:
  // Loads DIR (config.json, *.safetensors, optional tokenizer.json) and sizes the state pool.
  explicit LLM(const std::filesystem::path& model_dir, EngineConfig config = {});
  ~LLM();
  LLM(LLM&&) noexcept;
  LLM& operator=(LLM&&) noexcept;

  // Runs every prompt to completion, concurrently. `params` holds one entry for all prompts or
  // one per prompt. Every request is checked before any runs: a bad one throws, naming its index.
  // `on_event` (optional) streams each step's tokens and text as they are produced.
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                      const StreamCallback& on_event = {});
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts, const SamplingParams& params = {},
                                      const StreamCallback& on_event = {});
  // Any other container of prompts: std::vector<std::string>, std::vector<std::vector<int32_t>>, ...
  template <typename Range>
    requires(!std::is_same_v<Range, std::vector<Prompt>>) && requires(const Range& r) { Prompt(*std::begin(r)); }
  std::vector<RequestOutput> generate(const Range& prompts, const SamplingParams& params = {},
                                      const StreamCallback& on_event = {}) {
    return generate(std::vector<Prompt>(std::begin(prompts), std::end(prompts)), params, on_event);
  }
  template <typename Range>
    requires(!std::is_same_v<Range, std::vector<Prompt>>) && requires(const Range& r) { Prompt(*std::begin(r)); }
  std::vector<RequestOutput> generate(const Range& prompts, const std::vector<SamplingParams>& params,
                                      const StreamCallback& on_event = {}) {
    return generate(std::vector<Prompt>(std::begin(prompts), std::end(prompts)), params, on_event);
  }

  // The same requests, streamed (see GenerationStream).
  GenerationStream generate_stream(const std::vector<Prompt>& prompts, const SamplingParams& params = {});
  GenerationStream generate_stream(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params);

  // Chat completion (vLLM's LLM.chat): each conversation is rendered into the exact prompt the
  // model was trained on, generated from like generate() (every SamplingParams field applies;
  // RequestOutput::prompt is the rendered prompt), and the output is parsed into
  // CompletionOutput::message. The format is ChatOptions::chat_format, else the folder's
  // config.json model_type: deepseek_v3 -> v3 (the Jinja chat_template of tokenizer_config.json),
  // or v3.1 when that template handles </think>; deepseek_v32 -> v3.2; deepseek_v4 -> v4;
  // deepseek_v41 -> v4.1. Message text is tokenized as text: a message that spells a special
  // token ("<｜end▁of▁sentence｜>") never becomes that token. The parser reads the generated tokens
  // with special tokens kept (</think> may be one), whatever skip_special_tokens does to `text`.
  // Needs the folder's tokenizer.
  std::vector<RequestOutput> chat(const Conversation& conversation, const SamplingParams& params = {},
                                  const ChatOptions& options = {}, const StreamCallback& on_event = {});
  // Many conversations at once (batched like generate()); `params` as for generate().
  std::vector<RequestOutput> chat(const std::vector<Conversation>& conversations, const SamplingParams& params = {},
                                  const ChatOptions& options = {}, const StreamCallback& on_event = {});
  std::vector<RequestOutput> chat(const std::vector<Conversation>& conversations,
                                  const std::vector<SamplingParams>& params, const ChatOptions& options = {},
                                  const StreamCallback& on_event = {});
  GenerationStream chat_stream(const std::vector<Conversation>& conversations, const SamplingParams& params = {},
                               const ChatOptions& options = {});
  GenerationStream chat_stream(const std::vector<Conversation>& conversations,
                               const std::vector<SamplingParams>& params, const ChatOptions& options = {});
  // The prompt chat() would generate from, and its ids (message text tokenized as text).
  std::string render_chat(const Conversation& conversation, const ChatOptions& options = {});
  std::vector<int32_t> chat_prompt_ids(const Conversation& conversation, const ChatOptions& options = {});
  std::string chat_format(const ChatOptions& options = {});  // the format chat() uses: "v4", ...

  // Text <-> ids with the model's tokenizer (throws when the folder has none).
  bool has_tokenizer() const;
  std::vector<int32_t> encode(const std::string& text) const;  // BOS as tokenizer_config.json says
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

  int64_t vocab_size() const;
  int64_t context_limit() const;    // positions one sequence may hold (model context, pool permitting)
  size_t kv_memory_bytes() const;   // what the state pool reserved
  int64_t kv_num_blocks() const;
  int64_t kv_block_tokens() const;
  bool batch_invariant() const;
  EngineStats stats() const;        // cumulative over this LLM's generate() calls

 private:
  struct Impl;
  friend struct LLMInternals;  // the server's engine loop (src/serve) drives Impl directly
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
