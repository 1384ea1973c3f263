// `deepinfer bench`: the engine's own forward (CausalLM::forward over a ForwardBatch and a
// StatePool) timed on one device, every number next to its floor measured in the same run:
// decode step time at several batch sizes over a long context, prefill tokens/s at several prompt
// lengths. Floors: bytes of weights and state the step touches / copy bandwidth, FLOPs / bf16
// GEMM rate (backend/ceilings.h), whichever is larger; the ratio ours/floor is printed beside.
//
// Long contexts for many sequences: identical prompts give identical state, so one sequence is
// prefilled and its slot and blocks are copied to the others (said so in the output).
#include <fmt/format.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/ceilings.h"
#include "backend/cpu/sample_rows.h"
#include "core/buffer.h"
#include "cli/bench_cost.h"
#include "cli/command.h"
#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Args {
  std::string model, device = "cuda", batches = "1,8,32,128", prefills = "2048,8192", ties = "reference";
  std::string json_path, attention_schedule = "auto";
  int64_t context = 4096, steps = 8, warmup = 2, prefill_runs = 3, greedy = 0;
  uint64_t seed = 1;
  bool profile = false;
  bool enforce_eager = false;
  bool batch_invariant = false;  // --batch-invariant, or DEEPINFER_BATCH_INVARIANT=1
};

std::vector<int64_t> parse_list(const std::string& text, const char* what) {
  std::vector<int64_t> out;
  if (text.empty() || text == "none") return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    size_t used = 0;
    const int64_t v = item.empty() ? 0 : std::stoll(item, &used);
    DEEPINFER_CHECK(used == item.size() && v > 0, "--{}: '{}' is not a positive integer", what, item);
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string human(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.0f} KB", bytes / 1e3);
}

std::string rate(double bytes_per_s) {
  return bytes_per_s >= 1e11 ? fmt::format("{:.2f} TB/s", bytes_per_s / 1e12) : fmt::format("{:.1f} GB/s", bytes_per_s / 1e9);
}

std::string flop(double f) { return f >= 1e11 ? fmt::format("{:.2f} TFLOP", f / 1e12) : fmt::format("{:.2f} GFLOP", f / 1e9); }

std::string ms(double s) { return s >= 0.1 ? fmt::format("{:.1f} ms", s * 1e3) : fmt::format("{:.3f} ms", s * 1e3); }

// A sequence of the benchmark: its slot, block table and length.
struct Seq {
  int32_t slot = 0;
  std::vector<int32_t> blocks;
  int64_t length = 0;
};

struct Floor {
  double seconds = 0, bytes_s = 0, flops_s = 0;
  std::string what;
};

Floor floor_of(const StepCost& c, const backend::DeviceCeilings& ceil) {
  Floor f;
  f.bytes_s = ceil.copy_bytes_per_s > 0 ? c.bytes() / ceil.copy_bytes_per_s : 0;
  f.flops_s = ceil.gemm_flops_per_s > 0 ? c.flops / ceil.gemm_flops_per_s : 0;
  f.seconds = std::max(f.bytes_s, f.flops_s);
  const std::string bytes_text =
      fmt::format("{} ({} weights, {} state; {:.1f} experts/layer) / {}", human(c.bytes()), human(c.weight_bytes),
                  human(c.state_bytes), c.experts_per_layer, rate(ceil.copy_bytes_per_s));
  const std::string flops_text =
      ceil.gemm_flops_per_s > 0 ? fmt::format("{} / {:.0f} TFLOP/s", flop(c.flops), ceil.gemm_flops_per_s / 1e12)
                                : fmt::format("{} (no GEMM ceiling)", flop(c.flops));
  f.what = f.flops_s > f.bytes_s ? "FLOPs: " + flops_text + "; bytes: " + bytes_text
                                 : "bytes: " + bytes_text + "; FLOPs: " + flops_text;
  return f;
}

class Bench {
 public:
  Bench(const Args& a, const model::CausalLM& m, const backend::DeviceCeilings& ceil, const WeightCensus& census)
      : a_(a), m_(m), be_(m.backend()), c_(m.config()), layout_(m.state_layout()), ceil_(ceil), census_(census),
        rng_(a.seed) {}

