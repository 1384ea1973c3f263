#pragma once
// Every tensor of a DeepSeek-V4.1 checkpoint as released (GENERATING.md, "Checkpoint format"), from
// the config alone: the one table of names, stored dtypes and shapes that the weight loader checks
// a checkpoint against and that `deepinfer inspect --config` counts parameters from.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/deepseek_v41_config.h"

namespace deepinfer::model::deepseek_v41 {

struct TensorSpec {
  std::string name;            // released name, e.g. "layers.3.attn.wq_a.weight"
  DType dtype = DType::BF16;   // as stored (FP4 experts: I8 bytes of two e2m1 codes)
  std::vector<int64_t> shape;  // as stored
  std::string component;       // what `inspect` groups it under
  int64_t parameters() const;  // stored elements; packed FP4 counts two per byte
  int64_t bytes() const;
};

// The text model (backbone, Engram, DSpark stages). A vision tower (vision_config.num_hidden_layers
// > 0) adds `vision.*`, `aligner.*`, `image_*` and `ffn.gate.bias_vl`, which are not listed.
std::vector<TensorSpec> checkpoint_tensors(const io::DeepseekV41Config& config);

// Checkpoint prefixes that belong to the vision tower (ignored by the text model).
bool is_vision_tensor(const std::string& name);

}  // namespace deepinfer::model::deepseek_v41
