// cuBLASLt GEMMs for linear / grouped_linear of many rows (cublas_linear.h): the library opened at
// run time, one handle and workspace per backend, a matmul plan per shape.
#include "backend/cuda/cublas_linear.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "backend/cuda/gemm_kernels.h"
#include "backend/cuda/runtime_library.h"
#include "core/error.h"

namespace deepinfer::cuda {

namespace {

// The entry points deepinfer calls, resolved once per process.
struct CublasLtApi {
  std::string library;  // path and version, or why it was not found
  bool found = false;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetVersion) version = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

template <typename F>
bool resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

CublasLtApi open_api() {
  CublasLtApi api;
  const RuntimeLibrary lib =
      open_runtime_library("DEEPINFER_CUBLASLT", {"libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.13",
                                                  "libcublasLt.so.12", "/usr/local/cuda/lib64/libcublasLt.so.12"});
  if (!lib.handle) {
    api.library = fmt::format("cuBLASLt not found (tried {}); set DEEPINFER_CUBLASLT to libcublasLt.so.13", lib.name);
    return api;
  }
  void* const h = lib.handle;
  const bool all = resolve(h, "cublasLtCreate", api.create) && resolve(h, "cublasLtDestroy", api.destroy) &&
                   resolve(h, "cublasLtGetVersion", api.version) &&
                   resolve(h, "cublasLtMatmulDescCreate", api.desc_create) &&
                   resolve(h, "cublasLtMatmulDescDestroy", api.desc_destroy) &&
                   resolve(h, "cublasLtMatmulDescSetAttribute", api.desc_set) &&
                   resolve(h, "cublasLtMatrixLayoutCreate", api.layout_create) &&
                   resolve(h, "cublasLtMatrixLayoutDestroy", api.layout_destroy) &&
                   resolve(h, "cublasLtMatrixLayoutSetAttribute", api.layout_set) &&
                   resolve(h, "cublasLtMatmulPreferenceCreate", api.pref_create) &&
                   resolve(h, "cublasLtMatmulPreferenceDestroy", api.pref_destroy) &&
                   resolve(h, "cublasLtMatmulPreferenceSetAttribute", api.pref_set) &&
                   resolve(h, "cublasLtMatmulAlgoGetHeuristic", api.heuristic) &&
                   resolve(h, "cublasLtMatmul", api.matmul);
  if (!all) {
    api.library = fmt::format("{} lacks a cuBLASLt entry point deepinfer calls", lib.name);
    return api;
  }
  api.found = true;
  api.library = fmt::format("{} (version {})", lib.name, api.version());
  return api;
}

const CublasLtApi& api() {
  static const CublasLtApi a = open_api();
  return a;
}

void check(cublasStatus_t status, const char* what) {
  DEEPINFER_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLASLt: {} failed (status {})", what, static_cast<int>(status));
}

// The largest power of two (at most 256) dividing the address and every batch stride in bytes:
// what cuBLASLt may assume of each batch's matrix.
int alignment(const void* p, int64_t stride_bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(stride_bytes) | uintptr_t{256};
  return static_cast<int>(a & (~a + 1));
}

}  // namespace

bool cublas_gemm_enabled() {
  static const bool on = [] {
    switch (policy_from_env("DEEPINFER_CUBLAS_GEMM")) {
      case TcPolicy::Never: return false;
      case TcPolicy::Always: return true;  // CublasLinear's constructor fails if the library is missing
      default: break;
    }
    if (!api().found)
      fmt::print(stderr, "deepinfer: {}; prefill GEMMs stay on deepinfer's own kernels\n", api().library);
    return api().found;
  }();
  return on;
}

int64_t cublas_min_rows() {
  static const int64_t n = positive_env("DEEPINFER_CUBLAS_MIN_ROWS", 256);
  return n;
}

// One shape's matmul: column-major in cuBLASLt's terms, D [R, T] (ld G*R) = A^T B with A the
// weight [K', R] (ld K') and B the split x [K', T] (ld G*K'), batched over the G groups.
struct CublasLinear::Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  ~Gemm() {
    const CublasLtApi& l = api();
    if (a) l.layout_destroy(a);
    if (b) l.layout_destroy(b);
    if (d) l.layout_destroy(d);
    if (desc) l.desc_destroy(desc);
  }
};