  json results = json::object();

  // Greedy ids of a fixed prompt (for comparing devices).
  void greedy() {
    kv::StatePool pool(layout_, 1, layout_.blocks_for(32 + a_.greedy + 1), be_.allocator());
    Seq s = take(pool, 32 + a_.greedy + 1);
    std::vector<int32_t> ids = random_tokens(32), out;
    std::vector<float> logits;
    for (int64_t i = 0; i < a_.greedy; ++i) {
      run(pool, {&s}, {ids}, logits);
      const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(best);
      ids = {best};
    }
    std::string text;
    for (int32_t id : out) text += (text.empty() ? "" : " ") + std::to_string(id);
    fmt::print("greedy ids ({} tokens after a 32-token prompt, seed {}): {}\n", a_.greedy, a_.seed, text);
    results["greedy_ids"] = out;
  }

  void decode(const std::vector<int64_t>& batches) {
    const int64_t max_b = *std::max_element(batches.begin(), batches.end());
    const int64_t span = a_.context + a_.warmup + a_.steps + 2;
    kv::StatePool pool(layout_, max_b, max_b * layout_.blocks_for(span), be_.allocator());
    std::vector<Seq> seqs;
    for (int64_t i = 0; i < max_b; ++i) seqs.push_back(take(pool, span));

    // One real prefill of the context, then its state copied to every other sequence.
    std::vector<float> logits;
    const auto prompt = random_tokens(a_.context);
    be_.synchronize();
    const auto t0 = Clock::now();
    run(pool, {&seqs[0]}, {prompt}, logits);
    be_.synchronize();
    const double prefill_s = seconds_since(t0);
    const int64_t nb = layout_.blocks_for(a_.context);
    std::vector<std::byte> slot(layout_.slot_bytes()), blocks(static_cast<size_t>(nb) * layout_.block_bytes());
    const auto st = pool.storage();
    be_.copy_to_host(slot.data(), st.slot(seqs[0].slot), slot.size());
    for (int64_t b = 0; b < nb; ++b)
      be_.copy_to_host(blocks.data() + b * layout_.block_bytes(), st.block(seqs[0].blocks[static_cast<size_t>(b)]),
                       layout_.block_bytes());
    auto restore = [&](int64_t count) {
      for (int64_t i = 0; i < count; ++i) {
        Seq& s = seqs[static_cast<size_t>(i)];
        be_.copy_to_backend(st.slot(s.slot), slot.data(), slot.size());
        for (int64_t b = 0; b < nb; ++b)
          be_.copy_to_backend(st.block(s.blocks[static_cast<size_t>(b)]), blocks.data() + b * layout_.block_bytes(),
                              layout_.block_bytes());
        s.length = a_.context;
      }
      be_.synchronize();
    };
    fmt::print("context: sequence 0 prefilled with {} tokens in {:.2f} s ({:.0f} tok/s, one run incl. first-use "
               "allocations); its slot ({}) and {} blocks ({}) copied to the other {} sequences before each batch: "
               "identical prompts give identical state\n",
               a_.context, prefill_s, static_cast<double>(a_.context) / prefill_s, human(slot.size()), nb,
               human(blocks.size()), max_b - 1);
    results["context"] = {{"tokens", a_.context}, {"prefill_s", prefill_s}, {"copied_to", max_b - 1},
                          {"note", "one sequence prefilled; slot and blocks copied to the others"}};

    for (int64_t B : batches) {
      restore(B);
      std::vector<Seq*> active;
      for (int64_t i = 0; i < B; ++i) active.push_back(&seqs[static_cast<size_t>(i)]);
      std::vector<double> times;
      double copy_diff = -1;
      const backend::StepGraphStats graphs_before = be_.step_graph_stats();
      // Step 0, untimed, gives every sequence the same token and brings the logits to the host: the
      // copies must then give the logits of sequence 0 (a check of the state copy). The warm-up and
      // timed steps give each sequence its own token and sample greedily where the logits are, as
      // the engine's decode step does (forward_sampled): B x vocab floats never cross PCIe.
      std::vector<int32_t> sampled;
      for (int64_t step = 0; step < 1 + a_.warmup + a_.steps; ++step) {
        std::vector<std::vector<int32_t>> toks(1, random_tokens(1));
        for (int64_t i = 1; i < B; ++i) toks.push_back(step == 0 ? toks[0] : random_tokens(1));
        be_.synchronize();
        const auto t = Clock::now();
        if (step == 0) run(pool, active, toks, logits);
        else run_sampled(pool, active, toks, sampled);
        be_.synchronize();
        if (step > a_.warmup) times.push_back(seconds_since(t));
        if (step == 0 && B > 1) copy_diff = max_row_diff(logits, 0, B - 1);
      }
      const backend::StepGraphStats graphs = be_.step_graph_stats();
      const int64_t replays = graphs.replays - graphs_before.replays;
      const int64_t eager_steps = graphs.eager - graphs_before.eager;
      const double replay_host = replays ? (graphs.replay_host_s - graphs_before.replay_host_s) / replays : 0;
      const double eager_host = eager_steps ? (graphs.eager_host_s - graphs_before.eager_host_s) / eager_steps : 0;
      if (a_.profile) profile_step(pool, active);
      const double step_s = median(times);
      const StepCost cost = decode_cost(census_, c_, layout_, B, a_.context);
      report(fmt::format("decode B={}, ctx {}", B, a_.context),
             fmt::format("{}/step ({:.0f} tok/s)", ms(step_s), static_cast<double>(B) / step_s), step_s,
             floor_of(cost, ceil_), cost,
             {{"kind", "decode"}, {"batch", B}, {"context", a_.context}, {"step_s", step_s}, {"times_s", times},
              {"tok_s", static_cast<double>(B) / step_s}, {"copy_check_max_logit_diff", copy_diff},
              {"cuda_graph_replays", replays}, {"replay_host_s", replay_host}, {"eager_host_s", eager_host}});
      fmt::print("  cuda graphs: {} of {} steps replayed ({} captured, {} mismatched, {} padded to a recorded size){}; "
                 "host code per step: replayed {}, eager {}\n",
                 replays, 1 + a_.warmup + a_.steps, graphs.captures - graphs_before.captures,
                 graphs.mismatches - graphs_before.mismatches, graphs.padded_steps - graphs_before.padded_steps,
                 a_.enforce_eager ? " (--enforce-eager)" : "",
                 replays ? ms(replay_host) : "-", eager_steps ? ms(eager_host) : "-");
      if (B > 1)
        fmt::print("  state-copy check: same token in all {} sequences, max |logit difference| sequence 0 vs {}: {:.3g}\n",
                   B, B - 1, copy_diff);
      compare_sampling(B, logits);
    }
  }

