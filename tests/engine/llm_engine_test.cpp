// LLMEngine on the fake model (fake_model.h): batched outputs equal each request's from-scratch
// reference, stop conditions, seeds, preemption under a small pool, random aborts never leak.
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/error.h"
#include "engine/fake_model.h"
#include "engine/memory_budget.h"

// Designated initialisers name only the fields a test cares about.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace deepinfer::engine {
namespace {

using testing::FakeModel;
using testing::FakeModelOptions;

// What one request must produce: sample the from-scratch logits at each step, stop as the engine
// does (EOS unless ignored, stop ids, max_tokens, context).
std::vector<int32_t> reference(const FakeModel& model, std::vector<int32_t> context, const sampling::SamplingParams& p,
                               int64_t context_limit) {
  sampling::Sampler sampler;
  std::vector<int32_t> out;
  for (int64_t step = 0; step < p.max_tokens; ++step) {
    const int32_t id = sampler.sample(model.reference_logits(context), p, static_cast<uint64_t>(step));
    out.push_back(id);
    context.push_back(id);
    if ((id == 1 && !p.ignore_eos) ||
        std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end())
      break;
    if (static_cast<int64_t>(context.size()) > context_limit) break;
  }
  return out;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t length, int64_t vocab) {
  std::uniform_int_distribution<int32_t> id(2, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (auto& t : p) t = id(rng);
  return p;
}

struct Finished {
  std::vector<int32_t> ids;
  std::string text;
  RequestDelta last;
  std::vector<float> logits;
  int64_t deltas = 0;
};

// Runs the engine to completion, collecting every request's tokens and text.
std::map<uint64_t, Finished> run_all(LLMEngine& engine) {
  std::map<uint64_t, Finished> out;
  while (engine.has_unfinished()) {
    for (auto& d : engine.step()) {
      auto& f = out[d.id];
      f.ids.insert(f.ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
      f.text += d.text;
      f.logits.insert(f.logits.end(), d.logits.begin(), d.logits.end());
      ++f.deltas;
      if (d.finished) f.last = d;
    }
  }
  return out;
}

size_t bytes_for(const FakeModel& model, int64_t slots, int64_t blocks) {
  return kv::StatePool::budget_for(model.state_layout(), slots, blocks);
}

EngineOptions options(int64_t seqs, int64_t budget, size_t memory = size_t(1) << 26) {
  EngineOptions o;
  o.limits.max_num_seqs = seqs;
  o.limits.max_num_batched_tokens = budget;
  o.kv_memory_bytes = memory;
  o.seed = 99;
  return o;
}

sampling::SamplingParams greedy(int64_t max_tokens) {
  sampling::SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  return p;
}

TEST(LLMEngine, ManyRequestsMatchTheirFromScratchReference) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(16, 64));
  std::mt19937 rng(1);
  std::map<uint64_t, std::vector<int32_t>> expected;
  for (int i = 0; i < 40; ++i) {
    auto prompt = random_prompt(rng, 1 + static_cast<int64_t>(rng() % 90), 64);
    RequestParams params;
    params.sampling = greedy(1 + static_cast<int64_t>(rng() % 20));
    params.return_logits = i % 3 == 0;
    const uint64_t id = engine.add_request(prompt, params);
    expected[id] = reference(model, prompt, params.sampling, engine.context_limit());
  }
  const auto got = run_all(engine);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [id, ids] : expected) {
    EXPECT_EQ(got.at(id).ids, ids) << "request " << id;
    EXPECT_EQ(got.at(id).deltas, static_cast<int64_t>(ids.size()));  // one delta per sampled token
  }
  EXPECT_LE(model.max_tokens_per_call, 64);  // the step budget
  EXPECT_EQ(engine.stats().finished_requests, 40);
  EXPECT_EQ(engine.available_blocks(), engine.pool().num_blocks());
  EXPECT_EQ(engine.pool().free_slot_count(), engine.pool().num_slots());
}

TEST(LLMEngine, ReturnedLogitsAreTheModelsRows) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(4, 32));
  const std::vector<int32_t> prompt{0, 9, 4, 33, 7};
  RequestParams params;
  params.sampling = greedy(6);
  params.return_logits = true;
  const uint64_t id = engine.add_request(prompt, params);
  engine.add_request({3, 3, 3}, params);
  const auto got = run_all(engine).at(id);
  ASSERT_EQ(got.logits.size(), 6u * 64u);
  std::vector<int32_t> context = prompt;
  for (size_t k = 0; k < got.ids.size(); ++k) {
    const auto row = model.reference_logits(context);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), got.logits.begin() + static_cast<std::ptrdiff_t>(k * 64)));
    context.push_back(got.ids[k]);
  }
}

