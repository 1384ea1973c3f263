// CUDA linear layers over stored weight formats, and the MoE pipeline (routing, experts). Host side:
// validation, weight mirrors and staging; the kernels are in gemm_kernels.cu.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <vector>

#include <fmt/core.h>

#include "backend/cuda/bf16_operands.h"
#include "backend/cuda/cublas_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm_kernels.h"

namespace deepinfer::cuda {

namespace {

bool same_shape(const WeightMatrix* w, int64_t rows, int64_t cols) {
  return w != nullptr && w->rows == rows && w->cols == cols;
}

// The kernel format shared by every matrix of one MoE launch (the element-wise one if they differ).
int common_format(std::initializer_list<const std::vector<DevMatrix>*> lists) {
  int fmt = -1;
  for (const auto* l : lists)
    for (const DevMatrix& m : *l) {
      const int f = gemm_format(m);
      if (fmt < 0) fmt = f;
      if (f != fmt) return kGemmGenericFormat;
    }
  return fmt < 0 ? kGemmGenericFormat : fmt;
}

// The tensor-core format one kernel instance takes for every matrix of the lists (tc_common_format),
// or -1 (the CUDA-core tile runs them).
int all_tc(std::initializer_list<const std::vector<DevMatrix>*> lists) {
  int fmt = -1;
  for (const auto* l : lists)
    for (const DevMatrix& m : *l) {
      const int f = tc_format(m);
      fmt = fmt < 0 ? f : tc_common_format(fmt, f);
      if (fmt < 0) return -1;
    }
  return fmt;
}

}  // namespace

const CudaBackend::ExpertTable& CudaBackend::expert_table(std::span<const backend::SwigluExpert> experts, int64_t D) {
  const auto E = experts.size();
  DEEPINFER_CHECK(E > 0 && experts[0].w1, "moe_experts: routed experts without weights");
  const int64_t I = experts[0].w1->rows;
  ExpertTable& t = expert_tables_[{experts.data(), E}];
  bool same = t.ids.size() == 3 * E && t.inter == I;
  for (size_t e = 0; same && e < E; ++e) {
    const backend::SwigluExpert& ex = experts[e];
    same = ex.w1 && ex.w3 && ex.w2 && t.ids[3 * e] == ex.w1->identity() && t.ids[3 * e + 1] == ex.w3->identity() &&
           t.ids[3 * e + 2] == ex.w2->identity();
  }
  if (same) return t;
  t = ExpertTable{};
  t.inter = I;
  for (size_t e = 0; e < E; ++e) {
    const backend::SwigluExpert& ex = experts[e];
    DEEPINFER_CHECK(same_shape(ex.w1, I, D) && same_shape(ex.w3, I, D) && same_shape(ex.w2, D, I),
                    "moe_experts: expert {} does not fit [I = {}, D = {}] like expert 0", e, I, D);
    t.ids.push_back(ex.w1->identity());
    t.ids.push_back(ex.w3->identity());
    t.ids.push_back(ex.w2->identity());
    t.m1.push_back(weight(*ex.w1).dev());
    t.m3.push_back(weight(*ex.w3).dev());
    t.m2.push_back(weight(*ex.w2).dev());
  }
  for (const auto* list : {&t.m1, &t.m3, &t.m2}) {
    t.device.emplace_back(list->size() * sizeof(DevMatrix), allocator_);
    copy_to_backend(t.device.back().data(), list->data(), list->size() * sizeof(DevMatrix));
  }
  t.d1 = t.device[0].as<DevMatrix>();
  t.d3 = t.device[1].as<DevMatrix>();
  t.d2 = t.device[2].as<DevMatrix>();
  t.tc_gate_up = all_tc({&t.m1, &t.m3});
  t.tc_down = all_tc({&t.m2});
  t.gate_up_format = common_format({&t.m1, &t.m3});
  t.down_format = common_format({&t.m2});
  t.fp4_gemv_rows = std::min({moe_gemv_fp4_tile_rows(t.m1, true), moe_gemv_fp4_tile_rows(t.m3, true),
                              moe_gemv_fp4_tile_rows(t.m2, false)});
  return t;
}

// DEEPINFER_TC_GEMM pins a kernel; otherwise the default mode takes `auto_choice` and batch
// invariance the CUDA-core tile.
bool CudaBackend::tensor_cores_when(bool auto_choice) const {
  switch (tc_policy()) {
    case TcPolicy::Never: return false;
    case TcPolicy::Always: return true;
    default: return !options_.batch_invariant && auto_choice;
  }
}

bool CudaBackend::tensor_cores_for(int64_t rows) const { return tensor_cores_when(rows >= tc_min_rows()); }

// The routed experts from more than 2 rows per expert on average (V4-Flash: past ~85 tokens): at
// 128 decode tokens (3 rows an expert) the tensor cores save 10% of the step, at 32 they cost 20%
// (docs/perf.md, session 14).
bool CudaBackend::tensor_cores_for_experts(int64_t routed_rows, int64_t experts) const {
  return tensor_cores_when(routed_rows > 2 * std::max<int64_t>(experts, 1));
}

bool CudaBackend::batching_keeps_bits() const { return options_.batch_invariant || tc_policy() != TcPolicy::Auto; }

bool CudaBackend::cublas_ready(std::span<const DevMatrix> ws, int64_t groups, int64_t T, const float* y) {
  // Never in a decode step: CUDA graphs replay only our kernels, and a decode step gives the same
  // bits replayed or launched eagerly (StepGraphs tests).
  if (!cublas_gemm_enabled() || tc_policy() != TcPolicy::Auto || options_.batch_invariant ||
      T < cublas_min_rows() || plan().decode)
    return false;
  int64_t rows = 0;
  for (const DevMatrix& w : ws) {
    if (!weight_exact_in_bf16(w) || w.cols != ws[0].cols) return false;
    rows += w.rows;
  }
  const int64_t C = ws[0].cols;
  const size_t weight_bytes = static_cast<size_t>(3 * rows * C) * 2;
  if (weight_bytes > CublasLinear::kMaxWeightBytes) return false;
  if (!cublas_) cublas_ = std::make_unique<CublasLinear>(allocator_);
  const void* wb = scratch(weight_bytes, kCublasScratch);
  const void* xb = scratch(static_cast<size_t>(T * groups * 3 * C) * 2, kCublasScratch + 1);
  return cublas_->plan(rows / groups, 3 * C, groups, T, wb, xb, y);
}

void CudaBackend::cublas_gemm(std::span<const DevMatrix> ws, int64_t groups, const float* x, int64_t T, float* y) {
  int64_t rows = 0;
  for (const DevMatrix& w : ws) rows += w.rows;
  const int64_t C = ws[0].cols;
  auto* wb = static_cast<uint16_t*>(scratch(static_cast<size_t>(3 * rows * C) * 2, kCublasScratch));
  auto* xb = static_cast<uint16_t*>(scratch(static_cast<size_t>(T * groups * 3 * C) * 2, kCublasScratch + 1));
  int64_t done = 0;
  for (const DevMatrix& w : ws) {
    launch_weight_bf16x3(w, wb + done * 3 * C);
    done += w.rows;
  }
  launch_split_x_bf16x3(x, T, groups, C, xb);
  DEEPINFER_CUDA_LAUNCHED();
  cublas_->run(rows / groups, 3 * C, groups, T, wb, xb, y, stream_);
}

// linear / grouped_linear: cuBLASLt where asked for (DEEPINFER_CUBLAS_GEMM, cublas_linear.h); the
// tensor-core GEMM for the formats it takes where tensor_cores_for the call's rows (gemm_kernels.h);
// FP8 decode (1-2 rows) on the tensor-core GEMV where tensor cores are allowed at all (the default
// mode); else the CUDA-core tile.
void CudaBackend::linear_any(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) {
  const int64_t T = x.rows();
  const DevMatrix dw = weight(w).dev();
  if (cublas_ready({&dw, 1}, groups, T, y.f32())) {
    cublas_gemm({&dw, 1}, groups, x.f32(), T, y.f32());
    return;
  }
  const int fmt = tensor_cores_for(T) ? tc_format(dw) : -1;
  if (fmt >= 0) {
    void* xc = tc_reads_x(T, x.f32()) ? nullptr : scratch(tc_split_bytes(T, groups, w.cols), kTcScratch);
    const size_t part_bytes = tc_grid_split_wanted() ? tc_slice_bytes(fmt, dw, groups, T, x.f32()) : 0;
    auto* part = part_bytes ? static_cast<float*>(scratch(part_bytes, kTcScratch + 1)) : nullptr;
    if (part) {
      static std::once_flag logged;  // tools/gpu/test.sh checks that it ran where asked for (named)
      std::call_once(logged, [] {
        if (std::getenv("DEEPINFER_TC_GRID_SPLIT")) fmt::print(stderr, "deepinfer: tensor-core GEMM slices on their own CTAs\n");
      });
    }
    launch_linear_tc(fmt, dw, groups, x.f32(), xc, T, y.f32(), part);
  } else if (T > 2 || !tensor_cores_when(true) || !launch_decode_gemv_tc(dw, groups, x.f32(), T, y.f32())) {
    launch_linear(dw, groups, x.f32(), T, y.f32());
  }
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::linear(const WeightMatrix& w, TensorView x, TensorView y) {
  begin_op();
  check_device(x, DType::F32, "linear input");
  check_device(y, DType::F32, "linear output");
  const int64_t T = x.rows();
  DEEPINFER_CHECK(x.last_dim() == w.cols && y.last_dim() == w.rows && y.rows() == T,
                  "linear: weight [{}, {}] does not fit input [{}, {}] / output [{}, {}]", w.rows, w.cols, T,
                  x.last_dim(), y.rows(), y.last_dim());
  if (T == 0 || w.rows == 0) return;
  linear_any(w, 1, x, y);
}

// The siblings that take the tensor-core GEMM (no cuBLASLt) in launches of one format each, x split
// once a kind of split; the others as linear runs them. DEEPINFER_TC_LINEARS=0: one linear each
// (the A/B).
void CudaBackend::linears(TensorView x, std::span<const backend::LinearOut> outs) {
  static const bool fuse = policy_from_env("DEEPINFER_TC_LINEARS") != TcPolicy::Never;
  if (!fuse) {
    Backend::linears(x, outs);
    return;
  }
  begin_op();
  check_device(x, DType::F32, "linears input");
  const int64_t T = x.rows();
  for (const backend::LinearOut& o : outs) {
    DEEPINFER_CHECK(o.w != nullptr, "linears: an output without its weight");
    check_device(o.y, DType::F32, "linears output");
    DEEPINFER_CHECK(x.last_dim() == o.w->cols && o.y.last_dim() == o.w->rows && o.y.rows() == T,
                    "linears: weight [{}, {}] does not fit input [{}, {}] / output [{}, {}]", o.w->rows, o.w->cols, T,
                    x.last_dim(), o.y.rows(), o.y.last_dim());
  }
  if (T == 0) return;
  // (Kept per thread and cleared: no allocation a layer a step once they have grown.)
  static thread_local std::vector<std::pair<int, TcLinearTarget>> fused;  // (format, target)
  static thread_local std::vector<const backend::LinearOut*> alone;
  fused.clear();
  alone.clear();
  const bool tensor_cores = tensor_cores_for(T);
  for (const backend::LinearOut& o : outs) {
    if (o.w->rows == 0) continue;
    const DevMatrix dw = weight(*o.w).dev();
    const int fmt = !tensor_cores || cublas_ready({&dw, 1}, 1, T, o.y.f32()) ? -1 : tc_format(dw);
    if (fmt >= 0)
      fused.push_back({fmt, TcLinearTarget{dw, o.y.f32()}});
    else
      alone.push_back(&o);
  }
  std::stable_sort(fused.begin(), fused.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  void* xc = tc_reads_x(T, x.f32()) ? nullptr : scratch(tc_split_bytes(T, 1, x.last_dim()), kTcScratch);
  int split_kind = -1;  // what xc holds: 1 f16 parts, 0 bf16 parts
  for (size_t i = 0; i < fused.size();) {
    size_t e = i, n = 0;
    std::array<TcLinearTarget, kTcMaxTargets> chunk;
    while (e < fused.size() && fused[e].first == fused[i].first && n < chunk.size()) chunk[n++] = fused[e++].second;
    const std::span<const TcLinearTarget> targets(chunk.data(), n);
    const int fmt = fused[i].first, kind = tc_split_f16(fmt) ? 1 : 0;
    const size_t part_bytes = tc_grid_split_wanted() ? tc_linears_slice_bytes(fmt, targets, T, x.f32()) : 0;
    auto* part = part_bytes ? static_cast<float*>(scratch(part_bytes, kTcScratch + 1)) : nullptr;
    launch_linears_tc(fmt, targets, x.f32(), xc, kind == split_kind, T, part);
    split_kind = kind;
    i = e;
  }
  for (const backend::LinearOut* o : alone) linear_any(*o->w, 1, x, o->y);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::grouped_linear(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) {
  begin_op();
  check_device(x, DType::F32, "grouped_linear input");
  check_device(y, DType::F32, "grouped_linear output");
  const int64_t T = x.rows(), C = w.cols;
  DEEPINFER_CHECK(groups > 0 && w.rows % groups == 0 && x.last_dim() == groups * C && y.last_dim() == w.rows &&
                      y.rows() == T,
                  "grouped_linear: weight [{}, {}] in {} groups does not fit input width {} / output width {}",
                  w.rows, w.cols, groups, x.last_dim(), y.last_dim());
  DEEPINFER_CHECK(groups <= 65535, "grouped_linear: {} groups above the CUDA grid limit", groups);
  if (T == 0 || w.rows == 0) return;
  linear_any(w, groups, x, y);
}

void CudaBackend::moe_route(const backend::RoutingParams& p, TensorView logits, std::span<const int32_t> token_ids,
                            TensorView experts, TensorView weights) {
  begin_op();
  check_device(logits, DType::F32, "moe_route logits");
  check_device(experts, DType::I32, "moe_route experts");
  check_device(weights, DType::F32, "moe_route weights");
  const int64_t T = logits.rows(), E = logits.last_dim(), K = p.top_k;
  DEEPINFER_CHECK(static_cast<int64_t>(token_ids.size()) == T && experts.numel() == T * K && weights.numel() == T * K,
                  "moe_route: {} tokens, {} ids, experts/weights not [T, {}]", T, token_ids.size(), K);
  DEEPINFER_CHECK(K >= 1 && K <= E, "moe_route: top_k {} outside [1, {}]", K, E);
  if (T == 0) return;
  MoeRouteArgs a;
  a.logits = logits.f32();
  a.tokens = T;
  a.experts = E;
  a.top_k = K;
  switch (p.scoring) {
    case backend::ScoringFunc::SqrtSoftplus: a.scoring = 0; break;
    case backend::ScoringFunc::Sigmoid: a.scoring = 1; break;
    case backend::ScoringFunc::Softmax: a.scoring = 2; break;
  }
  a.routed_scaling_factor = p.routed_scaling_factor;
  a.norm_topk_prob = p.norm_topk_prob;
  // Hash table rows and bias are staged per call (T * K ints, E floats) rather than mirrored: a
  // mirror is keyed by the host pointer, and callers' routing arrays need not outlive the call.
  std::vector<int32_t> hashed;
  if (p.tid2eid) {
    // Hash routing: the step's tid2eid rows, gathered and validated here on the host.
    hashed.resize(static_cast<size_t>(T * K));
    for (int64_t t = 0; t < T; ++t) {
      const int32_t id = token_ids[static_cast<size_t>(t)];
      DEEPINFER_CHECK(id >= 0 && id < p.tid2eid_rows, "hash routing: token id {} outside tid2eid's {} rows", id,
                      p.tid2eid_rows);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t c = p.tid2eid[static_cast<int64_t>(id) * K + k];
        DEEPINFER_CHECK(c >= 0 && c < E, "hash routing: expert {} outside [0, {})", c, E);
        hashed[static_cast<size_t>(t * K + k)] = c;
      }
    }
    a.hash_experts = stage(std::span<const int32_t>(hashed));
  } else {
    if (p.bias) a.bias = stage(std::span<const float>(p.bias, static_cast<size_t>(E)));
    // The kernel ranks (score descending, index ascending) as cpu::top_k_indices, under both tie
    // policies (reproduces_reference_ties: routing never waits for the host).
  }
  a.out_experts = experts.i32();
  a.out_weights = weights.f32();
  launch_moe_route(a);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::moe_experts(const backend::MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                              TensorView out) {
  moe_experts_filled(w, x, experts, weights, out, 0.0f);
}

// The parts of moe_experts, through its own kernels so the bits are moe_experts' (each routed row's
// result does not depend on the rows beside it; the combine kernel adds in ascending expert id).
void CudaBackend::moe_shared_expert(const backend::MoeWeights& w, TensorView x, TensorView out) {
  const int64_t T = x.rows();
  const backend::MoeWeights shared_only{{}, w.shared, w.swiglu_limit};
  const TensorView none = TensorView::contiguous(nullptr, DType::I32, {T, 0}, Device::CUDA);
  const TensorView no_weights = TensorView::contiguous(nullptr, DType::F32, {T, 0}, Device::CUDA);
  moe_experts_filled(shared_only, x, none, no_weights, out, 0.0f);
}

void CudaBackend::moe_expert_rows(const backend::MoeWeights& w, TensorView x, TensorView row_expert, TensorView y) {
  const int64_t R = x.rows();
  check_device(row_expert, DType::I32, "moe_expert_rows experts");
  DEEPINFER_CHECK(row_expert.numel() == R, "moe_expert_rows: {} expert ids for {} rows", row_expert.numel(), R);
  if (R == 0) return;
  // Each row as a token routed to its one expert with weight 1 onto -0.0: -0.0 + 1 * y is y for
  // every y (a +0.0 start would turn -0.0 results into +0.0).
  float* ones = static_cast<float*>(scratch(static_cast<size_t>(R) * sizeof(float), kTcScratch + 2));
  launch_fill(ones, R, 1.0f);
  DEEPINFER_CUDA_LAUNCHED();
  const backend::MoeWeights routed_only{w.experts, {}, w.swiglu_limit};
  moe_experts_filled(routed_only, x, row_expert.reshape({R, 1}),
                     TensorView::contiguous(ones, DType::F32, {R, 1}, Device::CUDA), y, -0.0f);
}

void CudaBackend::moe_combine(TensorView y, TensorView row_of, TensorView experts, TensorView weights,
                              TensorView out) {
  begin_op();
  check_device(y, DType::F32, "moe_combine rows");
  check_device(row_of, DType::I32, "moe_combine row_of");
  check_device(experts, DType::I32, "moe_combine experts");
  check_device(weights, DType::F32, "moe_combine weights");
  check_device(out, DType::F32, "moe_combine output");
  const int64_t T = out.rows(), D = out.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  DEEPINFER_CHECK(row_of.numel() == T * K && weights.numel() == T * K && (y.rows() == 0 || y.last_dim() == D),
                  "moe_combine: row_of / weights of {} / {} entries for [{}, {}], rows of width {}", row_of.numel(),
                  weights.numel(), T, K, y.last_dim());
  if (T == 0 || K == 0) return;
  launch_moe_combine(out.f32(), y.f32(), experts.i32(), weights.f32(), row_of.i32(), T, K, D);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::moe_experts_filled(const backend::MoeWeights& w, TensorView x, TensorView experts,
                                     TensorView weights, TensorView out, float empty_value) {
  begin_op();
  check_device(x, DType::F32, "moe_experts input");
  check_device(out, DType::F32, "moe_experts output");
  check_device(experts, DType::I32, "moe_experts experts");
  check_device(weights, DType::F32, "moe_experts weights");
  const int64_t T = x.rows(), D = x.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  const auto E = static_cast<int64_t>(w.experts.size());
  DEEPINFER_CHECK(out.numel() == T * D && experts.numel() == T * K && weights.numel() == T * K,
                  "moe_experts: input [{}, {}], experts / weights of {} / {} values, output of {}", T, D,
                  experts.numel(), weights.numel(), out.numel());
  if (T == 0) return;
  const float limit = w.swiglu_limit;
  DEEPINFER_CHECK(T * std::max<int64_t>(K, 1) < (int64_t{1} << 31), "moe_experts: {} routed rows above int32", T * K);

  const int64_t I = E > 0 && w.experts[0].w1 ? w.experts[0].w1->rows : 0;
  const int64_t Is = w.shared.w1 ? w.shared.w1->rows : 0;
  const int64_t routed = E > 0 ? T * K : 0;

  std::vector<DevMatrix> s1, s2, s3;
  if (w.shared.w1) {
    DEEPINFER_CHECK(same_shape(w.shared.w1, Is, D) && same_shape(w.shared.w3, Is, D) && same_shape(w.shared.w2, D, Is),
                    "moe_experts: shared expert does not fit D = {}", D);
    s1 = {weight(*w.shared.w1).dev()};
    s3 = {weight(*w.shared.w3).dev()};
    s2 = {weight(*w.shared.w2).dev()};
  }
  const ExpertTable* table = routed > 0 ? &expert_table(w.experts, D) : nullptr;
  // The tensor-core GEMM where the matrices allow it and tensor_cores_for the rows: the shared
  // expert's T, the routed experts' rows per expert (tensor_cores_for_experts).
  const bool tc_shared = tensor_cores_for(T);
  const int f_shared_gu = w.shared.w1 && tc_shared ? all_tc({&s1, &s3}) : -1;
  const int f_shared_down = w.shared.w1 && tc_shared ? all_tc({&s2}) : -1;
  // The routed pair shares one plan, whose tiles the CUDA-core tile takes only at <= kGemmTileRows rows:
  // both on the tensor cores or neither.
  // The routed FP4 experts on the tensor-core decode GEMV (moe_gemv_fp4_wanted; never under batch
  // invariance, whose bits are the CUDA-core tile's): up to 2 rows an expert on average in tiles of
  // 2 rows, up to 8 (V4-Flash: up to ~340 decode tokens) in tiles of 8 (moe_gemv_fp4_plan_rows).
  const bool routed_few = routed <= 2 * std::max<int64_t>(E, 1);
  const int fp4_tile_rows = table ? moe_gemv_fp4_plan_rows(routed, E, table->fp4_gemv_rows) : 0;
  const bool fp4_gemv = fp4_tile_rows > 0 && tensor_cores_when(true) && moe_gemv_fp4_wanted(T) &&
                        reinterpret_cast<uintptr_t>(x.f32()) % 16 == 0;
  const bool tc_experts = !fp4_gemv && routed > 0 && tensor_cores_for_experts(routed, E);
  const int f_routed_gu = table && tc_experts ? table->tc_gate_up : -1;
  const int f_routed_down = table && tc_experts ? table->tc_down : -1;
  const bool tc_routed = f_routed_gu >= 0 && f_routed_down >= 0;
  const int shared_rows = tc_moe_tile_rows(T);  // tensor-core schedules only
  // The CUDA-core kernels built for chunks of 1-2 rows (fewer registers): the shared expert at 1-2
  // tokens; the routed experts while they average at most 2 rows each (decode up to 2 E / top_k tokens:
  // 85 for V4-Flash's 256 experts, top 6; routed_few), whose plan then cuts tiles of 2 rows (an expert with more rows gets several tiles, which
  // run side by side and share its weights in L2).
  const bool few_rows = T <= 2;
  // FP8 shared experts at 1-2 tokens: the tensor-core GEMV where tensor cores are allowed (as linear).
  const bool shared_gemv = few_rows && tensor_cores_when(true);
  const int routed_rows = tc_routed                ? tc_moe_tile_rows(routed / std::max<int64_t>(1, std::min(E, routed)))
                          : fp4_gemv               ? fp4_tile_rows
                          : routed_few             ? 2
                                                   : kGemmTileRows;
  const int64_t max_tiles = routed > 0 ? moe_max_tiles(routed, E, routed_rows) : 0;
  const size_t index_ints = moe_index_ints(E, routed, max_tiles);

  // Every scratch buffer first (a growing scratch() synchronises and frees the old buffer).
  float* h = static_cast<float*>(scratch(static_cast<size_t>(std::max<int64_t>({T * Is, routed * I, 1})) * sizeof(float), 1));
  // The shared expert of a prefill through cuBLASLt where asked for: gate and up as one GEMM into
  // gu, the SwiGLU, then down (each checked before anything launches).
  const bool shared_cublas_asked = w.shared.w1 && cublas_gemm_enabled() && T >= cublas_min_rows();
  float* gu = shared_cublas_asked
                  ? static_cast<float*>(scratch(static_cast<size_t>(T * 2 * Is) * sizeof(float), kCublasScratch + 2))
                  : nullptr;
  const DevMatrix shared_gate_up[2] = {s1.empty() ? DevMatrix{} : s1[0], s3.empty() ? DevMatrix{} : s3[0]};
  const bool shared_cublas = shared_cublas_asked && cublas_ready(shared_gate_up, 1, T, gu) &&
                             cublas_ready({s2.data(), 1}, 1, T, out.f32());
  // Room for the split activations where a tensor-core launch splits them (tiles of more than 8 rows).
  const bool shared_split = !tc_reads_x(shared_rows, x.f32()) || !tc_reads_x(shared_rows, h);
  const bool routed_split = tc_routed && (!tc_reads_x(routed_rows, x.f32()) || !tc_reads_x(routed_rows, h));
  const bool shared_tc_split = !shared_cublas && shared_split;
  void* xc = (f_shared_gu >= 0 && shared_tc_split) || routed_split ? scratch(tc_split_bytes(T, 1, D), kTcScratch)
                                                                    : nullptr;
  void* hc = (f_shared_down >= 0 && shared_tc_split) || routed_split
                 ? scratch(std::max({tc_split_bytes(T, 1, Is), tc_split_bytes(routed, 1, I), size_t{16}}), kTcScratch + 1)
                 : nullptr;
  // The shared expert's slice partials where the grid-split schedule takes its GEMMs (gate / up, then
  // down: one buffer, used in turn).
  const size_t shared_part_bytes =
      shared_cublas || !tc_grid_split_wanted() ? 0
                    : std::max(f_shared_gu >= 0 ? tc_identity_slice_bytes(true, T, shared_rows, x.f32(), D, Is) : 0,
                               f_shared_down >= 0 ? tc_identity_slice_bytes(false, T, shared_rows, h, Is, D) : 0);
  auto* shared_part = shared_part_bytes ? static_cast<float*>(scratch(shared_part_bytes, kSharedSliceScratch)) : nullptr;
  auto* ints_base = routed > 0 ? static_cast<int32_t*>(scratch(index_ints * sizeof(int32_t), 0)) : nullptr;
  float* ye = routed > 0 ? static_cast<float*>(scratch(static_cast<size_t>(routed * D) * sizeof(float), 2)) : nullptr;

  // The shared expert writes out [T, D]; the routed experts are then added per token.
  if (w.shared.w1) {
    const DevMatrix* d1 = stage(std::span<const DevMatrix>(s1));
    const DevMatrix* d3 = stage(std::span<const DevMatrix>(s3));
    const DevMatrix* d2 = stage(std::span<const DevMatrix>(s2));
    if (shared_cublas) {
      cublas_gemm(shared_gate_up, 1, x.f32(), T, gu);
      launch_swiglu_rows(gu, T, Is, limit, h);
    } else if (f_shared_gu >= 0) {
      launch_moe_gemm_tc(true, f_shared_gu, d1, d3, nullptr, nullptr, (T + shared_rows - 1) / shared_rows, T,
                         shared_rows, nullptr, x.f32(), T, xc, D, h, Is, limit, false, shared_part);
    } else if (!shared_gemv || !launch_decode_swiglu_tc(s1[0], s3[0], x.f32(), T, limit, h)) {
      launch_moe_gate_up(common_format({&s1, &s3}), d1, d3, nullptr, nullptr, (T + kGemmTileRows - 1) / kGemmTileRows,
                         T, nullptr, x.f32(), D, Is, limit, h, few_rows);
    }
    DEEPINFER_CUDA_LAUNCHED();
    if (shared_cublas) {
      cublas_gemm({s2.data(), 1}, 1, h, T, out.f32());
    } else if (f_shared_down >= 0) {
      launch_moe_gemm_tc(false, f_shared_down, d2, d2, nullptr, nullptr, (T + shared_rows - 1) / shared_rows, T,
                         shared_rows, nullptr, h, T, hc, Is, out.f32(), D, 0.0f, false, shared_part);
    } else if (!shared_gemv || !launch_decode_gemv_tc(s2[0], 1, h, T, out.f32())) {
      launch_moe_down(common_format({&s2}), d2, nullptr, nullptr, (T + kGemmTileRows - 1) / kGemmTileRows, T, h, Is, D,
                      out.f32(), few_rows);
    }
    DEEPINFER_CUDA_LAUNCHED();
  } else {
    launch_fill(out.f32(), T * D, empty_value);
    DEEPINFER_CUDA_LAUNCHED();
  }
  if (routed == 0) return;

  const DevMatrix *d1 = table->d1, *d3 = table->d3, *d2 = table->d2;
  const MoeIndex ix = moe_index_in(ints_base, E, routed);
  launch_moe_plan(experts.i32(), T, K, E, ix, routed_rows);
  DEEPINFER_CUDA_LAUNCHED();
  if (fp4_gemv) {
    static std::once_flag logged;  // tools/gpu/test.sh checks that it ran where asked for (only then)
    std::call_once(logged, [] {
      if (std::getenv("DEEPINFER_MOE_GEMV")) fmt::print(stderr, "deepinfer: routed FP4 experts on the tensor-core decode GEMV\n");
    });
    launch_moe_gemv_fp4(true, d1, d3, ix.tiles, ix.tile_count, max_tiles, routed_rows, ix.row_token, x.f32(), D, h, I,
                        limit);
  } else if (tc_routed) {
    launch_moe_gemm_tc(true, f_routed_gu, d1, d3, ix.tiles, ix.tile_count, max_tiles, 0, routed_rows, ix.row_token,
                       x.f32(), T, xc, D, h, I, limit, true, nullptr);
  } else {
    launch_moe_gate_up(table->gate_up_format, d1, d3, ix.tiles, ix.tile_count, max_tiles, 0, ix.row_token, x.f32(),
                       D, I, limit, h, routed_few);
  }
  DEEPINFER_CUDA_LAUNCHED();
  if (fp4_gemv) {
    launch_moe_gemv_fp4(false, d2, d2, ix.tiles, ix.tile_count, max_tiles, routed_rows, nullptr, h, I, ye, D, 0.0f);
  } else if (tc_routed) {
    launch_moe_gemm_tc(false, f_routed_down, d2, d2, ix.tiles, ix.tile_count, max_tiles, 0, routed_rows, nullptr, h,
                       routed, hc, I, ye, D, 0.0f, true, nullptr);
  } else {
    launch_moe_down(table->down_format, d2, ix.tiles, ix.tile_count, max_tiles, 0, h, I, D, ye, routed_few);
  }
  DEEPINFER_CUDA_LAUNCHED();
  launch_moe_combine(out.f32(), ye, experts.i32(), weights.f32(), ix.row_of, T, K, D);
  DEEPINFER_CUDA_LAUNCHED();
}

}  // namespace deepinfer::cuda