  // The last step's logits rows sampled where they are (Backend::sample) and on the host (copy the
  // rows down, then cpu::sample_rows, as the engine does when a row needs the host): time and tokens.
  void compare_sampling(int64_t B, const std::vector<float>& logits) {
    const int64_t V = c_.vocab_size;
    if (static_cast<int64_t>(logits.size()) != B * V) return;
    Buffer device(logits.size() * sizeof(float), be_.allocator());
    be_.copy_to_backend(device.data(), logits.data(), logits.size() * sizeof(float));
    const TensorView view = device.view(DType::F32, {B, V});
    std::vector<float> host(logits.size());
    struct Mode {
      const char* name;
      backend::SampleRow row;
    };
    backend::SampleRow top_p, peaked, top_k;
    top_p.temperature = 1.0, top_p.top_p = 0.9;
    peaked.temperature = 0.1, peaked.top_p = 0.95;  // a small nucleus, as a trained model's often is
    top_k.temperature = 0.8, top_k.top_k = 50;
    const std::array<Mode, 4> modes = {Mode{"greedy", {}}, Mode{"T 1, top-p 0.9", top_p},
                                       Mode{"T 0.1, top-p 0.95", peaked}, Mode{"T 0.8, top-k 50", top_k}};
    json entry = json::array();
    for (const Mode& mode : modes) {
      std::vector<backend::SampleRow> rows(static_cast<size_t>(B), mode.row);
      for (int64_t i = 0; i < B; ++i) rows[static_cast<size_t>(i)].uniform = (static_cast<double>(i) + 0.5) / B;
      std::vector<int32_t> on_device(static_cast<size_t>(B)), on_host(static_cast<size_t>(B));
      std::vector<double> device_s, host_s;
      for (int r = 0; r < 6; ++r) {  // the first of each is a warm-up
        be_.synchronize();
        auto t = Clock::now();
        be_.sample(view, rows, on_device);
        if (r) device_s.push_back(seconds_since(t));
        t = Clock::now();
        be_.copy_to_host(host.data(), device.data(), host.size() * sizeof(float));
        cpu::sample_rows(host, V, rows, on_host);
        if (r) host_s.push_back(seconds_since(t));
      }
      int64_t differ = 0;
      for (int64_t i = 0; i < B; ++i) differ += on_device[static_cast<size_t>(i)] != on_host[static_cast<size_t>(i)];
      fmt::print("  sampling {} rows ({}): on the backend {}, on the host {} (copy + cpu::sample_rows); tokens "
                 "differing: {}\n",
                 B, mode.name, ms(median(device_s)), ms(median(host_s)), differ);
      entry.push_back({{"mode", mode.name}, {"backend_s", median(device_s)}, {"host_s", median(host_s)},
                       {"tokens_differing", differ}});
    }
    results["sampling"][std::to_string(B)] = entry;
  }

