#include "dp/data_parallel_engine.h"

#include <algorithm>

#include "core/error.h"
#include "dist/expert_placement.h"

namespace deepinfer::dp {

// ---------------------------------------------------------------- one rank

DataParallelRank::DataParallelRank(model::CausalLM& model, dist::EpTransport& transport, const Tokenizer* tokenizer,
                                   const DataParallelOptions& options)
    : model_(model), transport_(transport), options_(options) {
  const auto& cfg = model.config();
  DEEPINFER_CHECK(cfg.n_routed_experts > 0, "data parallelism with expert parallelism needs an MoE model");
  DEEPINFER_CHECK(options_.rebalance_every >= 0 && options_.rebalance_slots >= 0,
                  "rebalance_every and rebalance_slots must be >= 0");
  ep_ = std::make_unique<dist::ExpertParallelMoe>(
      transport, dist::uniform_placement(cfg.num_hidden_layers, cfg.n_routed_experts, transport.world_size()),
      options_.load_window_steps);
  model_.set_moe_executor(ep_.get());
  engine::EngineOptions eo = options_.engine;
  if (eo.seed) *eo.seed += static_cast<uint64_t>(transport.rank()) * 0x9e3779b97f4a7c15ull;  // ranks' derived seeds differ
  engine_ = std::make_unique<engine::LLMEngine>(model_, tokenizer, eo);
}

DataParallelRank::~DataParallelRank() { model_.set_moe_executor(nullptr); }

RankStats DataParallelRank::stats() const {
  RankStats s = stats_;
  s.ep = ep_->stats();
  return s;
}

bool DataParallelRank::step(std::vector<engine::RequestDelta>& deltas) {
  deltas.clear();
  try {
    // Whether any rank has work: all run a step or none does.
    const dist::Bytes mine{static_cast<std::byte>(engine_->has_unfinished() ? 1 : 0)};
    const auto all = transport_.all_gather(mine);
    if (std::none_of(all.begin(), all.end(), [](const dist::Bytes& b) { return !b.empty() && b[0] != std::byte{0}; }))
      return false;
    ++steps_;
    // Exactly one forward (an engine step runs one when it has work) or one idle step: every rank
    // calls the MoE layers' collectives the same number of times.
    if (engine_->has_unfinished()) {
      deltas = engine_->step();
      ++stats_.busy_steps;
    } else {
      model_.moe_idle_step();
      ++stats_.idle_steps;
    }
    ep_->end_step();
    if (options_.rebalance_every > 0 && steps_ % options_.rebalance_every == 0)
      ep_->rebalance(options_.rebalance_slots > 0 ? options_.rebalance_slots : ep_->placement().slots);
    return true;
  } catch (const std::exception& e) {
    transport_.abort(e.what());
    throw;
  }
}

// ---------------------------------------------------------------- ranks as threads

DataParallelEngine::DataParallelEngine(std::vector<std::unique_ptr<model::CausalLM>> models,
                                       const Tokenizer* tokenizer, DataParallelOptions options,
                                       TransportFactory make_transport)
    : options_(std::move(options)) {
  const int n = static_cast<int>(models.size());
  DEEPINFER_CHECK(n >= 1, "data parallelism needs at least one rank's model");
  const auto& cfg = models[0]->config();
  for (const auto& m : models)
    DEEPINFER_CHECK(m && m->config().num_hidden_layers == cfg.num_hidden_layers &&
                        m->config().n_routed_experts == cfg.n_routed_experts && m->vocab_size() == cfg.vocab_size,
                    "data parallelism: every rank must load the same checkpoint");
  if (!make_transport) {
    hub_ = std::make_unique<dist::LocalHub>(n, options_.timeout);
    make_transport = [hub = hub_.get()](int rank, int) { return hub->transport(rank); };
  }
  for (int i = 0; i < n; ++i) {
    auto r = std::make_unique<Rank>();
    r->model = std::move(models[static_cast<size_t>(i)]);
    ranks_.push_back(std::move(r));
  }
  // The factory is only used while the ranks set up, which the wait below covers.
  for (int i = 0; i < n; ++i)
    ranks_[static_cast<size_t>(i)]->thread = std::thread([this, i, tokenizer, &make_transport] {
      rank_loop(*ranks_[static_cast<size_t>(i)], i, tokenizer, make_transport);
    });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return ready_ == n; });
  }
  for (auto& r : ranks_)
    if (r->error) {
      const std::exception_ptr error = r->error;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
      }
      cv_.notify_all();
      for (auto& t : ranks_)
        if (t->thread.joinable()) t->thread.join();
      std::rethrow_exception(error);
    }
}

