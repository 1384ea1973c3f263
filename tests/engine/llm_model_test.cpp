// The public LLM on the real models: 64 prompts of mixed lengths submitted at once give, with
// batch-invariant numerics, bit-identical logits and the same greedy ids as each prompt run alone
// through the single-sequence path (one forward for the prompt, then one per token); in default
// mode the greedy ids still agree on kjv (and, with the model on a GPU, equal the CPU backend's).
// A pool too small for all of them preempts and still gives the same outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "deepinfer/llm.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";
const fs::path kFixtures = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";
constexpr int64_t kGenerated = 8;

struct Alone {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // the row each id was picked from
};

std::vector<std::vector<int32_t>> mixed_prompts(int64_t count, int64_t min_len, int64_t max_len, int64_t vocab,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> length(min_len, max_len);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(vocab - 1));
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < count; ++i) {
    // Spread the lengths over the whole range (the ends included), in shuffled order.
    const int64_t n = i == 0 ? min_len : i == 1 ? max_len : length(rng);
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = id(rng);
    p[0] = 0;  // BOS
    prompts.push_back(std::move(p));
  }
  std::shuffle(prompts.begin(), prompts.end(), rng);
  return prompts;
}

// Each prompt on its own: one forward for the whole prompt, then one per generated token.
std::vector<Alone> run_alone(const model::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts) {
  const auto vocab = static_cast<size_t>(model.vocab_size());
  std::vector<Alone> out;
  std::vector<float> logits;
  for (const auto& prompt : prompts) {
    Alone a;
    auto state = model.new_sequence();
    model.forward(*state, prompt, logits);
    for (int64_t k = 0; k < kGenerated; ++k) {
      const std::span<const float> row(logits.data() + logits.size() - vocab, vocab);
      a.logits.insert(a.logits.end(), row.begin(), row.end());
      a.ids.push_back(sampling::argmax(row));
      if (k + 1 < kGenerated) model.forward(*state, std::span<const int32_t>(&a.ids.back(), 1), logits);
    }
    out.push_back(std::move(a));
  }
  return out;
}

SamplingParams greedy_with_logits() {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = kGenerated;
  p.ignore_eos = true;
  p.return_logits = true;
  return p;
}

std::unique_ptr<model::CausalLM> load(const fs::path& dir, bool batch_invariant) {
  model::LoadOptions options;
  options.batch_invariant = batch_invariant;
  options.top_k_ties = batch_invariant ? model::TopKTies::LowerIndex : model::TopKTies::Reference;
  return model::load_model(dir, options);
}

// Compares every prompt's batched output with its alone run: ids always, logits bit for bit
// when `bitwise`. Returns the number of prompts that differ.
int compare(const std::vector<RequestOutput>& batched, const std::vector<Alone>& alone,
            const std::vector<std::vector<int32_t>>& prompts, bool bitwise, const std::string& what) {
  int differing = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    const auto& c = batched[i].outputs.at(0);
    bool same = c.token_ids == alone[i].ids;
    EXPECT_EQ(c.token_ids, alone[i].ids) << what << ": prompt " << i << " (" << prompts[i].size() << " tokens)";
    if (bitwise) {
      const bool bits = c.logits.size() == alone[i].logits.size() &&
                        std::memcmp(c.logits.data(), alone[i].logits.data(), c.logits.size() * sizeof(float)) == 0;
      if (!bits) {
        // Name the first step whose logits row differs.
        const size_t vocab = alone[i].logits.size() / kGenerated;
        size_t step = 0;
        while (step < kGenerated && c.logits.size() >= (step + 1) * vocab &&
               std::memcmp(c.logits.data() + step * vocab, alone[i].logits.data() + step * vocab,
                           vocab * sizeof(float)) == 0)
          ++step;
        ADD_FAILURE() << what << ": prompt " << i << " (" << prompts[i].size()
                      << " tokens): logits differ from the alone run first at generated token " << step;
      }
      same = same && bits;
    }
    differing += same ? 0 : 1;
  }
  return differing;
}

struct Case {
  fs::path dir;
  int64_t min_len, max_len;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.dir.filename().string(); }

class BatchedEqualsAlone : public ::testing::TestWithParam<Case> {};