  void prefill(const std::vector<int64_t>& lengths) {
    const int64_t max_p = *std::max_element(lengths.begin(), lengths.end());
    kv::StatePool pool(layout_, 1, layout_.blocks_for(max_p), be_.allocator());
    Seq s = take(pool, max_p);
    std::vector<float> logits;
    for (int64_t P : lengths) {
      const auto prompt = random_tokens(P);
      std::vector<double> times;
      for (int64_t r = 0; r < 1 + a_.prefill_runs; ++r) {
        s.length = 0;  // a fresh sequence in the same slot and blocks
        be_.synchronize();
        const auto t = Clock::now();
        run(pool, {&s}, {prompt}, logits);
        be_.synchronize();
        if (r >= 1) times.push_back(seconds_since(t));
      }
      const double run_s = median(times);
      const StepCost cost = prefill_cost(census_, c_, layout_, P);
      report(fmt::format("prefill {}", P),
             fmt::format("{:.0f} tok/s ({:.3f} s)", static_cast<double>(P) / run_s, run_s), run_s,
             floor_of(cost, ceil_), cost,
             {{"kind", "prefill"}, {"tokens", P}, {"run_s", run_s}, {"times_s", times},
              {"tok_s", static_cast<double>(P) / run_s}});
    }
  }

  void print_table() const {
    fmt::print("\n| what | ours | floor | ours/floor | floor from |\n|---|---:|---:|---:|---|\n");
    for (const auto& r : rows_) fmt::print("| {} | {} | {} | {} | {} |\n", r[0], r[1], r[2], r[3], r[4]);
  }

 private:
  Seq take(kv::StatePool& pool, int64_t positions) {
    Seq s;
    s.slot = *pool.allocate_slot();
    DEEPINFER_CHECK(pool.allocate_blocks(layout_.blocks_for(positions), s.blocks), "bench: state pool too small");
    return s;
  }

  double max_row_diff(const std::vector<float>& logits, int64_t a, int64_t b) const {
    const auto V = static_cast<size_t>(c_.vocab_size);
    double d = 0;
    for (size_t j = 0; j < V; ++j)
      d = std::max(d, static_cast<double>(std::fabs(logits[static_cast<size_t>(a) * V + j] - logits[static_cast<size_t>(b) * V + j])));
    return d;
  }

