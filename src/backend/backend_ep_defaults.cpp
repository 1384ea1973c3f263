// Backend's expert-parallel MoE parts for backends that do not implement them yet: a clear error
// naming the op and the backend.
#include "backend/backend.h"
#include "core/error.h"

namespace deepinfer::backend {

namespace {
[[noreturn]] void missing(const Backend& b, const char* op) {
  fail("the {} backend does not implement the expert-parallel op {} yet (issue #14); run expert parallelism "
       "with --device cpu",
       b.name(), op);
}
}  // namespace

void Backend::moe_shared_expert(const MoeWeights&, TensorView, TensorView) { missing(*this, "moe_shared_expert"); }
void Backend::moe_expert_rows(const MoeWeights&, TensorView, TensorView, TensorView) {
  missing(*this, "moe_expert_rows");
}
void Backend::moe_combine(TensorView, TensorView, TensorView, TensorView, TensorView) {
  missing(*this, "moe_combine");
}

}  // namespace deepinfer::backend
