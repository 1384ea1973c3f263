// Tokens drawn on the backend (LLMEngine's steps whose rows need nothing on the host: the logits
// stay where the model computed them, Backend::sample draws) equal the tokens the host path draws
// from downloaded rows: greedy, temperature, top-k, top-p, min-p and guided decoding, on the kjv
// model, batched. Asking for logprobs sends every row of a step to the host, which gives the
// comparison. Runs on the backend DEEPINFER_DEVICE names (tools/gpu/test.sh: cuda).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/llm.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";

std::vector<SamplingParams> mixed_params(uint64_t seed) {
  std::vector<SamplingParams> out;
  for (int i = 0; i < 24; ++i) {
    SamplingParams p;
    p.max_tokens = 20;
    p.ignore_eos = true;
    p.seed = seed + static_cast<uint64_t>(i);
    switch (i % 6) {
      case 0: p.temperature = 0; break;
      case 1: p.temperature = 0.8; p.top_k = 20; break;
      case 2: p.temperature = 1.0; p.top_p = 0.9; break;
      case 3: p.temperature = 1.3; p.min_p = 0.05; break;
      case 4: p.temperature = 0.7; p.top_k = 50; p.top_p = 0.8; p.min_p = 0.02; break;
      case 5:
        p.temperature = 1.0;
        p.structured_outputs.regex = "(And|For|But) [a-z]+( [a-z]+)*\\.";
        p.ignore_eos = false;
        break;
    }
    out.push_back(p);
  }
  return out;
}

TEST(BackendSampling, SameTokensAsTheHostPath) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<std::string> prompts = {"And God said", "In the beginning", "The LORD is my shepherd",
                                            "Blessed are the meek", "And Jesus answered", "Then said"};
  std::vector<std::string> all;
  for (int i = 0; i < 24; ++i) all.push_back(prompts[static_cast<size_t>(i) % prompts.size()]);
  auto params = mixed_params(seed);

  LLM backend_llm(kKjv);
  const auto on_backend = backend_llm.generate(all, params);
  EXPECT_GT(backend_llm.stats().backend_sampled_steps, 0);

  for (auto& p : params) p.logprobs = 1;  // every row to the host
  LLM host_llm(kKjv);
  const auto on_host = host_llm.generate(all, params);
  EXPECT_EQ(host_llm.stats().backend_sampled_steps, 0);

  ASSERT_EQ(on_backend.size(), on_host.size());
  for (size_t i = 0; i < on_host.size(); ++i) {
    EXPECT_EQ(on_backend[i].outputs[0].token_ids, on_host[i].outputs[0].token_ids) << "request " << i;
    EXPECT_FALSE(on_backend[i].outputs[0].token_ids.empty());
  }
}

}  // namespace
}  // namespace deepinfer
