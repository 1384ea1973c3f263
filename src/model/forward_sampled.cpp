// The default CausalLM::forward_sampled: the host rows of forward(), sampled with the backends'
// arithmetic (models whose forward runs on a device override it to sample there).
#include "backend/cpu/sample_rows.h"
#include "model/model.h"

namespace deepinfer::model {

void CausalLM::forward_sampled(const ForwardBatch& batch, kv::StatePool& pool, std::span<const backend::SampleRow> rows,
                               std::vector<int32_t>& tokens) const {
  std::vector<float> logits;
  forward(batch, pool, logits);
  tokens.resize(rows.size());
  cpu::sample_rows(logits, vocab_size(), rows, tokens);
}

}  // namespace deepinfer::model
