#pragma once
// What the layer functions of one forward step share.
#include "backend/state.h"
#include "model/forward_batch.h"
#include "model/deepseek_v4/model.h"
#include "core/workspace.h"

namespace deepinfer::model::deepseek_v4 {

struct StepFields {
  const ForwardBatch& batch;
  backend::StateStorage state;
  Workspace& ws;
};

}  // namespace deepinfer::model::deepseek_v4

namespace deepinfer::model::deepseek_v4 {
struct DeepseekV4::Step : StepFields {};
}  // namespace deepinfer::model::deepseek_v4
