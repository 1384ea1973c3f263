#pragma once
// Attention data parallelism with MoE expert parallelism, the way DeepSeek serves V4: N ranks, each
// with its own model instance, LLMEngine (scheduler, state pool, prefix cache) and share of the
// routed experts (dist::ExpertParallelMoe over one EpTransport end). A request goes to the rank with
// the fewest unfinished requests and stays there. Every step(), all ranks step in lockstep: a rank
// with work runs its engine's step (one forward, whose MoE layers exchange rows with the other
// ranks), a rank without runs CausalLM::moe_idle_step so it still serves its experts. Every
// `rebalance_every` steps the ranks re-plan expert placement from their load windows (EPLB).
//
// Ranks are threads of this process over dist::LocalHub here (the CPU backend in CI; one GPU per
// rank needs one process per GPU with the NCCL transport, dist/nccl/nccl_transport.h).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dist/ep_moe.h"
#include "dist/ep_transport.h"
#include "engine/llm_engine.h"
#include "engine/request_engine.h"

namespace deepinfer::dp {

struct DataParallelOptions {
  engine::EngineOptions engine;  // for every rank's engine
  int64_t rebalance_every = 0;   // steps between EPLB rebalances; 0: never
  int64_t rebalance_slots = 0;   // physical expert slots per layer after a rebalance; 0: the starting count
  int64_t load_window_steps = 64;
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // a rank missing a collective
};

struct RankStats {
  int64_t requests = 0;     // requests placed on the rank (DataParallelEngine)
  int64_t busy_steps = 0;   // steps it ran its engine
  int64_t idle_steps = 0;   // steps it only served its experts
  dist::ExpertParallelStats ep;
};

// One rank: its engine and share of the experts over one transport end. step() is collective: every
// rank calls it once per step (a thread per rank over dist::LocalHub, as DataParallelEngine does, or
// a process per GPU over the NCCL transport); the ranks first all-gather whether any has work, so
// they agree on running a step without a coordinator.
class DataParallelRank {
 public:
  // `model` gets this rank's executor until destruction; model, transport and tokenizer outlive it.
  DataParallelRank(model::CausalLM& model, dist::EpTransport& transport, const Tokenizer* tokenizer,
                   const DataParallelOptions& options);
  ~DataParallelRank();
  DataParallelRank(const DataParallelRank&) = delete;
  DataParallelRank& operator=(const DataParallelRank&) = delete;

  engine::LLMEngine& engine() { return *engine_; }
  const engine::LLMEngine& engine() const { return *engine_; }
  // Runs this rank's engine step (one forward) or, without work, an idle step serving its experts;
  // every `rebalance_every` steps all ranks re-plan the experts. Returns false, running nothing,
  // when no rank has work. On failure the other ranks are aborted with the error, and it rethrows.
  bool step(std::vector<engine::RequestDelta>& deltas);
  int64_t steps() const { return steps_; }
  RankStats stats() const;  // with the executor's row counts
  const dist::ExpertPlacement& placement() const { return ep_->placement(); }

 private:
  model::CausalLM& model_;
  dist::EpTransport& transport_;
  DataParallelOptions options_;
  std::unique_ptr<dist::ExpertParallelMoe> ep_;
  std::unique_ptr<engine::LLMEngine> engine_;
  int64_t steps_ = 0;
  RankStats stats_;  // busy / idle steps (ep filled in by stats())
};

// Makes rank `rank`'s end of the transport, on that rank's thread with its device current (NCCL's
// communicators are made so, every rank at once).
using TransportFactory = std::function<std::unique_ptr<dist::EpTransport>(int rank, int world)>;

// Ranks as threads of this process, behind the engine interface GenerationRun and the server drive
// (EngineConfig::data_parallel_size). Everything of rank r (its transport end, engine and state
// pool, every forward, and their teardown) runs on rank r's own thread, which makes r's device
// current once: on GPUs a thread per GPU, over NCCL.
class DataParallelEngine final : public engine::RequestEngine {
 public:
  // models[r] is rank r's model (the same checkpoint on each; DeepSeek-V4), on its own device.
  // `tokenizer` may be null. `make_transport` empty: the ranks exchange rows through host memory
  // (dist::LocalHub). Throws the first rank's error when a rank cannot be set up.
  DataParallelEngine(std::vector<std::unique_ptr<model::CausalLM>> models, const Tokenizer* tokenizer,
                     DataParallelOptions options = {}, TransportFactory make_transport = {});
  ~DataParallelEngine() override;
  DataParallelEngine(const DataParallelEngine&) = delete;
  DataParallelEngine& operator=(const DataParallelEngine&) = delete;

  int data_parallel_size() const { return static_cast<int>(ranks_.size()); }
  // As LLMEngine::add_request, on the least loaded rank (lowest rank of equals); returns an id of
  // this engine (ranks' own ids are not exposed).
  uint64_t add_request(std::vector<int32_t> prompt, engine::RequestParams params) override;
  bool abort(uint64_t id) override;
  // One lockstep step of every rank (none when no rank has work); the deltas of all ranks, rank 0's
  // first, with this engine's ids. A rank's failure stops the others and is rethrown here.
  std::vector<engine::RequestDelta> step() override;
  bool has_unfinished() const override;
  int64_t context_limit() const override { return ranks_[0]->rank->engine().context_limit(); }
  // The ranks' counters added up, but `steps`: the lockstep steps that ran (every rank's forward or
  // idle step at once).
  engine::EngineStats stats() const override;
  engine::EngineUsage usage() const override;  // the ranks' pools added up

  int rank_of(uint64_t id) const;
  RankStats rank_stats(int rank) const;
  const dist::ExpertPlacement& placement() const;  // rank 0's (every rank holds the same)
  const engine::LLMEngine& rank_engine(int rank) const { return ranks_[static_cast<size_t>(rank)]->rank->engine(); }

 private:
  struct Rank {  // destroyed in reverse: the rank before its transport and model
    std::unique_ptr<model::CausalLM> model;
    std::unique_ptr<dist::EpTransport> transport;
    std::unique_ptr<DataParallelRank> rank;
    struct Live {
      uint64_t global_id = 0;
      int64_t completions_left = 0;  // sampling.n, counted down by finished deltas
    };
    std::unordered_map<uint64_t, Live> live;  // by the rank engine's id
    std::vector<engine::RequestDelta> deltas;         // of the last step
    std::exception_ptr error;
    int64_t requests = 0;
    std::thread thread;
  };
  // Rank r's thread: sets the rank up (reporting through `ready_`), steps it when asked, tears it
  // down at the end.
  void rank_loop(Rank& r, int index, const Tokenizer* tokenizer, const TransportFactory& make_transport);

  DataParallelOptions options_;
  std::unique_ptr<dist::LocalHub> hub_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unordered_map<uint64_t, std::pair<int, uint64_t>> where_;  // global id -> (rank, rank's id)
  uint64_t next_id_ = 1;
  std::string failed_;  // set once a rank failed: the engine is unusable
  int64_t steps_ = 0;
  // The step handshake: the caller bumps generation_; each rank steps once and counts itself done.
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int done_ = 0;
  int ready_ = 0;  // ranks set up (or failed to be) at construction
  bool stopping_ = false;
};

}  // namespace deepinfer::dp
