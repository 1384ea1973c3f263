#pragma once
// The collectives expert parallelism needs between ranks, as byte buffers: all_to_all (dispatch
// rows to the ranks that hold their experts, and the results back), all_gather and barrier. Every
// rank calls the same collectives in the same order; a rank that does not arrive within the timeout
// makes the others fail with one line naming it (never a silent hang).
//
// LocalHub runs the ranks as threads of one process (the transport CI tests expert parallelism
// with, on the CPU backend); the NCCL transport between GPUs is issue #14's next step.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace deepinfer::dist {

using Bytes = std::vector<std::byte>;

class EpTransport {
 public:
  virtual ~EpTransport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // send[r] goes to rank r (send.size() == world_size()); returns recv, recv[r] what rank r sent here.
  virtual std::vector<Bytes> all_to_all(std::vector<Bytes> send) = 0;
  // Every rank's `mine`, by rank.
  virtual std::vector<Bytes> all_gather(Bytes mine) = 0;
  virtual void barrier() = 0;
  // Tells the other ranks this one failed (they throw naming it instead of waiting for it).
  virtual void abort(const std::string& reason) = 0;
};

// world_size ranks in one process. transport(r) is rank r's end; each end is used by one thread.
class LocalHub {
 public:
  explicit LocalHub(int world_size, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~LocalHub();
  LocalHub(const LocalHub&) = delete;
  LocalHub& operator=(const LocalHub&) = delete;

  int world_size() const { return world_; }
  std::unique_ptr<EpTransport> transport(int rank);

 private:
  friend class LocalTransport;
  // One collective: every rank deposits its buffers for every rank, then takes its own column.
  std::vector<Bytes> exchange(int rank, const char* what, std::vector<Bytes> send);
  void abort(int rank, const std::string& reason);

  const int world_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // mailbox_[src][dst] of the collective in progress.
  std::vector<std::vector<Bytes>> mailbox_;
  std::vector<uint64_t> arrived_round_;  // per rank: the last round it deposited in
  std::vector<uint64_t> left_round_;     // per rank: the last round it took its column of
  std::vector<uint64_t> calls_;          // per rank: collectives called so far (the round number)
  std::vector<std::string> what_;        // per rank: the collective it last deposited for
  std::string aborted_;                  // the first failure, "" while none
};

}  // namespace deepinfer::dist
