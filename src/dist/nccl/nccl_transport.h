#pragma once
// EpTransport over NCCL, one rank per GPU (built with DEEPINFER_CUDA). The collectives move the
// same byte buffers as LocalHub: the sizes first (an all-gather of one row of sizes per rank), then
// grouped ncclSend / ncclRecv between device staging buffers on this rank's stream. Host buffers in
// and out, so the expert-parallel executor runs unchanged on it; the device-resident FP8 dispatch at
// fixed padded sizes (CUDA-graph safe) is the next step (docs/distributed.md).
//
// Initialisation blocks until every rank has joined: the bootstrap that hands out the unique id
// (dist/rendezvous.h) is where a missing peer is named after a timeout, before NCCL starts.
#include <memory>
#include <string>

#include "dist/ep_transport.h"

namespace deepinfer::dist {

// NCCL's unique id as bytes (ncclUniqueId, 128 bytes): made by rank 0, handed to every rank by
// the bootstrap (a TCP rendezvous; for one rank nothing is handed).
std::string nccl_unique_id();

// Rank `rank` of `world`, on the current CUDA device. Fails with one line when NCCL is not usable.
std::unique_ptr<EpTransport> make_nccl_transport(int rank, int world, const std::string& unique_id);

// The process-group bootstrap: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torch's names;
// dist/rendezvous.h) give this process its rank; rank 0 makes the unique id and the TCP rendezvous
// hands it to the others, failing with the missing ranks named after DEEPINFER_RENDEZVOUS_TIMEOUT_S.
std::unique_ptr<EpTransport> make_nccl_transport_from_env();

}  // namespace deepinfer::dist