DataParallelEngine::~DataParallelEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& r : ranks_)
    if (r->thread.joinable()) r->thread.join();
}

uint64_t DataParallelEngine::add_request(std::vector<int32_t> prompt, engine::RequestParams params) {
  DEEPINFER_CHECK(failed_.empty(), "the data-parallel engine stopped: {}", failed_);
  int best = 0;
  for (int i = 1; i < data_parallel_size(); ++i)
    if (ranks_[static_cast<size_t>(i)]->live.size() < ranks_[static_cast<size_t>(best)]->live.size()) best = i;
  Rank& r = *ranks_[static_cast<size_t>(best)];
  const int64_t n = std::max<int64_t>(1, params.sampling.n);
  const uint64_t local = r.rank->engine().add_request(std::move(prompt), std::move(params));  // throws: nothing placed
  const uint64_t id = next_id_++;
  r.live[local] = {id, n};
  where_[id] = {best, local};
  ++r.requests;
  return id;
}

bool DataParallelEngine::abort(uint64_t id) {
  const auto it = where_.find(id);
  if (it == where_.end()) return false;
  Rank& r = *ranks_[static_cast<size_t>(it->second.first)];
  const bool done = r.rank->engine().abort(it->second.second);
  r.live.erase(it->second.second);
  where_.erase(it);
  return done;
}

bool DataParallelEngine::has_unfinished() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->rank->engine().has_unfinished(); });
}

int DataParallelEngine::rank_of(uint64_t id) const {
  const auto it = where_.find(id);
  return it == where_.end() ? -1 : it->second.first;
}

RankStats DataParallelEngine::rank_stats(int rank) const {
  DEEPINFER_CHECK(rank >= 0 && rank < data_parallel_size(), "rank {} of {}", rank, data_parallel_size());
  const Rank& r = *ranks_[static_cast<size_t>(rank)];
  RankStats s = r.rank->stats();
  s.requests = r.requests;
  return s;
}

engine::EngineStats DataParallelEngine::stats() const {
  engine::EngineStats total;
  for (const auto& r : ranks_) total += r->rank->engine().stats();
  total.steps = steps_;
  return total;
}

engine::EngineUsage DataParallelEngine::usage() const {
  engine::EngineUsage total;
  for (const auto& r : ranks_) total += r->rank->engine().usage();
  return total;
}

const dist::ExpertPlacement& DataParallelEngine::placement() const { return ranks_[0]->rank->placement(); }

std::vector<engine::RequestDelta> DataParallelEngine::step() {
  DEEPINFER_CHECK(failed_.empty(), "the data-parallel engine stopped: {}", failed_);
  if (!has_unfinished()) return {};
  ++steps_;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_ = 0;
    ++generation_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ == data_parallel_size(); });
  }
  // The first rank that failed on its own (the others fail on its abort, naming it).
  for (auto& r : ranks_)
    if (r->error) {
      try {
        std::rethrow_exception(r->error);
      } catch (const std::exception& e) {
        failed_ = e.what();
      }
      break;
    }
  DEEPINFER_CHECK(failed_.empty(), "data-parallel step {}: {}", steps_, failed_);
  std::vector<engine::RequestDelta> out;
  for (auto& r : ranks_)
    for (auto& d : r->deltas) {
      const auto it = r->live.find(d.id);
      DEEPINFER_CHECK(it != r->live.end(), "internal error: a delta for unknown request {} of a rank", d.id);
      const uint64_t local = d.id;
      d.id = it->second.global_id;
      if (d.finished && --it->second.completions_left == 0) {
        where_.erase(d.id);
        r->live.erase(local);
      }
      out.push_back(std::move(d));
    }
  return out;
}

void DataParallelEngine::rank_loop(Rank& r, int index, const Tokenizer* tokenizer,
                                   const TransportFactory& make_transport) {
  try {
    r.model->backend().make_current();
    r.transport = make_transport(index, static_cast<int>(ranks_.size()));
    r.rank = std::make_unique<DataParallelRank>(*r.model, *r.transport, tokenizer, options_);
  } catch (...) {
    r.error = std::current_exception();
  }
  const bool failed = static_cast<bool>(r.error);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++ready_;
  }
  cv_.notify_all();
  uint64_t seen = 0;
  while (!failed) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) break;
      seen = generation_;
    }
    try {
      r.rank->step(r.deltas);
    } catch (...) {
      r.error = std::current_exception();  // step() has aborted the other ranks
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
    }
    cv_.notify_all();
  }
  // Torn down here, with the rank's device current: the engine and its pool, the transport, the
  // model (its weights' device mirrors).
  r.rank.reset();
  r.transport.reset();
  r.model.reset();
}

}  // namespace deepinfer::dp