TEST_P(BatchedEqualsAlone, BatchInvariantLogitsBitIdentical) {
  const Case& c = GetParam();
  const auto model = load(c.dir, /*batch_invariant=*/true);
  const auto prompts = mixed_prompts(64, c.min_len, c.max_len, model->vocab_size(), 17);
  const auto alone = run_alone(*model, prompts);

  EngineConfig config;
  config.max_num_seqs = 64;
  config.max_num_batched_tokens = 512;  // prefill chunks of later prompts share steps with decodes
  config.batch_invariant = true;
  LLM llm(c.dir, config);
  ASSERT_TRUE(llm.batch_invariant());
  const auto batched = llm.generate(prompts, greedy_with_logits());
  EXPECT_EQ(compare(batched, alone, prompts, /*bitwise=*/true, c.dir.filename().string()), 0);
  EXPECT_EQ(llm.stats().preemptions, 0);
  EXPECT_GT(llm.stats().steps, kGenerated);

  // (b) A pool far too small for all sequences (16 slots; blocks for the longest alone, about a
  // sixteenth of what all need, and at least one per slot): preemption by recompute, same outputs.
  const auto& layout = model->state_layout();
  int64_t longest = 0, all = 0;
  for (const auto& p : prompts) {
    const int64_t blocks = layout.blocks_for(static_cast<int64_t>(p.size()) + kGenerated);
    longest = std::max(longest, blocks);
    all += blocks;
  }
  EngineConfig tight = config;
  tight.max_num_seqs = 16;
  const int64_t blocks = std::max({longest, all / 16, int64_t(16)});
  tight.kv_memory_bytes = kv::StatePool::budget_for(layout, 16, blocks);
  LLM small(c.dir, tight);
  ASSERT_EQ(small.kv_num_blocks(), blocks);
  const auto constrained = small.generate(prompts, greedy_with_logits());
  EXPECT_GT(small.stats().preemptions, 0) << blocks << " blocks";
  EXPECT_EQ(compare(constrained, alone, prompts, /*bitwise=*/true, c.dir.filename().string() + " small pool"), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, BatchedEqualsAlone,
                         ::testing::Values(Case{kKjv, 10, 600}, Case{kFixtures / "v4_tiny_a", 10, 240},
                                           Case{kFixtures / "v4_tiny_b", 10, 240}),
                         [](const auto& info) { return info.param.dir.filename().string() == "kjv-tiny-v4"
                                                           ? std::string("kjv")
                                                           : info.param.dir.filename().string(); });

TEST(BatchedDefaultMode, GreedyIdsMatchAloneOnKjv) {
  const auto model = load(kKjv, /*batch_invariant=*/false);
  const auto prompts = mixed_prompts(64, 10, 600, model->vocab_size(), 23);
  const auto alone = run_alone(*model, prompts);
  EngineConfig config;
  config.max_num_seqs = 64;
  config.max_num_batched_tokens = 512;
  config.batch_invariant = false;
  LLM llm(kKjv, config);
  ASSERT_FALSE(llm.batch_invariant());
  const auto batched = llm.generate(prompts, greedy_with_logits());
  EXPECT_EQ(compare(batched, alone, prompts, /*bitwise=*/false, "kjv default"), 0);
  // On a GPU (DEEPINFER_DEVICE=cuda) the batched ids are also the CPU backend's, prompt by prompt.
  if (model->backend().name() != "cpu") {
    model::LoadOptions cpu;
    cpu.device = "cpu";
    const auto on_cpu = run_alone(*model::load_model(kKjv, cpu), prompts);
    EXPECT_EQ(compare(batched, on_cpu, prompts, /*bitwise=*/false, "kjv batched on the device vs alone on the cpu"), 0);
  }
}

// DeepSeek-V4.1 through the public API: with swa_replay_keep = 0 (exact) 16 mixed prompts batched
// give the logits of each alone; with a keep of 8 (the fixture's window; at 16 its one decoder layer
// already sees all it reads), decoder bounded replay changes the prompts longer than 8 tokens, and
// a chunked prefill gives the same bits as one chunk.
TEST(LLMApiV41, ExactReplayEqualsAloneAndBoundedReplayCutsOnlyLongPrompts) {
  const fs::path dir = kFixtures / "v41_tiny_fp8";
  const auto model = load(dir, /*batch_invariant=*/true);
  const auto prompts = mixed_prompts(16, 10, 200, model->vocab_size(), 29);
  const auto alone = run_alone(*model, prompts);
  EngineConfig config;
  config.max_num_seqs = 16;
  config.max_num_batched_tokens = 1024;  // every prompt in one chunk, so the replay applies to all long ones
  config.batch_invariant = true;
  config.swa_replay_keep = 0;
  LLM exact(dir, config);
  EXPECT_EQ(compare(exact.generate(prompts, greedy_with_logits()), alone, prompts, /*bitwise=*/true, "v41 exact"), 0);

  config.swa_replay_keep = 8;
  config.enable_prefix_caching = false;  // the prompts share no blocks; keep the replay to the decoder's
  LLM bounded(dir, config);
  const auto out = bounded.generate(prompts, greedy_with_logits());
  int long_prompts = 0, changed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& got = out[i].outputs.at(0).logits;
    ASSERT_EQ(got.size(), alone[i].logits.size());
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "prompt " << i;
    const bool same = std::memcmp(got.data(), alone[i].logits.data(), got.size() * sizeof(float)) == 0;
    ++long_prompts;  // every prompt has at least 10 tokens
    changed += same ? 0 : 1;
  }
  // Chunked prefill (16-token steps): the decoder still starts at each prompt's end - keep, whichever
  // chunk that falls in, so the outputs are those of the one-chunk run bit for bit.
  config.max_num_batched_tokens = 16;
  LLM chunked(dir, config);
  const auto chunked_out = chunked.generate(prompts, greedy_with_logits());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& a = chunked_out[i].outputs.at(0).logits;
    const auto& b = out[i].outputs.at(0).logits;
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << "prompt " << i << " (" << prompts[i].size() << " tokens): chunked bounded replay differs";
  }
  EXPECT_EQ(changed, long_prompts) << "bounded replay left some long prompts' logits unchanged";
}