TEST(LLMEngine, SmallPoolPreemptsAndGivesTheSameOutputs) {
  FakeModel model;  // 8 positions per block
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) prompts.push_back(random_prompt(rng, 5 + static_cast<int64_t>(rng() % 60), 64));
  auto run = [&](size_t memory, int64_t* preemptions) {
    LLMEngine engine(model, nullptr, options(8, 48, memory));
    std::vector<uint64_t> ids;
    for (const auto& p : prompts) {
      RequestParams params;
      params.sampling.temperature = 0.9;  // sampled: the seed must survive recompute
      params.sampling.max_tokens = 30;
      params.seed = ids.size();
      ids.push_back(engine.add_request(p, params));
    }
    auto got = run_all(engine);
    *preemptions = engine.stats().preemptions;
    EXPECT_EQ(engine.available_blocks(), engine.pool().num_blocks());
    std::vector<std::vector<int32_t>> out;
    for (uint64_t id : ids) out.push_back(got.at(id).ids);
    return out;
  };
  int64_t roomy_preemptions = 0, tight_preemptions = 0;
  const auto roomy = run(bytes_for(model, 8, 1000), &roomy_preemptions);
  // 12 blocks = 96 positions: the longest request (64 + 30) fits alone, 8 of them do not.
  const auto tight = run(bytes_for(model, 8, 12), &tight_preemptions);
  EXPECT_EQ(roomy_preemptions, 0);
  EXPECT_GT(tight_preemptions, 0);
  EXPECT_EQ(tight, roomy);
}

