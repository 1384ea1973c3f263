#include "serve/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace deepinfer::serve {

namespace {

// vLLM's buckets, so histogram_quantile over either engine's series compares like with like.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
          120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> token_buckets() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000};
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// Label values escape backslash, quote and newline (the exposition format's rule).
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t b = 0;
  while (b < bounds_.size() && value > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    const double le = b < bounds_.size() ? bounds_[b] : INFINITY;
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, number(le), cumulative);
  }
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, number(sum_), name, labels, count_);
}

Metrics::Metrics(std::string model_name)
    : model_name_(std::move(model_name)),
      ttft_(ttft_buckets()),
      itl_(itl_buckets()),
      e2e_(e2e_buckets()),
      request_prompt_(token_buckets()),
      request_generation_(token_buckets()) {}

void Metrics::set_engine(const EngineGauges& gauges) {
  std::lock_guard lock(mutex_);
  engine_ = gauges;
}

void Metrics::request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t generation_tokens,
                               double e2e_seconds) {
  std::lock_guard lock(mutex_);
  ++finished_[finish_reason];
  request_prompt_.observe(static_cast<double>(prompt_tokens));
  request_generation_.observe(static_cast<double>(generation_tokens));
  e2e_.observe(e2e_seconds);
}

void Metrics::prompt_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += n;
}

void Metrics::generation_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += n;
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}

void Metrics::http_response(int status) {
  std::lock_guard lock(mutex_);
  ++http_[status];
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  const std::string model = fmt::format("model_name=\"{}\"", escape_label(model_name_));
  std::string out;
  auto gauge = [&](const char* name, const char* help, double value) {
    header(out, name, "gauge", help);
    out += fmt::format("{}{{{}}} {}\n", name, model, number(value));
  };
  // The 0.0.4 text format names a counter with its _total suffix in HELP/TYPE too (as vLLM does).
  auto counter = [&](const char* name, const char* help, double value) {
    header(out, std::string(name) + "_total", "counter", help);
    out += fmt::format("{}_total{{{}}} {}\n", name, model, number(value));
  };
  gauge("deepinfer:num_requests_running", "Sequences running on the engine (one per request, n for a request with n > 1).",
        static_cast<double>(engine_.usage.running));
  gauge("deepinfer:num_requests_waiting", "Sequences waiting to be scheduled (queued or preempted).",
        static_cast<double>(engine_.usage.waiting));
  gauge("deepinfer:kv_cache_usage_perc",
        "Fraction of KV-cache blocks held by live requests (1 = full); cached blocks no request holds are free.",
        engine_.usage.blocks_total ? static_cast<double>(engine_.usage.blocks_in_use) / static_cast<double>(engine_.usage.blocks_total)
                             : 0.0);
  gauge("deepinfer:kv_cache_blocks_in_use", "KV-cache blocks held by live requests.",
        static_cast<double>(engine_.usage.blocks_in_use));
  gauge("deepinfer:kv_cache_blocks_total", "KV-cache blocks in the state pool.", static_cast<double>(engine_.usage.blocks_total));
  gauge("deepinfer:state_slots_in_use", "Sliding-window state slots held by live requests.",
        static_cast<double>(engine_.usage.slots_in_use));
  gauge("deepinfer:state_slots_total", "Sliding-window state slots for requests.", static_cast<double>(engine_.usage.slots_total));
  counter("deepinfer:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(engine_.usage.prefix.queried_tokens));
  counter("deepinfer:prefix_cache_hits", "Prompt tokens served by the prefix cache.",
          static_cast<double>(engine_.usage.prefix.hit_tokens));
  counter("deepinfer:num_preemptions", "Sequences preempted for lack of KV-cache blocks (recomputed later).",
          static_cast<double>(engine_.preemptions));
  counter("deepinfer:prompt_tokens", "Prompt tokens of admitted requests.", static_cast<double>(prompt_tokens_));
  counter("deepinfer:generation_tokens", "Generated tokens.", static_cast<double>(generation_tokens_));

  header(out, "deepinfer:request_success_total", "counter", "Requests ended, by finish reason (stop, length, abort).");
  for (const char* reason : {"stop", "length", "abort"}) {
    const auto it = finished_.find(reason);
    out += fmt::format("deepinfer:request_success_total{{{},finished_reason=\"{}\"}} {}\n", model, reason,
                       it == finished_.end() ? 0 : it->second);
  }
  header(out, "deepinfer:http_responses_total", "counter", "HTTP responses sent, by status code.");
  for (const auto& [status, count] : http_)
    out += fmt::format("deepinfer:http_responses_total{{{},status=\"{}\"}} {}\n", model, status, count);

  header(out, "deepinfer:time_to_first_token_seconds", "histogram", "Seconds from arrival to the first generated token.");
  ttft_.render(out, "deepinfer:time_to_first_token_seconds", model);
  header(out, "deepinfer:inter_token_latency_seconds", "histogram", "Seconds between consecutive generated tokens.");
  itl_.render(out, "deepinfer:inter_token_latency_seconds", model);
  header(out, "deepinfer:e2e_request_latency_seconds", "histogram", "Seconds from arrival to the end of a request.");
  e2e_.render(out, "deepinfer:e2e_request_latency_seconds", model);
  header(out, "deepinfer:request_prompt_tokens", "histogram", "Prompt tokens per finished request.");
  request_prompt_.render(out, "deepinfer:request_prompt_tokens", model);
  header(out, "deepinfer:request_generation_tokens", "histogram", "Generated tokens per finished request.");
  request_generation_.render(out, "deepinfer:request_generation_tokens", model);
  return out;
}

}  // namespace deepinfer::serve
