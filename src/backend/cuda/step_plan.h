#pragma once
// The work partition of a step on the GPU: chosen once, before the step's first op, from the
// step's static description (backend::StepShape) and the device, and read by the ops' launchers.
//
// Every choice a plan makes changes speed, never bits, so results are batch invariant in both
// modes and DEEPINFER_BATCH_INVARIANT=1 has nothing to pin here (it only switches top-k tie rules).
// The cuts that decide the arithmetic are the same for every step, whatever its batch:
//  - sparse attention: 128-key splits (kAttentionSplitKeys), merged in split order with the sink;
//  - GEMMs: K slices from the weight's shape alone (tc_gemm.cu, skinny_gemm.cuh);
//  - sampling: 1024 strided chunks and a fixed sum tree (sample_math.h).
// What a plan varies is how that fixed arithmetic is spread over the GPU:
//  - attention schedule: each split of a (token, head) in its own CTA, partials through global
//    memory and a combine kernel (few pairs: a batch-1 step needs the CTAs to keep loads in
//    flight), or every split of a pair in one CTA that also combines (32+ pairs per SM: no
//    partials in global memory, one launch less). Bit-identical by construction: both
//    run the same device functions in the same order (attention_kernels.cu), and
//    BackendOps.AttentionSchedulesGiveTheSameBits checks it;
//  - a recorded step's block capacity: tables padded to it, and the launch sizes that follow
//    context length (indexer rows, attention splits, compressor windows) sized for it, so every
//    step of the recording launches the same grids;
//  - token groups of attention partials and indexer score rows, from memory budgets.
// The tensor-core GEMM's schedule (split / seq, tokens per CTA) follows the same rule inside its
// launcher, from the call's row count (tc_gemm.cu).
#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/attention_kernels.h"

namespace deepinfer::cuda {

struct StepPlan {
  // Smallest block capacity of a recording (tables shorter than this are padded to it).
  static constexpr int64_t kMinBlockCapacity = 4;
  // Inside a recorded step: the blocks per sequence table the recording holds (0: an eager step).
  int64_t block_capacity = 0;
  // Streaming multiprocessors of the device (the CTAs a launch needs to fill it).
  int64_t sms = 132;
  backend::AttentionSchedule attention = backend::AttentionSchedule::Auto;
  // A decode step (every sequence one token): its GEMMs stay on our own kernels, so a step replayed
  // from a CUDA graph and the same step launched eagerly (--enforce-eager) give the same bits
  // (cublas_linear.h).
  bool decode = false;

  // Whether a sparse-attention launch of `pairs` (token, head) pairs, `splits` splits each, runs
  // every split of a pair in one CTA.
  bool fused_attention(int64_t pairs, int64_t splits) const {
    if (splits > kMaxFusedAttentionSplits || attention == backend::AttentionSchedule::Split) return false;
    if (attention == backend::AttentionSchedule::Fused || attention == backend::AttentionSchedule::TensorCores)
      return true;  // TensorCores here: a head size the tensor-core kernel does not take
    // Measured on the H200 (docs/perf.md, session 12), V4-Flash shapes at 4K context, two runs:
    // at 16 pairs per SM (batch 32) the fused schedule was 2.5-3% slower per step than split (its
    // CTAs' serial splits leave loads out of flight); at 62 (batch 128) 4% faster in one run and
    // 0.7% slower in the other (runs vary by ~4%). So only from 32 per SM.
    return pairs >= 32 * sms;
  }
};

// The plan of a step of `shape`, recorded (CUDA graphs) or eager. The plan outside run_step (ops
// called directly, as the op tests do) is an eager step's.
StepPlan plan_step(const backend::StepShape& shape, bool recorded, int64_t sms, const backend::BackendOptions& options);

}  // namespace deepinfer::cuda
