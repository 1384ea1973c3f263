#pragma once
// What the generation API (GenerationRun) and the server drive: requests in, one step at a time,
// deltas out. LLMEngine is one model's engine; dp::DataParallelEngine runs one LLMEngine per rank
// in lockstep over expert parallelism and answers the same calls with its ranks' totals.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/request_types.h"
#include "kv/prefix_cache.h"

namespace deepinfer::engine {

// The state pools at a step boundary (summed over ranks): what the server's gauges show.
struct EngineUsage {
  int64_t running = 0, waiting = 0;             // sequences
  int64_t blocks_total = 0, blocks_in_use = 0;  // blocks a new sequence could not get: in use
  int64_t slots_total = 0, slots_in_use = 0;    // sequence slots (exact-mode snapshot slots left out)
  size_t pool_bytes = 0;                        // state memory reserved
  int64_t block_tokens = 0;                     // positions per block (the prefix-cache hit granularity)
  bool prefix_caching = false;
  kv::PrefixCacheStats prefix;  // counters, when prefix caching is on

  // Several engines' pools added up (data-parallel ranks, which share one layout).
  EngineUsage& operator+=(const EngineUsage& o) {
    running += o.running;
    waiting += o.waiting;
    blocks_total += o.blocks_total;
    blocks_in_use += o.blocks_in_use;
    slots_total += o.slots_total;
    slots_in_use += o.slots_in_use;
    pool_bytes += o.pool_bytes;
    block_tokens = o.block_tokens;
    prefix_caching = o.prefix_caching;
    prefix += o.prefix;
    return *this;
  }
};

class RequestEngine {
 public:
  virtual ~RequestEngine() = default;
  // Queues a request (sampling.n sequences) and returns its id; throws Error, queuing nothing, for
  // an invalid one (see LLMEngine::add_request).
  virtual uint64_t add_request(std::vector<int32_t> prompt, RequestParams params) = 0;
  // Drops an unfinished request, returning what it held; false if the id is not active.
  virtual bool abort(uint64_t id) = 0;
  // One step: one delta per sequence that sampled a token.
  virtual std::vector<RequestDelta> step() = 0;
  virtual bool has_unfinished() const = 0;
  // Positions one sequence may hold.
  virtual int64_t context_limit() const = 0;
  virtual EngineStats stats() const = 0;
  virtual EngineUsage usage() const = 0;
};

}  // namespace deepinfer::engine
