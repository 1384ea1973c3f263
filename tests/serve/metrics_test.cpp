// Prometheus text rendering: cumulative buckets, _sum/_count, counters with _total.
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace deepinfer::serve {
namespace {

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.render(out, "x", "m=\"a\"");
  EXPECT_EQ(out,
            "x_bucket{m=\"a\",le=\"0.1\"} 1\n"
            "x_bucket{m=\"a\",le=\"1\"} 3\n"
            "x_bucket{m=\"a\",le=\"+Inf\"} 4\n"
            "x_sum{m=\"a\"} 8.05\n"
            "x_count{m=\"a\"} 4\n");
}

TEST(Metrics, RenderNamesCountersWithTotalAndEscapesLabels) {
  Metrics m("we\"ird");
  m.prompt_tokens(5);
  m.request_finished("stop", 5, 2, 0.3);
  m.set_engine({.usage = {.running = 1, .waiting = 2, .blocks_total = 10, .blocks_in_use = 4}});
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE deepinfer:prompt_tokens_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("deepinfer:prompt_tokens_total{model_name=\"we\\\"ird\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("deepinfer:kv_cache_usage_perc{model_name=\"we\\\"ird\"} 0.4\n"), std::string::npos);
  EXPECT_NE(text.find("deepinfer:request_success_total{model_name=\"we\\\"ird\",finished_reason=\"stop\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("deepinfer:num_requests_waiting{model_name=\"we\\\"ird\"} 2\n"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::serve
