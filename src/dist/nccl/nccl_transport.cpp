#include "dist/nccl/nccl_transport.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "dist/rendezvous.h"

namespace deepinfer::dist {

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  DEEPINFER_CHECK(r == ncclSuccess || r == ncclInProgress, "NCCL {}: {}", what, ncclGetErrorString(r));
}
void check_cuda(cudaError_t e, const char* what) {
  DEEPINFER_CHECK(e == cudaSuccess, "CUDA {} (NCCL transport): {}", what, cudaGetErrorString(e));
}

// A device buffer that grows (contents not kept).
struct DeviceBytes {
  void* ptr = nullptr;
  size_t size = 0;
  ~DeviceBytes() {
    if (ptr) cudaFree(ptr);
  }
  void* reserve(size_t bytes) {
    if (bytes > size) {
      if (ptr) check_cuda(cudaFree(ptr), "cudaFree");
      ptr = nullptr;
      check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
      size = bytes;
    }
    return ptr;
  }
};

class NcclTransport final : public EpTransport {
 public:
  NcclTransport(int rank, int world, const std::string& id) : rank_(rank), world_(world) {
    DEEPINFER_CHECK(world >= 1 && rank >= 0 && rank < world, "NCCL transport: rank {} of {}", rank, world);
    DEEPINFER_CHECK(id.size() == sizeof(ncclUniqueId), "NCCL transport: a unique id of {} bytes, not {}", id.size(),
                    sizeof(ncclUniqueId));
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof(uid));
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Blocking: a peer that never arrives is the bootstrap's to name (its rendezvous has the
    // timeout) before NCCL starts. A non-blocking init polled with ncclCommGetAsyncError reported
    // success at once on NCCL 2.28.9 with the second rank missing, and left the thread's group state
    // unusable for the next communicator (H200, 2026-12-02).
    check_nccl(ncclCommInitRank(&comm_, world, uid, rank), "ncclCommInitRank");
  }
  ~NcclTransport() override {
    if (comm_) {
      ncclCommFinalize(comm_);
      ncclCommDestroy(comm_);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override {
    DEEPINFER_CHECK(static_cast<int>(send.size()) == world_, "all_to_all: {} buffers for {} ranks", send.size(),
                    world_);
    // Every rank's row of send sizes, so each knows what it receives.
    std::vector<int64_t> mine(static_cast<size_t>(world_));
    for (int d = 0; d < world_; ++d) mine[static_cast<size_t>(d)] = static_cast<int64_t>(send[static_cast<size_t>(d)].size());
    const std::vector<int64_t> sizes = gather_sizes(mine);  // [src, dst]
    size_t send_total = 0, recv_total = 0;
    std::vector<size_t> send_off(static_cast<size_t>(world_)), recv_off(static_cast<size_t>(world_));
    for (int p = 0; p < world_; ++p) {
      send_off[static_cast<size_t>(p)] = send_total;
      send_total += static_cast<size_t>(mine[static_cast<size_t>(p)]);
      recv_off[static_cast<size_t>(p)] = recv_total;
      recv_total += static_cast<size_t>(sizes[static_cast<size_t>(p * world_ + rank_)]);
    }
    auto* dsend = static_cast<std::byte*>(send_buf_.reserve(std::max<size_t>(send_total, 1)));
    auto* drecv = static_cast<std::byte*>(recv_buf_.reserve(std::max<size_t>(recv_total, 1)));
    for (int p = 0; p < world_; ++p)
      if (!send[static_cast<size_t>(p)].empty())
        check_cuda(cudaMemcpyAsync(dsend + send_off[static_cast<size_t>(p)], send[static_cast<size_t>(p)].data(),
                                   send[static_cast<size_t>(p)].size(), cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync");
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world_; ++p) {
      const auto n_send = static_cast<size_t>(mine[static_cast<size_t>(p)]);
      const auto n_recv = static_cast<size_t>(sizes[static_cast<size_t>(p * world_ + rank_)]);
      if (n_send > 0) check_nccl(ncclSend(dsend + send_off[static_cast<size_t>(p)], n_send, ncclUint8, p, comm_, stream_), "ncclSend");
      if (n_recv > 0) check_nccl(ncclRecv(drecv + recv_off[static_cast<size_t>(p)], n_recv, ncclUint8, p, comm_, stream_), "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    wait_ready("all_to_all");
    std::vector<Bytes> recv(static_cast<size_t>(world_));
    for (int p = 0; p < world_; ++p) {
      Bytes& b = recv[static_cast<size_t>(p)];
      b.resize(static_cast<size_t>(sizes[static_cast<size_t>(p * world_ + rank_)]));
      if (!b.empty())
        check_cuda(cudaMemcpyAsync(b.data(), drecv + recv_off[static_cast<size_t>(p)], b.size(), cudaMemcpyDeviceToHost,
                                   stream_),
                   "cudaMemcpyAsync");
    }
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return recv;
  }

  std::vector<Bytes> all_gather(Bytes mine) override {
    return all_to_all(std::vector<Bytes>(static_cast<size_t>(world_), mine));
  }

  void barrier() override {
    auto* d = static_cast<int32_t*>(small_.reserve(sizeof(int32_t)));
    check_nccl(ncclAllReduce(d, d, 1, ncclInt32, ncclSum, comm_, stream_), "ncclAllReduce");
    wait_ready("barrier");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void abort(const std::string&) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  // [src, dst] send sizes of every rank (an all-gather of each rank's row).
  std::vector<int64_t> gather_sizes(const std::vector<int64_t>& mine) {
    const size_t row = static_cast<size_t>(world_) * sizeof(int64_t);
    auto* d = static_cast<std::byte*>(small_.reserve(row * static_cast<size_t>(world_ + 1)));
    check_cuda(cudaMemcpyAsync(d, mine.data(), row, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    check_nccl(ncclAllGather(d, d + row, static_cast<size_t>(world_), ncclInt64, comm_, stream_), "ncclAllGather");
    wait_ready("all_gather of sizes");
    std::vector<int64_t> all(static_cast<size_t>(world_ * world_));
    check_cuda(cudaMemcpyAsync(all.data(), d + row, row * static_cast<size_t>(world_), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return all;
  }

  // After queuing NCCL calls: fails naming the call on an asynchronous error (a peer gone).
  void wait_ready(const char* what) {
    DEEPINFER_CHECK(comm_, "NCCL transport of rank {}: {} after an abort", rank_, what);
    ncclResult_t state = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
    DEEPINFER_CHECK(state == ncclSuccess, "NCCL {} on rank {} of {}: {}", what, rank_, world_,
                    ncclGetErrorString(state));
  }

  const int rank_, world_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  DeviceBytes send_buf_, recv_buf_, small_;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

std::unique_ptr<EpTransport> make_nccl_transport(int rank, int world, const std::string& unique_id) {
  return std::make_unique<NcclTransport>(rank, world, unique_id);
}

std::unique_ptr<EpTransport> make_nccl_transport_from_env() {
  const RendezvousConfig config = rendezvous_config_from_env();
  const std::string id = rendezvous(config, config.rank == 0 ? nccl_unique_id() : std::string());
  return make_nccl_transport(config.rank, config.world, id);
}

}  // namespace deepinfer::dist
