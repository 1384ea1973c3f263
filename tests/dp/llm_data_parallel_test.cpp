// EngineConfig::data_parallel_size through the public API (deepinfer::LLM, what `generate
// --data-parallel-size` and `serve --data-parallel-size` build): text prompts, chat, streaming,
// stop strings and n > 1 over data-parallel ranks give one engine's outputs (batch-invariant
// numerics), with and without EPLB re-plans and redundant experts; the pools add up; the options
// that cannot work are refused with a message that names them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "deepinfer/llm.h"

namespace deepinfer {
namespace {

const std::string kKjv = std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4";
const std::string kFixtures = std::string(DEEPINFER_TEST_DATA_DIR) + "/fixtures";

EngineConfig config(int64_t ranks) {
  EngineConfig c;
  c.batch_invariant = true;  // the ranks' batches differ from one engine's: the forward must not care
  c.data_parallel_size = ranks;
  c.max_num_seqs = 8;
  c.kv_memory_bytes = size_t{64} << 20;
  c.seed = 7;
  return c;
}

// Greedy and seeded prompts of different lengths (one outlasts the others, so some ranks go idle
// while it decodes), a stop string and n = 2.
std::vector<SamplingParams> params_for(size_t n) {
  std::vector<SamplingParams> out;
  for (size_t i = 0; i < n; ++i) {
    SamplingParams p;
    p.max_tokens = i == 0 ? 40 : 4 + static_cast<int64_t>(i % 5) * 3;
    p.ignore_eos = true;
    if (i % 3 == 1) {
      p.temperature = 0.9;
      p.seed = 100 + i;
    } else {
      p.temperature = 0;
    }
    if (i == 2) p.stop = {"the"};
    if (i == 4) {
      p.n = 2;
      p.temperature = 0.7;
      p.seed = 5;
    }
    out.push_back(p);
  }
  return out;
}

const std::vector<Prompt> kPrompts = {"In the beginning God created", "The LORD is my shepherd;", "And God said,",
                                      "Blessed are the meek:", "Jesus wept.", "For God so loved the world",
                                      "Let there be light", "Vanity of vanities"};

using Completions = std::vector<std::vector<std::pair<std::vector<int32_t>, std::string>>>;

Completions completions(const std::vector<RequestOutput>& outs) {
  Completions c;
  for (const auto& o : outs) {
    c.emplace_back();
    for (const auto& x : o.outputs) c.back().emplace_back(x.token_ids, x.text + "|" + x.finish_reason);
  }
  return c;
}

TEST(LLMDataParallel, RanksGiveOneEnginesOutputs) {
  const auto params = params_for(kPrompts.size());
  const Completions want = completions(LLM(kKjv, config(1)).generate(kPrompts, params));
  ASSERT_EQ(want.size(), kPrompts.size());
  ASSERT_EQ(want[4].size(), 2u);
  for (int64_t ranks : {2, 3}) {
    for (bool eplb : {false, true}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks" + (eplb ? ", EPLB every 3 steps with 2 redundant experts" : ""));
      EngineConfig c = config(ranks);
      c.enable_eplb = eplb;
      c.eplb_step_interval = 3;
      c.eplb_window_size = 4;
      c.num_redundant_experts = eplb ? 2 : 0;
      LLM llm(kKjv, c);
      EXPECT_EQ(completions(llm.generate(kPrompts, params)), want);
      const EngineStats s = llm.stats();
      EXPECT_GE(s.steps, 40) << "lockstep steps: request 0 decodes 40 tokens";
      EXPECT_LT(s.steps, 80);
      EXPECT_GT(s.generated_tokens, 40 + 7 * 4);
      // A second call on the same engine (ranks, pools and placement carried over) agrees too.
      EXPECT_EQ(completions(llm.generate(kPrompts, params)), want);
    }
  }
}

TEST(LLMDataParallel, ChatAndStreamingOverRanks) {
  const std::vector<Conversation> chats = {{{"user", "Who is my shepherd?"}}, {{"user", "What did God create?"}},
                                           {{"user", "Who wept?"}}};
  SamplingParams p;
  p.max_tokens = 12;
  p.temperature = 0;
  LLM one(kKjv, config(1)), two(kKjv, config(2));
  const auto want = one.chat(chats, p);
  const auto got = two.chat(chats, p);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].prompt_token_ids, want[i].prompt_token_ids) << i;
    EXPECT_EQ(got[i].outputs[0].token_ids, want[i].outputs[0].token_ids) << i;
    EXPECT_EQ(got[i].outputs[0].text, want[i].outputs[0].text) << i;
  }
  // Streamed events concatenate to the same tokens.
  GenerationStream stream = two.generate_stream({"In the beginning", "And the earth"}, p);
  std::vector<std::vector<int32_t>> streamed(2);
  while (auto e = stream.next()) streamed[e->index].insert(streamed[e->index].end(), e->new_token_ids.begin(),
                                                            e->new_token_ids.end());
  const auto direct = one.generate({"In the beginning", "And the earth"}, p);
  EXPECT_EQ(streamed[0], direct[0].outputs[0].token_ids);
  EXPECT_EQ(streamed[1], direct[1].outputs[0].token_ids);
}

TEST(LLMDataParallel, PoolsAddUpOverRanks) {
  LLM one(kKjv, config(1)), three(kKjv, config(3));
  EXPECT_EQ(three.kv_num_blocks(), 3 * one.kv_num_blocks());
  EXPECT_EQ(three.kv_memory_bytes(), 3 * one.kv_memory_bytes());
  EXPECT_EQ(three.kv_block_tokens(), one.kv_block_tokens());
  EXPECT_EQ(three.context_limit(), one.context_limit());
  EXPECT_EQ(three.vocab_size(), one.vocab_size());
}

void expect_refused(const std::string& model, EngineConfig c, const std::string& words) {
  try {
    LLM llm(model, c);
    ADD_FAILURE() << "accepted; expected an error with '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(LLMDataParallel, RefusesWhatCannotWork) {
  EngineConfig eplb_alone = config(1);
  eplb_alone.enable_eplb = true;
  expect_refused(kKjv, eplb_alone, "needs data_parallel_size > 1");
  EngineConfig redundant = config(2);
  redundant.num_redundant_experts = 4;
  expect_refused(kKjv, redundant, "set enable_eplb too");
  expect_refused(kKjv, config(0), "data_parallel_size must be in [1, 64], got 0");
  EngineConfig window = config(2);
  window.enable_eplb = true;
  window.eplb_window_size = 0;
  expect_refused(kKjv, window, "eplb_window_size");
  expect_refused(kFixtures + "/v41_tiny_fp8", config(2), "not deepseek_v41");
  EngineConfig cuda = config(2);
  cuda.device = "cuda";
  expect_refused(kKjv, cuda, "puts one rank on each GPU");
}

}  // namespace
}  // namespace deepinfer