TEST(LLMEngine, RequestThatCannotFitAloneFailsClearly) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(2, 64, bytes_for(model, 2, 4)));  // 32 positions
  EXPECT_EQ(engine.context_limit(), 32);
  try {
    engine.add_request(std::vector<int32_t>(33, 5), RequestParams{.sampling = greedy(4)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state pool holds at most 32 positions"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--kv-memory"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(engine.has_unfinished());
  // One that fits alone runs up to the pool's limit and finishes with "length".
  engine.add_request(std::vector<int32_t>(30, 5), RequestParams{.sampling = greedy(100)});
  const auto got = run_all(engine);
  EXPECT_EQ(got.begin()->second.ids.size(), 3u);  // positions 30, 31 fed; the third token is not
  EXPECT_EQ(got.begin()->second.last.finish_reason, FinishReason::Length);
}

TEST(LLMEngine, StopConditions) {
  FakeModel model(FakeModelOptions{.eos_after = 13});
  LLMEngine engine(model, nullptr, options(4, 64));
  const std::vector<int32_t> prompt(10, 4);
  const uint64_t eos = engine.add_request(prompt, RequestParams{.sampling = greedy(50)});
  auto ignore = greedy(6);
  ignore.ignore_eos = true;
  const uint64_t ignored = engine.add_request(prompt, RequestParams{.sampling = ignore});
  auto got = run_all(engine);
  EXPECT_EQ(got[eos].ids.size(), 4u);  // context 10..13: EOS is the 4th token
  EXPECT_EQ(got[eos].ids.back(), 1);
  EXPECT_EQ(got[eos].last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(got[eos].last.stop_token, 1);
  EXPECT_EQ(got[ignored].ids.size(), 6u);
  EXPECT_EQ(got[ignored].last.finish_reason, FinishReason::Length);
  EXPECT_FALSE(got[ignored].last.stop_token.has_value());

  // A stop token id: generation ends at its first occurrence, which stays in the ids.
  FakeModel free_model;
  LLMEngine free_engine(free_model, nullptr, options(4, 64));
  const uint64_t plain = free_engine.add_request(prompt, RequestParams{.sampling = greedy(8)});
  const auto plain_ids = run_all(free_engine)[plain].ids;
  auto stop = greedy(8);
  stop.stop_token_ids = {plain_ids[2]};
  const uint64_t stopped = free_engine.add_request(prompt, RequestParams{.sampling = stop});
  got = run_all(free_engine);
  const auto first = std::find(plain_ids.begin(), plain_ids.end(), plain_ids[2]);
  EXPECT_EQ(got[stopped].ids, std::vector<int32_t>(plain_ids.begin(), first + 1));
  EXPECT_EQ(got[stopped].last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(got[stopped].last.stop_token, plain_ids[2]);
}

TEST(LLMEngine, StopsAtTheModelsContext) {
  FakeModel model(FakeModelOptions{.context = 12});
  LLMEngine engine(model, nullptr, options(2, 64));
  EXPECT_EQ(engine.context_limit(), 12);
  const uint64_t id = engine.add_request(std::vector<int32_t>(10, 4), RequestParams{.sampling = greedy(50)});
  const auto got = run_all(engine);
  EXPECT_EQ(got.at(id).ids.size(), 3u);  // tokens fed at 10 and 11, then the limit
  EXPECT_THROW(engine.add_request(std::vector<int32_t>(13, 4), RequestParams{.sampling = greedy(5)}), Error);
}

TEST(LLMEngine, RejectsBadRequestsWithoutQueueingThem) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(2, 64));
  EXPECT_THROW(engine.add_request({}, RequestParams{}), Error);
  EXPECT_THROW(engine.add_request({0, 64}, RequestParams{}), Error);
  EXPECT_THROW(engine.add_request({0, -1}, RequestParams{}), Error);
  EXPECT_THROW(engine.add_request({0}, RequestParams{.sampling = {.temperature = -1}}), Error);
  EXPECT_THROW(engine.add_request({0}, RequestParams{.stop = {"x"}}), Error);  // no tokenizer
  EXPECT_FALSE(engine.has_unfinished());
}

TEST(LLMEngine, SeededSamplesDoNotDependOnTheBatch) {
  FakeModel model;
  const std::vector<int32_t> prompt{0, 7, 8, 9};
  RequestParams params;
  params.sampling.temperature = 1.0;
  params.sampling.top_k = 20;
  params.sampling.max_tokens = 24;
  params.seed = 5;
  LLMEngine alone(model, nullptr, options(4, 64));
  const uint64_t a = alone.add_request(prompt, params);
  const auto alone_ids = run_all(alone).at(a).ids;

  LLMEngine crowd(model, nullptr, options(16, 7));  // chunked, shared steps
  std::mt19937 rng(3);
  for (int i = 0; i < 10; ++i) crowd.add_request(random_prompt(rng, 20, 64), RequestParams{.sampling = greedy(10)});
  const uint64_t b = crowd.add_request(prompt, params);
  for (int i = 0; i < 10; ++i) crowd.add_request(random_prompt(rng, 5, 64), params);
  EXPECT_EQ(run_all(crowd).at(b).ids, alone_ids);
}

TEST(LLMEngine, UnseededRequestsGetDistinctReportedSeeds) {
  FakeModel model;
  LLMEngine engine(model, nullptr, options(8, 64));
  RequestParams params;
  params.sampling.temperature = 1.0;
  params.sampling.max_tokens = 16;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(engine.add_request({0, 5, 6}, params));
  const auto got = run_all(engine);
  std::set<uint64_t> seeds;
  std::set<std::vector<int32_t>> streams;
  for (uint64_t id : ids) {
    seeds.insert(got.at(id).last.seed);
    streams.insert(got.at(id).ids);
  }
  EXPECT_EQ(seeds.size(), 6u);
  EXPECT_EQ(streams.size(), 6u);  // the same prompt, six different continuations
  // The reported seed reproduces the stream.
  LLMEngine again(model, nullptr, options(8, 64));
  params.seed = got.at(ids[3]).last.seed;
  const uint64_t r = again.add_request({0, 5, 6}, params);
  EXPECT_EQ(run_all(again).at(r).ids, got.at(ids[3]).ids);
}

TEST(LLMEngine, AbortAnywhereNeverLeaksAndOthersAreUnaffected) {
  // 2,000 requests over a small pool, aborted at random moments (waiting, mid-prefill, decoding,
  // preempted); the survivors' outputs equal their references and the pool ends entirely free.
  FakeModel model;
  LLMEngine engine(model, nullptr, options(16, 40, bytes_for(model, 16, 40)));
  std::mt19937 rng(2024);
  std::map<uint64_t, std::vector<int32_t>> expected;
  std::set<uint64_t> aborted, live;
  std::map<uint64_t, std::vector<int32_t>> got;
  int added = 0;
  int64_t steps = 0;
  while (added < 2000 || engine.has_unfinished()) {
    for (int k = 0; k < 4 && added < 2000; ++k, ++added) {
      const auto prompt = random_prompt(rng, 1 + static_cast<int64_t>(rng() % 40), 64);
      RequestParams params{.sampling = greedy(1 + static_cast<int64_t>(rng() % 24))};
      const uint64_t id = engine.add_request(prompt, params);
      expected[id] = reference(model, prompt, params.sampling, engine.context_limit());
      live.insert(id);
    }
    for (int k = 0; k < 3 && !live.empty(); ++k) {
      if (rng() % 3) continue;
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      EXPECT_TRUE(engine.abort(*it));
      aborted.insert(*it);
      live.erase(it);
    }
    for (auto& d : engine.step()) {
      auto& ids = got[d.id];
      ids.insert(ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
      if (d.finished) live.erase(d.id);
    }
    ++steps;
    const auto& pool = engine.pool();
    int64_t held = 0;
    for (const Sequence* s : engine.scheduler().active()) held += s->num_blocks();
    ASSERT_EQ(held + engine.available_blocks(), pool.num_blocks()) << "step " << steps;
  }
  EXPECT_EQ(engine.pool().free_slot_count(), engine.pool().num_slots());
  EXPECT_EQ(engine.available_blocks(), engine.pool().num_blocks());
  EXPECT_GT(aborted.size(), 200u);
  EXPECT_GT(engine.stats().preemptions, 0);
  EXPECT_EQ(engine.stats().aborted_requests, static_cast<int64_t>(aborted.size()));
  EXPECT_EQ(engine.stats().finished_requests + engine.stats().aborted_requests, 2000);
  EXPECT_FALSE(engine.abort(*aborted.begin()));
  for (const auto& [id, ids] : expected)
    if (!aborted.count(id)) {
      EXPECT_EQ(got[id], ids) << "request " << id;
    }
}

TEST(LLMEngine, ReserveFullPolicyGivesTheSameOutputsWithoutPreempting) {
  FakeModel model;
  std::mt19937 rng(11);
  auto opts = options(8, 48, bytes_for(model, 8, 14));
  opts.policy = PolicyKind::ReserveFull;
  LLMEngine engine(model, nullptr, opts);
  std::map<uint64_t, std::vector<int32_t>> expected;
  for (int i = 0; i < 20; ++i) {
    const auto prompt = random_prompt(rng, 5 + static_cast<int64_t>(rng() % 50), 64);
    RequestParams params{.sampling = greedy(20)};
    expected[engine.add_request(prompt, params)] = reference(model, prompt, params.sampling, 1 << 20);
  }
  const auto got = run_all(engine);
  for (const auto& [id, ids] : expected) EXPECT_EQ(got.at(id).ids, ids);
  EXPECT_EQ(engine.stats().preemptions, 0);
}

// --- text, stop strings (the kjv tokenizer over a fake model with its vocabulary) ---

class EngineText : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = new Tokenizer(Tokenizer::from_model_dir(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4"));
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* EngineText::tokenizer_ = nullptr;

TEST_F(EngineText, DeltasConcatenateToTheDecodedText) {
  FakeModel model(FakeModelOptions{.vocab = static_cast<int64_t>(tokenizer_->vocab_size()), .eos_after = 40});
  LLMEngine engine(model, tokenizer_, options(4, 64));
  RequestParams params{.sampling = {.temperature = 1.0, .max_tokens = 100}, .seed = 3};
  const uint64_t id = engine.add_request(tokenizer_->encode_with_bos("In the beginning"), params);
  const auto got = run_all(engine).at(id);
  ASSERT_EQ(got.last.finish_reason, FinishReason::Stop);
  const std::vector<int32_t> without_eos(got.ids.begin(), got.ids.end() - 1);
  EXPECT_EQ(got.text, tokenizer_->decode(without_eos, /*skip_special_tokens=*/true));
  EXPECT_FALSE(got.text.empty());
}

TEST_F(EngineText, StopStringsAreTrimmedAndEndGeneration) {
  FakeModel model(FakeModelOptions{.vocab = static_cast<int64_t>(tokenizer_->vocab_size())});
  const auto prompt = tokenizer_->encode_with_bos("And God said");
  RequestParams params{.sampling = {.temperature = 1.0, .max_tokens = 60}, .seed = 8};
  LLMEngine plain_engine(model, tokenizer_, options(4, 64));
  const uint64_t pid = plain_engine.add_request(prompt, params);
  const auto full = run_all(plain_engine).at(pid);
  ASSERT_GE(full.text.size(), 40u);

  // Stop strings cut at different places: inside a token, across two tokens, at the very start.
  for (const size_t at : {size_t(3), full.text.size() / 2, full.text.size() - 7}) {
    for (const size_t len : {size_t(1), size_t(2), size_t(5)}) {
      std::string stop = full.text.substr(at, len);
      if (stop.find_first_not_of(' ') == std::string::npos) continue;
      // Complete UTF-8 only.
      if ((static_cast<unsigned char>(stop.front()) & 0xC0) == 0x80 ||
          (static_cast<unsigned char>(full.text[at + len]) & 0xC0) == 0x80)
        continue;
      LLMEngine engine(model, tokenizer_, options(4, 64));
      RequestParams with_stop = params;
      with_stop.stop = {"never appears \x01", stop};
      const uint64_t id = engine.add_request(prompt, with_stop);
      std::string streamed;
      RequestDelta last;
      std::vector<int32_t> ids;
      while (engine.has_unfinished())
        for (auto& d : engine.step()) {
          EXPECT_EQ(d.text.find(stop), std::string::npos) << "a delta showed the stop string";
          streamed += d.text;
          ids.insert(ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
          if (d.finished) last = d;
        }
      const size_t first = full.text.find(stop);
      EXPECT_EQ(streamed, full.text.substr(0, first)) << "stop '" << stop << "'";
      EXPECT_EQ(last.finish_reason, FinishReason::Stop);
      EXPECT_EQ(last.stop_string, stop);
      EXPECT_FALSE(last.stop_token.has_value());
      // The ids end with the token that completed the stop string, a prefix of the full run.
      ASSERT_LE(ids.size(), full.ids.size());
      EXPECT_TRUE(std::equal(ids.begin(), ids.end(), full.ids.begin()));
      EXPECT_GE(tokenizer_->decode(ids, true).size(), first + stop.size());
      EXPECT_LT(tokenizer_->decode(std::vector<int32_t>(ids.begin(), ids.end() - 1), true).size(), first + stop.size());
      (void)id;
    }
  }
}

TEST(OutputText, HoldsBackOnlyWhatMayStartAStopString) {
  const auto tokenizer = Tokenizer::from_model_dir(std::string(DEEPINFER_MODELS_DIR) + "/kjv-tiny-v4");
  OutputText text(&tokenizer, true, {"xyz"});
  auto push_text = [&](const std::string& s) {
    for (int32_t id : tokenizer.encode(s)) text.push(id);
  };
  push_text("abc");
  EXPECT_EQ(text.take_delta(), "abc");
  push_text(" x");
  EXPECT_EQ(text.take_delta(), " ");  // "x" may begin "xyz"
  push_text("y");
  EXPECT_EQ(text.take_delta(), "");
  push_text("q");
  EXPECT_EQ(text.take_delta(), "xyq");
  EXPECT_FALSE(text.stopped());
  EXPECT_FALSE(text.flush());
}

TEST(MemoryBudget, ParsesBytesSuffixesAndFractions) {
  EXPECT_EQ(parse_memory_size("1048576"), 1048576u);
  EXPECT_EQ(parse_memory_size("512M"), 512u << 20);
  EXPECT_EQ(parse_memory_size("2G"), size_t(2) << 30);
  EXPECT_EQ(parse_memory_size("2GiB"), size_t(2) << 30);
  EXPECT_EQ(parse_memory_size("1.5g"), size_t(3) << 29);
  EXPECT_EQ(parse_memory_size("64k"), 64u << 10);
  const size_t ram = physical_memory_bytes();
  ASSERT_GT(ram, 0u);
  EXPECT_EQ(parse_memory_size("0.5"), static_cast<size_t>(0.5 * static_cast<double>(ram)));
  EXPECT_EQ(parse_memory_size("25%"), static_cast<size_t>(0.25 * static_cast<double>(ram)));
  EXPECT_EQ(default_kv_memory_bytes(), static_cast<size_t>(kDefaultKvMemoryFraction * static_cast<double>(ram)));
  for (const char* bad : {"", "G", "abc", "1.5", "2X", "-1G", "0", "0.0", "150%", "1.2.3G", "1e9", "1.5B"})
    EXPECT_THROW(parse_memory_size(bad), Error) << bad;
}

// ---------------------------------------------------------------- prefix caching

// One request at a time through an engine, returning its finished record.
Finished run_one(LLMEngine& engine, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  RequestParams params{.sampling = greedy(max_tokens)};
  const uint64_t id = engine.add_request(prompt, params);
  return run_all(engine).at(id);
}

TEST(LLMEngine, ExactPrefixCacheSnapshotsABranchPointForTheNextSequence) {
  FakeModel model;  // blocks of 8 positions
  EngineOptions o = options(2, 64);
  o.swa_replay_keep = 0;  // exact
  o.snapshot_slots = 6;
  LLMEngine engine(model, nullptr, o);
  std::mt19937 rng(3);
  const auto shared = random_prompt(rng, 16, 64);  // two blocks
  auto with_tail = [&] {
    auto p = shared;
    const auto tail = random_prompt(rng, 13, 64);  // its own last block boundary is at 24, past the branch
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  const auto a = with_tail(), b = with_tail(), c = with_tail();
  for (const auto& [prompt, cached] : {std::pair{a, 0}, std::pair{b, 0}, std::pair{c, 16}}) {
    const Finished got = run_one(engine, prompt, 6);
    EXPECT_EQ(got.ids, reference(model, prompt, greedy(6), engine.context_limit()));
    EXPECT_EQ(got.last.num_cached_tokens, cached);
  }
  // b matched a's two blocks but no snapshot ended there (a's prompt went on): shortened to 0, and
  // its prefill stopped at the branch point so that c could hit exactly.
  EXPECT_EQ(engine.prefix_cache()->stats().shortened_hits, 1);
  EXPECT_GE(engine.prefix_cache()->stats().snapshots_taken, 3);
}

TEST(LLMEngine, CachedPrefixSurvivesChurnOfNeverCachedBlocks) {
  FakeModel model;
  // 2 slots and 12 blocks: the cached prefix holds 3 of them.
  LLMEngine engine(model, nullptr, options(2, 64, bytes_for(model, 2, 12)));
  std::mt19937 rng(9);
  const auto prefix = random_prompt(rng, 24, 64);
  auto first = prefix;
  first.push_back(7);
  run_one(engine, first, 2);
  // Many short requests (never a full block) churn through the free blocks.
  for (int i = 0; i < 40; ++i) run_one(engine, random_prompt(rng, 4, 64), 3);
  EXPECT_EQ(engine.prefix_cache()->stats().evicted_blocks, 0) << "free blocks must go before cached ones";
  auto again = prefix;
  again.push_back(9);
  EXPECT_EQ(run_one(engine, again, 2).last.num_cached_tokens, 24);
  // Long requests need every block: then the cached ones are evicted, least recent first.
  for (int i = 0; i < 4; ++i) run_one(engine, random_prompt(rng, 80, 64), 4);
  EXPECT_GT(engine.prefix_cache()->stats().evicted_blocks, 0);
  EXPECT_EQ(engine.available_blocks(), engine.pool().num_blocks());
}

TEST(LLMEngine, BoundedReplayRecomputesKeepTokensAndNeverWritesCachedBlocks) {
  FakeModel model;  // window 8: keep 8 is the smallest allowed
  EngineOptions o = options(2, 64);
  o.swa_replay_keep = 8;
  LLMEngine engine(model, nullptr, o);
  std::mt19937 rng(5);
  auto prompt = random_prompt(rng, 30, 64);
  run_one(engine, prompt, 3);
  const int64_t before = engine.stats().computed_prompt_tokens;
  // The fake model checks that entries of cached blocks hold their tokens and that no written
  // block is shared in a step; the context hash restarts at the replay start (window floor).
  const Finished got = run_one(engine, prompt, 3);
  EXPECT_EQ(got.last.num_cached_tokens, 24);
  EXPECT_EQ(engine.stats().computed_prompt_tokens - before, 8 + 6);  // replay 16..24, then 24..30
  EXPECT_EQ(engine.stats().replayed_tokens, 8);
  const std::vector<int32_t> replayed(prompt.begin() + 16, prompt.end());
  EXPECT_EQ(got.ids, reference(model, replayed, greedy(3), engine.context_limit()));
  o.swa_replay_keep = 7;
  EXPECT_THROW(LLMEngine(model, nullptr, o), Error);
}

}  // namespace
}  // namespace deepinfer::engine
