#pragma once
// The process-group bootstrap: one process per GPU finds the others through a small TCP rendezvous
// at rank 0 (MASTER_ADDR / MASTER_PORT, as torch.distributed names them) and receives rank 0's
// payload (NCCL's unique id) before any NCCL call, so a peer that never arrives is named after a
// timeout here instead of hanging inside ncclCommInitRank.
//
// Protocol, one connection per rank > 0: the rank sends a hello (magic, version, rank, world size);
// once all world - 1 hellos are in, rank 0 answers every rank with status 0 and the payload. Any
// inconsistency (a rank out of range or twice, another world size) is answered with status 1 and
// one line to every rank that joined, and rank 0 throws the same line.
#include <chrono>
#include <string>

namespace deepinfer::dist {

struct RendezvousConfig {
  std::string host = "127.0.0.1";  // where rank 0 listens (MASTER_ADDR)
  int port = 29500;                // MASTER_PORT
  int rank = 0;                    // RANK
  int world = 1;                   // WORLD_SIZE
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // DEEPINFER_RENDEZVOUS_TIMEOUT_S
};

// From MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and DEEPINFER_RENDEZVOUS_TIMEOUT_S (each optional;
// the defaults above). A malformed value is a one-line error naming the variable.
RendezvousConfig rendezvous_config_from_env();

// Rank 0's side: listens on (bind_host, port) at construction (port 0: an ephemeral port, see
// port()), so it is ready before the other ranks start.
class RendezvousListener {
 public:
  RendezvousListener(const std::string& bind_host, int port);
  ~RendezvousListener();
  RendezvousListener(const RendezvousListener&) = delete;
  RendezvousListener& operator=(const RendezvousListener&) = delete;

  int port() const { return port_; }
  // Waits for ranks 1 .. world - 1, then hands each the payload. Throws naming the ranks that did
  // not join within the timeout, or the inconsistency.
  void serve(int world, const std::string& payload, std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  int port_ = 0;
  std::string where_;
};

// A rank > 0: connects to rank 0 (retrying until the timeout: rank 0 may start later) and returns
// its payload. Throws naming the address when nobody answers, or rank 0's error line.
std::string rendezvous_join(const RendezvousConfig& config);

// Either side by config.rank: rank 0 listens on config.port on every interface and hands out
// `payload`, returning it; other ranks return what rank 0 handed out. World size 1: `payload`.
std::string rendezvous(const RendezvousConfig& config, const std::string& payload);

}  // namespace deepinfer::dist