  std::vector<int32_t> random_tokens(int64_t n) {
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(c_.vocab_size - 1));
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng_);
    return v;
  }

  // One forward: every sequence's new tokens, logits of each one's last token.
  void run(kv::StatePool& pool, const std::vector<Seq*>& seqs, const std::vector<std::vector<int32_t>>& tokens,
           std::vector<float>& logits) {
    m_.forward(batch_of(seqs, tokens), pool, logits);
    advance(seqs, tokens);
  }

  // One decode step as the engine runs it: greedy tokens drawn on the backend from its logits rows.
  void run_sampled(kv::StatePool& pool, const std::vector<Seq*>& seqs, const std::vector<std::vector<int32_t>>& tokens,
                   std::vector<int32_t>& sampled) {
    const std::vector<backend::SampleRow> greedy(seqs.size());
    m_.forward_sampled(batch_of(seqs, tokens), pool, greedy, sampled);
    advance(seqs, tokens);
  }

  static model::ForwardBatch batch_of(const std::vector<Seq*>& seqs, const std::vector<std::vector<int32_t>>& tokens) {
    model::ForwardBatch batch;
    for (size_t i = 0; i < seqs.size(); ++i) batch.add(seqs[i]->slot, seqs[i]->blocks, seqs[i]->length, tokens[i]);
    return batch;
  }
  static void advance(const std::vector<Seq*>& seqs, const std::vector<std::vector<int32_t>>& tokens) {
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->length += static_cast<int64_t>(tokens[i].size());
  }

  // One more step inside a profiler range (ncu --profile-from-start off), outside the timings.
  void profile_step(kv::StatePool& pool, const std::vector<Seq*>& seqs) {
    std::vector<std::vector<int32_t>> toks;
    for (size_t i = 0; i < seqs.size(); ++i) toks.push_back(random_tokens(1));
    be_.synchronize();
    std::vector<int32_t> sampled;
    backend::profiler_start(a_.device);
    run_sampled(pool, seqs, toks, sampled);
    backend::profiler_stop(a_.device);
    fmt::print("profiled one decode step of batch {}\n", seqs.size());
  }

  void report(const std::string& what, const std::string& ours, double ours_s, const Floor& f, const StepCost& cost,
              json row) {
    const std::string ratio = f.seconds > 0 ? fmt::format("{:.1f}x", ours_s / f.seconds) : "-";
    rows_.push_back({what, ours, f.seconds > 0 ? ms(f.seconds) : "-", ratio, f.what});
    row["floor_s"] = f.seconds;
    row["floor_bytes_s"] = f.bytes_s;
    row["floor_flops_s"] = f.flops_s;
    row["weight_bytes"] = cost.weight_bytes;
    row["state_bytes"] = cost.state_bytes;
    row["flops"] = cost.flops;
    row["experts_per_layer"] = cost.experts_per_layer;
    row["ratio"] = f.seconds > 0 ? ours_s / f.seconds : 0.0;
    results["rows"].push_back(row);
    fmt::print("{}: {} (floor {}, {})\n", what, ours, f.seconds > 0 ? ms(f.seconds) : "-", ratio);
    std::fflush(stdout);
  }

  const Args& a_;
  const model::CausalLM& m_;
  backend::Backend& be_;
  const io::ModelConfig& c_;
  const kv::StateLayout& layout_;
  const backend::DeviceCeilings& ceil_;
  const WeightCensus& census_;
  std::mt19937_64 rng_;
  std::vector<std::array<std::string, 5>> rows_;
};

// The DEEPINFER_* variables of this run (kernel choices, thresholds), so a log says what it timed.
std::string deepinfer_settings() {
  std::vector<std::string> set;
  for (char** e = environ; e && *e; ++e)
    if (std::string_view(*e).starts_with("DEEPINFER_")) set.emplace_back(*e);
  std::sort(set.begin(), set.end());
  std::string out;
  for (const auto& s : set) out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "defaults (no DEEPINFER_* variable set)" : out;
}

