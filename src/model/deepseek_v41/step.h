#pragma once
// What the layer functions of one V4.1 forward step share: the step itself, plus what layers hand
// down the stack within it (the reference's SharedAttentionRuntime): the latest top-k selection and
// the candidate source's blocks. Compressed KV and index keys are read from the kv source's pools.
#include <vector>

#include "backend/state.h"
#include "core/workspace.h"
#include "model/deepseek_v41/model.h"
#include "model/forward_batch.h"

namespace deepinfer::model::deepseek_v41 {

struct DeepseekV41::Step {
  const ForwardBatch& batch;
  backend::StateStorage state;
  Workspace& ws;
  TensorView hash_ids;    // Engram [layers, T, columns] I32
  TensorView selected;    // latest index source's top-k [T, index_topk] I32
  TensorView candidates;  // candidate source's blocks [T, candidate_topk_blocks] I32
  // The backend records this step (Backend::records_step): work whose size varies between such
  // steps is padded to its most (the compressed entries a step completes).
  bool recorded = false;

  int64_t tokens() const { return batch.num_tokens(); }
};

}  // namespace deepinfer::model::deepseek_v41
