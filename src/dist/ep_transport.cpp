#include "dist/ep_transport.h"

#include <fmt/format.h>

#include "core/error.h"

namespace deepinfer::dist {

class LocalTransport final : public EpTransport {
 public:
  LocalTransport(LocalHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return hub_.world_size(); }
  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override {
    DEEPINFER_CHECK(static_cast<int>(send.size()) == hub_.world_size(), "all_to_all: {} buffers for {} ranks",
                    send.size(), hub_.world_size());
    return hub_.exchange(rank_, "all_to_all", std::move(send));
  }
  std::vector<Bytes> all_gather(Bytes mine) override {
    return hub_.exchange(rank_, "all_gather", std::vector<Bytes>(static_cast<size_t>(hub_.world_size()), mine));
  }
  void barrier() override { hub_.exchange(rank_, "barrier", std::vector<Bytes>(static_cast<size_t>(hub_.world_size()))); }
  void abort(const std::string& reason) override { hub_.abort(rank_, reason); }

 private:
  LocalHub& hub_;
  const int rank_;
};

LocalHub::LocalHub(int world_size, std::chrono::milliseconds timeout) : world_(world_size), timeout_(timeout) {
  DEEPINFER_CHECK(world_size >= 1, "expert-parallel group of {} ranks", world_size);
  mailbox_.assign(static_cast<size_t>(world_), std::vector<Bytes>(static_cast<size_t>(world_)));
  arrived_round_.assign(static_cast<size_t>(world_), 0);
  left_round_.assign(static_cast<size_t>(world_), 0);
  what_.assign(static_cast<size_t>(world_), "");
  calls_.assign(static_cast<size_t>(world_), 0);
}

LocalHub::~LocalHub() = default;

std::unique_ptr<EpTransport> LocalHub::transport(int rank) {
  DEEPINFER_CHECK(rank >= 0 && rank < world_, "rank {} outside the group of {}", rank, world_);
  return std::make_unique<LocalTransport>(*this, rank);
}

void LocalHub::abort(int rank, const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (aborted_.empty()) aborted_ = fmt::format("rank {} failed: {}", rank, reason);
  cv_.notify_all();
}

std::vector<Bytes> LocalHub::exchange(int rank, const char* what, std::vector<Bytes> send) {
  std::unique_lock lock(mutex_);
  const auto r = static_cast<size_t>(rank);
  const uint64_t round = ++calls_[r];
  // Waits for `ready`, failing on an abort or, after the timeout, naming the ranks `behind` lists.
  auto wait_for = [&](auto ready, auto behind, const char* stage) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!ready()) {
      if (!aborted_.empty()) fail("expert-parallel {} #{} on rank {}: {}", what, round, rank, aborted_);
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
        if (!aborted_.empty()) fail("expert-parallel {} #{} on rank {}: {}", what, round, rank, aborted_);
        std::string missing;
        for (int s = 0; s < world_; ++s)
          if (behind(static_cast<size_t>(s))) missing += (missing.empty() ? "" : ", ") + std::to_string(s);
        fail("expert-parallel {} #{} on rank {}: rank(s) {} did not {} within {} ms", what, round, rank, missing, stage,
             timeout_.count());
      }
    }
  };
  // The mailbox is free once every rank has taken its column of the previous round.
  wait_for([&] { for (uint64_t v : left_round_) if (v + 1 < round) return false; return true; },
           [&](size_t s) { return left_round_[s] + 1 < round; }, "finish the previous collective");
  for (size_t d = 0; d < send.size(); ++d) mailbox_[r][d] = std::move(send[d]);
  arrived_round_[r] = round;
  what_[r] = what;
  cv_.notify_all();
  wait_for([&] { for (uint64_t v : arrived_round_) if (v < round) return false; return true; },
           [&](size_t s) { return arrived_round_[s] < round; }, "arrive");
  for (int s = 0; s < world_; ++s)
    DEEPINFER_CHECK(what_[static_cast<size_t>(s)] == what,
                    "expert-parallel collective #{}: rank {} called {} while rank {} called {}", round, s,
                    what_[static_cast<size_t>(s)], rank, what);
  std::vector<Bytes> recv(static_cast<size_t>(world_));
  for (size_t s = 0; s < static_cast<size_t>(world_); ++s) recv[s] = std::move(mailbox_[s][r]);
  left_round_[r] = round;
  cv_.notify_all();
  return recv;
}

}  // namespace deepinfer::dist