int run_bench(const Args& a) {
  const auto batches = parse_list(a.batches, "batch");
  const auto prefills = parse_list(a.prefills, "prefill");
  DEEPINFER_CHECK(a.ties == "reference" || a.ties == "lower", "--ties is reference or lower, not '{}'", a.ties);
  DEEPINFER_CHECK(a.context >= 1 && a.steps >= 1 && a.warmup >= 0 && a.prefill_runs >= 1,
                  "--context, --steps and --prefill-runs must be positive");

  const backend::DeviceCeilings ceil = backend::measure_ceilings(a.device);
  const io::ModelConfig config = io::load_model_config(a.model);
  const WeightCensus census = weight_census(io::Checkpoint::open(a.model));
  // DEEPINFER_BATCH_INVARIANT=1 as everywhere else (the settings line names it, so it must apply).
  model::LoadOptions options = model::load_options_from_env();
  const bool invariant = a.batch_invariant || options.batch_invariant;
  options.batch_invariant = invariant;
  options.device = a.device;
  options.enforce_eager = a.enforce_eager;
  DEEPINFER_CHECK(a.attention_schedule == "auto" || a.attention_schedule == "split" || a.attention_schedule == "fused" ||
                      a.attention_schedule == "tensor-cores",
                  "--attention-schedule is auto, split, fused or tensor-cores, not '{}'", a.attention_schedule);
  options.attention_schedule = a.attention_schedule == "split"          ? backend::AttentionSchedule::Split
                               : a.attention_schedule == "fused"        ? backend::AttentionSchedule::Fused
                               : a.attention_schedule == "tensor-cores" ? backend::AttentionSchedule::TensorCores
                                                                        : backend::AttentionSchedule::Auto;
  options.top_k_ties = a.ties == "lower" || invariant ? model::TopKTies::LowerIndex : model::TopKTies::Reference;
  auto t = Clock::now();
  auto m = model::load_model(a.model, options);
  const double load_s = seconds_since(t);

  std::string kinds;
  for (auto k : config.layer_types)
    kinds += std::string(kinds.empty() ? "" : ", ") +
             (k == io::AttentionKind::CSA ? "CSA" : k == io::AttentionKind::HCA ? "HCA" : "sliding");
  fmt::print("deepinfer bench\n");
  fmt::print("model     {}: {}, {} layers ({}), hidden {}, {} heads x {}, {} experts top-{} (inter {}), vocab {}\n",
             a.model, config.model_type, config.num_hidden_layers, kinds, config.hidden_size,
             config.num_attention_heads, config.head_dim, config.n_routed_experts, config.num_experts_per_tok,
             config.moe_intermediate_size, config.vocab_size);
  fmt::print("weights   {} stored: {}\n", human(census.total()), census.dtypes);
  fmt::print("device    {}: {}\n", a.device, ceil.device);
  fmt::print("ceilings  copy {} ({}); GEMM {} ({})\n", rate(ceil.copy_bytes_per_s), ceil.copy_how,
             ceil.gemm_flops_per_s > 0 ? fmt::format("{:.0f} TFLOP/s", ceil.gemm_flops_per_s / 1e12) : "-",
             ceil.gemm_how);
  fmt::print("settings  {}; {}\n", deepinfer_settings(),
             invariant ? "batch-invariant (deterministic) mode" : "default (not batch-invariant) mode");
  fmt::print("state     {} per element, blocks of {} positions ({}), slots of {}\n", dtype_name(m->state_layout().dtype),
             m->state_layout().block_tokens, human(static_cast<double>(m->state_layout().block_bytes())),
             human(static_cast<double>(m->state_layout().slot_bytes())));
  fmt::print("timing    decode: median of {} steps after {} warm-up, each sequence its own random token; prefill: "
             "median of {} runs after 1 warm-up; device synchronised around every timed region; top-k ties: {}\n",
             a.steps, a.warmup, a.prefill_runs, invariant ? "lower (batch-invariant)" : a.ties);

  Bench bench(a, *m, ceil, census);
  // Warm-up: the first forward mirrors every weight onto the device; keep that out of the timings.
  t = Clock::now();
  {
    kv::StatePool pool(m->state_layout(), 1, m->state_layout().blocks_for(16), m->backend().allocator());
    model::ForwardBatch batch;
    std::vector<int32_t> blocks;
    const int32_t slot = *pool.allocate_slot();
    DEEPINFER_CHECK(pool.allocate_blocks(m->state_layout().blocks_for(16), blocks), "bench: warm-up pool");
    std::vector<int32_t> ids(16, 1);
    batch.add(slot, blocks, 0, ids);
    std::vector<float> logits;
    m->forward(batch, pool, logits);
    m->backend().synchronize();
  }
  fmt::print("load      {:.1f} s (mmap + page touch), first forward {:.1f} s (weights to the device)\n", load_s,
             seconds_since(t));
  std::fflush(stdout);

  bench.results["model"] = a.model;
  bench.results["device"] = ceil.device;
  bench.results["settings"] = deepinfer_settings();
  bench.results["copy_bytes_per_s"] = ceil.copy_bytes_per_s;
  bench.results["gemm_flops_per_s"] = ceil.gemm_flops_per_s;
  bench.results["copy_how"] = ceil.copy_how;
  bench.results["gemm_how"] = ceil.gemm_how;
  bench.results["weights_bytes"] = census.total();
  bench.results["ties"] = invariant ? "lower" : a.ties;
  bench.results["batch_invariant"] = invariant;
  bench.results["rows"] = json::array();
  if (a.greedy > 0) bench.greedy();
  if (!batches.empty()) bench.decode(batches);
  if (!prefills.empty()) bench.prefill(prefills);
  bench.print_table();
  if (!a.json_path.empty()) {
    std::ofstream out(a.json_path);
    DEEPINFER_CHECK(out.good(), "cannot write {}", a.json_path);
    out << bench.results.dump(1) << "\n";
  }
  return 0;
}

