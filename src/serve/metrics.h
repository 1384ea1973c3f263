#pragma once
// Server metrics in Prometheus' text format (version 0.0.4), named after vLLM's where vLLM has
// one (vllm:num_requests_running -> deepinfer:num_requests_running, ...), so dashboards and alerts
// written for vLLM need only the prefix changed. Updated by the engine loop and the HTTP
// handlers; rendered by GET /metrics. Thread-safe.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request_engine.h"

namespace deepinfer::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name` with `labels` (`key="value",...`, no braces).
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the engine loop reads off the engine after each step: its pools (blocks and slots held by
// live sequences; cached-only blocks count as free) and its preemptions so far.
struct EngineGauges {
  engine::EngineUsage usage;
  int64_t preemptions = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void set_engine(const EngineGauges& gauges);
  void request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t generation_tokens,
                        double e2e_seconds);
  void prompt_tokens(int64_t n);
  void generation_tokens(int64_t n);
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void http_response(int status);

  std::string render() const;
  std::string model_name() const { return model_name_; }

 private:
  const std::string model_name_;
  mutable std::mutex mutex_;
  EngineGauges engine_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, int64_t> finished_;  // by finish reason
  std::map<int, int64_t> http_;              // by status code
  Histogram ttft_, itl_, e2e_, request_prompt_, request_generation_;
};

}  // namespace deepinfer::serve