TEST(LLMApi, TextPromptsStopStringsOrderAndTiming) {
  EngineConfig config;
  config.max_num_seqs = 4;
  config.seed = 1;
  LLM llm(kKjv, config);
  ASSERT_TRUE(llm.has_tokenizer());
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 48;
  // The golden continuation of prompt1 (see the model's README): " will not forget thy law: ..."
  const std::string prompt = "Psalms 23:1 The LORD is my shepherd; I";
  SamplingParams stop = greedy;
  stop.stop = {" law"};
  std::vector<SamplingParams> per_prompt{greedy, stop, greedy};
  per_prompt[2].max_tokens = 3;
  std::vector<std::string> events;
  const auto out = llm.generate(std::vector<std::string>{prompt, prompt, "Genesis 1:1 In the beginning"}, per_prompt,
                                [&](const StreamEvent& e) { events.push_back(std::to_string(e.index) + e.text); });
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].index, i);
  EXPECT_EQ(out[0].prompt, prompt);
  EXPECT_EQ(out[0].prompt_token_ids, llm.encode(prompt));
  EXPECT_EQ(out[0].outputs[0].text.rfind(" will not forget thy law: neither", 0), 0u) << out[0].outputs[0].text;
  EXPECT_EQ(out[0].outputs[0].finish_reason, "length");
  EXPECT_EQ(out[0].outputs[0].token_ids.size(), 48u);
  EXPECT_EQ(out[1].outputs[0].text, " will not forget thy");
  EXPECT_EQ(out[1].outputs[0].finish_reason, "stop");
  EXPECT_EQ(out[1].outputs[0].stop_string, " law");
  EXPECT_EQ(out[2].outputs[0].token_ids.size(), 3u);
  for (const auto& o : out) {
    EXPECT_GT(o.metrics.time_to_first_token, 0);
    EXPECT_GE(o.metrics.total_time, o.metrics.time_to_first_token);
    EXPECT_TRUE(o.finished);
  }
  EXPECT_FALSE(events.empty());
  EXPECT_EQ(llm.stats().generated_tokens, 48 + static_cast<int64_t>(out[1].outputs[0].token_ids.size()) + 3);

  // Errors name the prompt and queue nothing.
  SamplingParams bad = greedy;
  bad.top_p = 2;
  try {
    llm.generate(std::vector<std::string>{"a", "b"}, std::vector<SamplingParams>{greedy, bad});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 1: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  SamplingParams none = greedy;
  none.n = 0;  // n >= 1 completions per prompt
  EXPECT_THROW(llm.generate(std::vector<std::string>{"a"}, none), std::runtime_error);
  EXPECT_THROW(llm.generate(std::vector<std::string>{""}, greedy), std::runtime_error);
  EXPECT_THROW(llm.generate(std::vector<std::vector<int32_t>>{{0, 4096}}, greedy), std::runtime_error);
  EXPECT_TRUE(llm.generate(std::vector<std::string>{}, greedy).empty());
  // Still usable afterwards, and deterministic.
  const auto again = llm.generate({prompt}, greedy);
  EXPECT_EQ(again[0].outputs[0].token_ids, out[0].outputs[0].token_ids);
}

TEST(LLMApi, UnseededPromptsDrawDifferentStreams) {
  LLM llm(kKjv);
  SamplingParams p;
  p.temperature = 1.0;
  p.max_tokens = 24;
  p.ignore_eos = true;
  const auto out = llm.generate(std::vector<std::string>(4, "And God said"), p);
  std::set<std::vector<int32_t>> streams;
  std::set<uint64_t> seeds;
  for (const auto& o : out) {
    streams.insert(o.outputs[0].token_ids);
    seeds.insert(o.outputs[0].seed);
  }
  EXPECT_EQ(seeds.size(), 4u);
  EXPECT_EQ(streams.size(), 4u);
  // A reported seed reproduces its stream, alone or in another batch.
  p.seed = out[2].outputs[0].seed;
  EXPECT_EQ(llm.generate({"And God said"}, p)[0].outputs[0].token_ids, out[2].outputs[0].token_ids);
}

}  // namespace
}  // namespace deepinfer
