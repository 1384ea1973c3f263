#pragma once
// The public SamplingParams (include/deepinfer/llm.h) -> the engine's RequestParams, checked (all
// but what needs the model: vocabulary ids and compiling a guided-decoding spec). The CLI uses it
// to reject a bad request line before any weights load.
#include "deepinfer/llm.h"
#include "engine/llm_engine.h"

namespace deepinfer {

engine::RequestParams to_request_params(const SamplingParams& params);

}  // namespace deepinfer