const CommandRegistration kRegistration{{
    "bench",
    "Time decode steps and prefills of a model on one device, next to floors measured in the same run",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<Args>();
      sub.add_option("--model", args->model, "model folder (config.json + safetensors)")->required();
      sub.add_option("--device", args->device, "cpu or cuda")->capture_default_str();
      sub.add_option("--batch", args->batches, "decode batch sizes, comma separated ('none' to skip)")
          ->capture_default_str();
      sub.add_option("--context", args->context, "tokens in each sequence before the timed decode steps")
          ->capture_default_str();
      sub.add_option("--prefill", args->prefills, "prompt lengths to time, comma separated ('none' to skip)")
          ->capture_default_str();
      sub.add_option("--steps", args->steps, "timed decode steps per batch size (median)")->capture_default_str();
      sub.add_option("--warmup", args->warmup, "untimed decode steps before them")->capture_default_str();
      sub.add_option("--prefill-runs", args->prefill_runs, "timed prefills per length (median)")
          ->capture_default_str();
      sub.add_option("--ties", args->ties, "top-k ties: reference (the default engine policy) or lower")
          ->capture_default_str();
      sub.add_option("--greedy", args->greedy, "also print N greedy ids after a fixed prompt (device comparison)");
      sub.add_option("--seed", args->seed, "token ids of prompts and decode steps")->capture_default_str();
      sub.add_option("--json", args->json_path, "also write the results to this file");
      sub.add_flag("--enforce-eager", args->enforce_eager,
                   "launch every decode step kernel by kernel (default: CUDA graphs after the first two steps of "
                   "a batch size, which the warm-up steps take)");
      sub.add_option("--attention-schedule", args->attention_schedule,
                     "how sparse attention runs on the GPU: auto (by the step's tokens), split (CUDA cores, a CTA per "
                     "128-key split, then a combine), fused (CUDA cores, one CTA per token and head; the same bits "
                     "as split) or tensor-cores (32 heads of a token per CTA; float32 precision, other low bits)")
          ->capture_default_str();
      sub.add_flag("--batch-invariant", args->batch_invariant,
                   "time the batch-invariant deterministic mode (every row's bits independent of the batch; also "
                   "DEEPINFER_BATCH_INVARIANT=1)");
      sub.add_flag("--profile", args->profile,
                   "run one more decode step per batch size inside a profiler range (ncu --profile-from-start off)");
      return [args] { return run_bench(*args); };
    },
}};

}  // namespace
}  // namespace deepinfer::cli