CublasLinear::CublasLinear(Allocator& device_memory) {
  const CublasLtApi& l = api();
  DEEPINFER_CHECK(l.found, "DEEPINFER_CUBLAS_GEMM=1: {}", l.library);
  cublasLtHandle_t h = nullptr;
  check(l.create(&h), "cublasLtCreate");
  handle_ = h;
  workspace_ = Buffer(size_t{32} << 20, device_memory);  // NVIDIA's advice for Hopper
}

CublasLinear::~CublasLinear() {
  gemms_.clear();
  if (handle_) api().destroy(static_cast<cublasLtHandle_t>(handle_));
}

const std::string& CublasLinear::library() const { return api().library; }

CublasLinear::Gemm* CublasLinear::find(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b,
                                       const float* y) {
  const bool batched = G > 1;
  const int align_a = alignment(w, batched ? R * K3 * 2 : 0), align_b = alignment(b, batched ? K3 * 2 : 0),
            align_d = alignment(y, batched ? R * 4 : 0);
  const Key key{R, K3, G, T, align_a, align_b, align_d};
  auto it = gemms_.find(key);
  if (it != gemms_.end()) return it->second.get();
  if (gemms_.size() >= kMaxPlans) gemms_.clear();  // prefill chunks of ever new sizes: keep it bounded
  const CublasLtApi& l = api();
  auto g = std::make_unique<Gemm>();
  check(l.desc_create(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  check(l.desc_set(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "set TRANSA");
  check(l.desc_set(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain), "set TRANSB");
  check(l.layout_create(&g->a, CUDA_R_16BF, static_cast<uint64_t>(K3), static_cast<uint64_t>(R), K3), "layout A");
  check(l.layout_create(&g->b, CUDA_R_16BF, static_cast<uint64_t>(K3), static_cast<uint64_t>(T), G * K3), "layout B");
  check(l.layout_create(&g->d, CUDA_R_32F, static_cast<uint64_t>(R), static_cast<uint64_t>(T), G * R), "layout D");
  if (G > 1) {
    const int32_t count = static_cast<int32_t>(G);
    const int64_t strides[3] = {R * K3, K3, R};
    cublasLtMatrixLayout_t layouts[3] = {g->a, g->b, g->d};
    for (int i = 0; i < 3; ++i) {
      check(l.layout_set(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "set batch count");
      check(l.layout_set(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]),
            "set batch stride");
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check(l.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_.size();
  const uint32_t aligns[4] = {static_cast<uint32_t>(align_a), static_cast<uint32_t>(align_b),
                              static_cast<uint32_t>(align_d), static_cast<uint32_t>(align_d)};
  cublasStatus_t st = l.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
    st = l.pref_set(pref, which[i], &aligns[i], sizeof aligns[i]);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = l.heuristic(static_cast<cublasLtHandle_t>(handle_), g->desc, g->a, g->b, g->d, g->d, pref, 1, &result, &found);
  l.pref_destroy(pref);
  // No algorithm for these shapes / alignments: the caller takes our own kernels instead.
  g->usable = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (g->usable) g->algo = result.algo;
  return gemms_.emplace(key, std::move(g)).first->second.get();
}

bool CublasLinear::plan(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b, const float* y) {
  return find(R, K3, G, T, w, b, y)->usable;
}

void CublasLinear::run(int64_t R, int64_t K3, int64_t G, int64_t T, const void* w, const void* b, float* y,
                       cudaStream_t stream) {
  Gemm* g = find(R, K3, G, T, w, b, y);
  DEEPINFER_CHECK(g->usable, "cuBLASLt: no algorithm for [{} x {}] x {} rows in {} groups", R, K3, T, G);
  static std::once_flag logged;  // on the first GEMM run (tools/gpu/test.sh checks that one ran)
  std::call_once(logged,
                 [] { fmt::print(stderr, "deepinfer: cuBLASLt GEMM for linears of many rows: {}\n", api().library); });
  const float one = 1.0f, zero = 0.0f;
  check(api().matmul(static_cast<cublasLtHandle_t>(handle_), g->desc, &one, w, g->a, b, g->b, &zero, y, g->d, y, g->d,
                     &g->algo, workspace_.data(), workspace_.size(), stream),
        "cublasLtMatmul");
}

}  // namespace deepinfer::cuda
