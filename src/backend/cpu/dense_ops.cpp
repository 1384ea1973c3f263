// CPU reference: dense ops (linear, grouped linear, embedding, norms, rope), mHC and MoE.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {


void check_f32_contiguous(const TensorView& t, const char* what) {
  DEEPINFER_CHECK(t.dtype == DType::F32 && t.device == Device::CPU && t.is_contiguous(),
                  "{}: expected a contiguous F32 CPU tensor", what);
}

// A float32 matrix view over a mixer's weights, so it goes through the same kernels as the rest.
WeightMatrix f32_matrix(const float* data, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.dtype = DType::F32;
  w.rows = rows;
  w.cols = cols;
  w.data = reinterpret_cast<const std::byte*>(data);
  return w;
}

}  // namespace

void CpuBackend::matmul(const WeightMatrix& w, const float* x, int64_t tokens, float* y) {
  gemm_.run(w, x, tokens, y);  // batch-invariant in both modes (see packed_linear.h)
}

void CpuBackend::linear(const WeightMatrix& w, TensorView x, TensorView y) {
  check_f32_contiguous(x, "linear input");
  check_f32_contiguous(y, "linear output");
  const int64_t T = x.rows();
  DEEPINFER_CHECK(x.last_dim() == w.cols && y.last_dim() == w.rows && y.rows() == T,
                  "linear: weight [{}, {}] does not fit input [{}, {}] / output [{}, {}]", w.rows, w.cols, T,
                  x.last_dim(), y.rows(), y.last_dim());
  matmul(w, x.f32(), T, y.f32());
}

void CpuBackend::grouped_linear(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) {
  check_f32_contiguous(x, "grouped_linear input");
  check_f32_contiguous(y, "grouped_linear output");
  const int64_t T = x.rows(), C = w.cols, R = w.rows / groups;
  DEEPINFER_CHECK(groups > 0 && w.rows % groups == 0 && x.last_dim() == groups * C && y.last_dim() == w.rows,
                  "grouped_linear: weight [{}, {}] in {} groups does not fit input width {} / output width {}",
                  w.rows, w.cols, groups, x.last_dim(), y.last_dim());
  scratch_a_.resize(static_cast<size_t>(T * C));
  scratch_b_.resize(static_cast<size_t>(T * R));
  const float* xs = x.f32();
  float* ys = y.f32();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < T; ++t) std::copy_n(xs + t * groups * C + g * C, C, scratch_a_.data() + t * C);
    matmul(w.row_slice(g * R, R), scratch_a_.data(), T, scratch_b_.data());
    for (int64_t t = 0; t < T; ++t) std::copy_n(scratch_b_.data() + t * R, R, ys + t * w.rows + g * R);
  }
}

void CpuBackend::gather_rows(TensorView src, std::span<const int64_t> rows, TensorView dst) {
  check_f32_contiguous(src, "gather_rows input");
  check_f32_contiguous(dst, "gather_rows output");
  const int64_t T = src.rank ? src.dim(0) : 0, width = T ? src.numel() / T : 0;
  const auto R = static_cast<int64_t>(rows.size());
  DEEPINFER_CHECK(dst.numel() == R * width, "gather_rows: output holds {} values, {} rows of {} need {}", dst.numel(),
                  R, width, R * width);
  for (int64_t i = 0; i < R; ++i) {
    const int64_t r = rows[static_cast<size_t>(i)];
    DEEPINFER_CHECK(r >= 0 && r < T, "gather_rows: row {} outside [0, {})", r, T);
    std::memcpy(dst.f32() + i * width, src.f32() + r * width, static_cast<size_t>(width) * sizeof(float));
  }
}

void CpuBackend::embed(const WeightMatrix& table, std::span<const int32_t> ids, TensorView out) {
  check_f32_contiguous(out, "embed output");
  const auto T = static_cast<int64_t>(ids.size());
  const int64_t D = table.cols, copies = out.numel() / std::max<int64_t>(1, T * D);
  DEEPINFER_CHECK(out.numel() == T * copies * D && out.last_dim() == D, "embed: output does not hold {} x {} rows of {}",
                  T, copies, D);
  float* o = out.f32();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids[static_cast<size_t>(t)];
    DEEPINFER_CHECK(id >= 0 && id < table.rows, "token id {} outside the embedding's {} rows", id, table.rows);
    float* row = o + t * copies * D;
    table.row_to_float(id, row);
    for (int64_t i = 1; i < copies; ++i) std::copy_n(row, D, row + i * D);
  }
}

void CpuBackend::embed_ids(const WeightMatrix& table, TensorView ids, TensorView out) {
  DEEPINFER_CHECK(ids.dtype == DType::I32 && ids.device == Device::CPU && ids.is_contiguous(),
                  "embed_ids: ids must be a contiguous I32 CPU tensor");
  embed(table, std::span<const int32_t>(ids.i32(), static_cast<size_t>(ids.numel())), out);
}

void CpuBackend::rms_norm(TensorView x, const float* weight, float eps, TensorView out) {
  check_f32_contiguous(x, "rms_norm input");
  check_f32_contiguous(out, "rms_norm output");
  DEEPINFER_CHECK(out.numel() == x.numel(), "rms_norm: output size {} != input size {}", out.numel(), x.numel());
  const int64_t n = x.last_dim(), rows = x.rows();
  const float* xs = x.f32();
  float* os = out.f32();
  ThreadPool::global().parallel_for(
      static_cast<size_t>(rows),
      [&](size_t b, size_t e) {
        rms_norm_to(xs + static_cast<int64_t>(b) * n, os + static_cast<int64_t>(b) * n, static_cast<int64_t>(e - b), n,
                    weight, eps);
      },
      std::max<size_t>(1, static_cast<size_t>(16384 / std::max<int64_t>(n, 1))));
}

void CpuBackend::rope(TensorView x, std::span<const int64_t> positions, const backend::RopeFreqs& freqs, bool inverse) {
  check_f32_contiguous(x, "rope input");
  DEEPINFER_CHECK(x.rank == 3 && x.dim(0) == static_cast<int64_t>(positions.size()),
                  "rope: expected [T, heads, head_dim] with T = {} positions", positions.size());
  const int64_t heads = x.dim(1), hd = x.dim(2), half = freqs.half();
  DEEPINFER_CHECK(2 * half <= hd, "rope: {} rotary pairs do not fit a head of {}", half, hd);
  float* xs = x.f32();
  ThreadPool::global().parallel_for(positions.size(), [&](size_t b, size_t e) {
    thread_local std::vector<float> cos, sin;
    cos.resize(static_cast<size_t>(half));
    sin.resize(static_cast<size_t>(half));
    for (size_t t = b; t < e; ++t) {
      rope_angles(freqs, positions[t], cos.data(), sin.data());
      for (int64_t h = 0; h < heads; ++h)
        rope_interleaved(xs + (static_cast<int64_t>(t) * heads + h) * hd, hd, cos.data(), sin.data(), half,
                         inverse ? -1.0f : 1.0f);
    }
  });
}

void CpuBackend::mhc_mixes(const float* fn, int64_t mixes, const float* X, int64_t rows, int64_t width, float eps) {
  scratch_a_.resize(static_cast<size_t>(rows * width));
  scratch_b_.resize(static_cast<size_t>(rows * mixes));
  ThreadPool::global().parallel_for(static_cast<size_t>(rows), [&](size_t b, size_t e) {
    rms_norm_to(X + static_cast<int64_t>(b) * width, scratch_a_.data() + static_cast<int64_t>(b) * width,
                static_cast<int64_t>(e - b), width, nullptr, eps);
  });
  matmul(f32_matrix(fn, mixes, width), scratch_a_.data(), rows, scratch_b_.data());
}

void CpuBackend::mhc_split(const float* m, const backend::MhcWeights& w, const backend::MhcParams& p, float* pre,
                           float* post, float* c) {
  const int64_t n = p.hc_mult;
  const float eps = p.hc_eps;
  for (int64_t i = 0; i < n; ++i) {
    pre[i] = sigmoid(m[i] * w.scale[0] + w.base[i]) + eps;
    post[i] = 2.0f * sigmoid(m[n + i] * w.scale[1] + w.base[n + i]);
  }
  // c[j * n + k]: weight of copy j in output copy k
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < n; ++k) c[j * n + k] = m[2 * n + j * n + k] * w.scale[2] + w.base[2 * n + j * n + k];
    softmax(c + j * n, n);
    for (int64_t k = 0; k < n; ++k) c[j * n + k] += eps;
  }
  auto normalise_columns = [&] {
    for (int64_t k = 0; k < n; ++k) {
      float s = 0;
      for (int64_t j = 0; j < n; ++j) s += c[j * n + k];
      for (int64_t j = 0; j < n; ++j) c[j * n + k] /= (s + eps);
    }
  };
  auto normalise_rows = [&] {
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t k = 0; k < n; ++k) s += c[j * n + k];
      for (int64_t k = 0; k < n; ++k) c[j * n + k] /= (s + eps);
    }
  };
  normalise_columns();
  for (int64_t it = 1; it < p.sinkhorn_iters; ++it) {
    normalise_rows();
    normalise_columns();
  }
}

void CpuBackend::mhc_pre(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                         TensorView input, TensorView post, TensorView comb) {
  for (const auto* t : {&residual, &input, &post, &comb}) check_f32_contiguous(*t, "mhc_pre tensor");
  const int64_t n = p.hc_mult, D = residual.last_dim(), T = residual.rows() / n, mix = (2 + n) * n;
  DEEPINFER_CHECK(residual.numel() == T * n * D && input.numel() == T * D && post.numel() == T * n &&
                      comb.numel() == T * n * n,
                  "mhc_pre: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  const float* X = residual.f32();
  mhc_mixes(w.fn, mix, X, T, n * D, p.norm_eps);
  float* in_all = input.f32();
  float* post_all = post.f32();
  float* comb_all = comb.f32();
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    thread_local std::vector<float> pre;
    pre.resize(static_cast<size_t>(n));
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      mhc_split(scratch_b_.data() + t * mix, w, p, pre.data(), post_all + t * n, comb_all + t * n * n);
      float* in = in_all + t * D;
      const float* x = X + t * n * D;
      std::fill(in, in + D, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float pi = pre[static_cast<size_t>(i)];
        for (int64_t d = 0; d < D; ++d) in[d] += pi * x[i * D + d];
      }
    }
  });
}

void CpuBackend::mhc_post(TensorView residual, TensorView out, TensorView post, TensorView comb) {
  for (const auto* t : {&residual, &out, &post, &comb}) check_f32_contiguous(*t, "mhc_post tensor");
  const int64_t D = out.last_dim(), T = out.rows(), n = post.numel() / std::max<int64_t>(T, 1);
  DEEPINFER_CHECK(residual.numel() == T * n * D && comb.numel() == T * n * n,
                  "mhc_post: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  float* X = residual.f32();
  const float* o = out.f32();
  const float* ps = post.f32();
  const float* cs = comb.f32();
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    thread_local std::vector<float> old;
    old.resize(static_cast<size_t>(n * D));
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      float* x = X + t * n * D;
      std::copy(x, x + n * D, old.begin());
      const float* c = cs + t * n * n;
      // Per element: post * out, then the copies added in order j = 0..n-1 (loops ordered so the
      // compiler vectorises over d; the arithmetic per element is unchanged).
      for (int64_t k = 0; k < n; ++k) {
        const float p = ps[t * n + k];
        float* xk = x + k * D;
        for (int64_t d = 0; d < D; ++d) xk[d] = p * o[t * D + d];
        for (int64_t j = 0; j < n; ++j) {
          const float cjk = c[j * n + k];
          const float* oj = old.data() + j * D;
          for (int64_t d = 0; d < D; ++d) xk[d] += cjk * oj[d];
        }
      }
    }
  });
}

void CpuBackend::mhc_head(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                          TensorView hidden) {
  check_f32_contiguous(residual, "mhc_head input");
  check_f32_contiguous(hidden, "mhc_head output");
  const int64_t n = p.hc_mult, D = hidden.last_dim(), rows = hidden.rows();
  DEEPINFER_CHECK(residual.numel() == rows * n * D, "mhc_head: residual does not hold {} x {} x {}", rows, n, D);
  const float* X = residual.f32();
  mhc_mixes(w.fn, n, X, rows, n * D, p.norm_eps);
  float* h = hidden.f32();
  std::fill(h, h + rows * D, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = X + r * n * D;
    for (int64_t i = 0; i < n; ++i) {
      const float pre = sigmoid(scratch_b_[static_cast<size_t>(r * n + i)] * w.scale[0] + w.base[i]) + p.hc_eps;
      for (int64_t d = 0; d < D; ++d) h[r * D + d] += pre * x[i * D + d];
    }
  }
}

void CpuBackend::moe_route(const backend::RoutingParams& p, TensorView logits, std::span<const int32_t> token_ids,
                           TensorView experts, TensorView weights) {
  check_f32_contiguous(logits, "moe_route logits");
  const int64_t T = logits.rows(), E = logits.last_dim(), K = p.top_k;
  DEEPINFER_CHECK(static_cast<int64_t>(token_ids.size()) == T && experts.numel() == T * K && weights.numel() == T * K,
                  "moe_route: {} tokens, {} ids, experts/weights not [T, {}]", T, token_ids.size(), K);
  DEEPINFER_CHECK(K >= 1 && K <= E, "moe_route: top_k {} outside [1, {}]", K, E);
  float* s_all = logits.f32();
  int32_t* ex = experts.i32();
  float* wt = weights.f32();
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    thread_local std::vector<float> biased;
    biased.resize(static_cast<size_t>(E));
    for (size_t tt = b; tt < e; ++tt) {
      const auto t = static_cast<int64_t>(tt);
      float* s = s_all + t * E;  // scores replace the logits in place
      switch (p.scoring) {
        case backend::ScoringFunc::SqrtSoftplus:
          for (int64_t j = 0; j < E; ++j) s[j] = std::sqrt(softplus(s[j]));
          break;
        case backend::ScoringFunc::Sigmoid:
          for (int64_t j = 0; j < E; ++j) s[j] = sigmoid(s[j]);
          break;
        case backend::ScoringFunc::Softmax:
          softmax(s, E);
          break;
      }
      std::vector<int32_t> chosen;
      if (p.tid2eid) {
        const int32_t id = token_ids[tt];
        DEEPINFER_CHECK(id >= 0 && id < p.tid2eid_rows, "hash routing: token id {} outside tid2eid's {} rows", id,
                        p.tid2eid_rows);
        chosen.assign(p.tid2eid + static_cast<int64_t>(id) * K, p.tid2eid + (static_cast<int64_t>(id) + 1) * K);
        for (int32_t c : chosen) DEEPINFER_CHECK(c >= 0 && c < E, "hash routing: expert {} outside [0, {})", c, E);
      } else {
        for (int64_t j = 0; j < E; ++j) biased[static_cast<size_t>(j)] = s[j] + (p.bias ? p.bias[j] : 0.0f);
        chosen = p.ties == backend::TopKTies::Reference ? torch_top_k_indices(biased, K) : top_k_indices(biased, K);
      }
      float sum = 0.0f;
      for (int32_t c : chosen) sum += s[c];
      const float norm = p.norm_topk_prob ? p.routed_scaling_factor / (sum + 1e-20f) : p.routed_scaling_factor;
      for (int64_t k = 0; k < K; ++k) {
        ex[t * K + k] = chosen[static_cast<size_t>(k)];
        wt[t * K + k] = s[chosen[static_cast<size_t>(k)]] * norm;
      }
    }
  });
}

void CpuBackend::swiglu(const backend::SwigluExpert& e, const float* x, int64_t tokens, float limit, float* out) {
  const int64_t I = e.w1->rows;
  scratch_c_.resize(static_cast<size_t>(tokens * I));
  scratch_d_.resize(static_cast<size_t>(tokens * I));
  matmul(*e.w1, x, tokens, scratch_c_.data());
  matmul(*e.w3, x, tokens, scratch_d_.data());
  for (size_t i = 0; i < static_cast<size_t>(tokens * I); ++i) {
    const float g = std::min(scratch_c_[i], limit);
    const float u = std::clamp(scratch_d_[i], -limit, limit);
    scratch_c_[i] = silu(g) * u;
  }
  matmul(*e.w2, scratch_c_.data(), tokens, out);
}

const std::vector<std::vector<std::pair<int64_t, float>>>& CpuBackend::group_tokens_by_expert(
    TensorView experts, TensorView weights, int64_t T, int64_t K, int64_t E, const char* op) {
  const int32_t* ex = experts.i32();
  const float* wt = weights.f32();
  routed_.resize(static_cast<size_t>(E));
  for (auto& list : routed_) list.clear();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = ex[t * K + k];
      DEEPINFER_CHECK(e >= 0 && e < E, "{}: expert {} outside [0, {})", op, e, E);
      routed_[static_cast<size_t>(e)].emplace_back(t, wt[t * K + k]);
    }
  return routed_;
}

void CpuBackend::moe_experts(const backend::MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                             TensorView out) {
  check_f32_contiguous(x, "moe_experts input");
  check_f32_contiguous(out, "moe_experts output");
  const int64_t T = x.rows(), D = x.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  const auto E = static_cast<int64_t>(w.experts.size());
  const int32_t* ex = experts.i32();
  moe_shared_expert(w, x, out);
  // Every routed row of the step in expert order (within an expert: token, then k), each expert run
  // on its slice; then each token adds its experts in ascending id (the same order for every batch).
  auto& first_row = expert_rows_;
  first_row.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < T * K; ++i) {
    const int32_t e = ex[i];
    DEEPINFER_CHECK(e >= 0 && e < E, "moe_experts: expert {} outside [0, {})", e, E);
    ++first_row[static_cast<size_t>(e + 1)];
  }
  for (int64_t e = 0; e < E; ++e) first_row[static_cast<size_t>(e + 1)] += first_row[static_cast<size_t>(e)];
  const int64_t rows = first_row[static_cast<size_t>(E)];
  auto& fill = token_fill_;
  fill.assign(first_row.begin(), first_row.end() - 1);
  moe_row_of_.resize(static_cast<size_t>(T * K));
  moe_row_expert_.resize(static_cast<size_t>(rows));
  for (int64_t i = 0; i < T * K; ++i) {
    const int64_t row = fill[static_cast<size_t>(ex[i])]++;
    moe_row_of_[static_cast<size_t>(i)] = static_cast<int32_t>(row);
    moe_row_expert_[static_cast<size_t>(row)] = ex[i];
  }
  auto& xe = scratch_a_;
  auto& ye = scratch_b_;
  xe.resize(static_cast<size_t>(rows * D));
  ye.resize(static_cast<size_t>(rows * D));
  ThreadPool::global().parallel_for(static_cast<size_t>(T * K), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      std::copy_n(x.f32() + static_cast<int64_t>(i) / K * D, D, xe.begin() + moe_row_of_[i] * D);
  });
  moe_expert_rows(w, TensorView::f32(xe.data(), {rows, D}), TensorView::i32(moe_row_expert_.data(), {rows}),
                  TensorView::f32(ye.data(), {rows, D}));
  moe_combine(TensorView::f32(ye.data(), {rows, D}), TensorView::i32(moe_row_of_.data(), {T, K}), experts, weights,
              out);
}

void CpuBackend::moe_shared_expert(const backend::MoeWeights& w, TensorView x, TensorView out) {
  check_f32_contiguous(x, "moe_shared_expert input");
  check_f32_contiguous(out, "moe_shared_expert output");
  const int64_t T = x.rows(), D = x.last_dim();
  DEEPINFER_CHECK(out.numel() == T * D, "moe_shared_expert: output of {} values for [{}, {}]", out.numel(), T, D);
  if (w.shared.w1)
    swiglu(w.shared, x.f32(), T, w.swiglu_limit, out.f32());
  else
    std::fill_n(out.f32(), T * D, 0.0f);
}

void CpuBackend::moe_expert_rows(const backend::MoeWeights& w, TensorView x, TensorView row_expert, TensorView y) {
  check_f32_contiguous(x, "moe_expert_rows input");
  check_f32_contiguous(y, "moe_expert_rows output");
  const int64_t R = x.rows(), D = x.last_dim();
  const auto E = static_cast<int64_t>(w.experts.size());
  DEEPINFER_CHECK(row_expert.numel() == R, "moe_expert_rows: {} expert ids for {} rows", row_expert.numel(), R);
  const int32_t* re = row_expert.i32();
  bool sorted = true;
  for (int64_t i = 0; i < R; ++i) {
    DEEPINFER_CHECK(re[i] >= 0 && re[i] < E, "moe_expert_rows: expert {} outside [0, {})", re[i], E);
    sorted = sorted && (i == 0 || re[i - 1] <= re[i]);
  }
  if (R == 0) return;
  const int64_t Dout = w.experts[static_cast<size_t>(re[0])].w2->rows;
  DEEPINFER_CHECK(y.numel() == R * Dout, "moe_expert_rows: output of {} values for [{}, {}]", y.numel(), R, Dout);
  // Rows in expert order run straight on their slices; otherwise they are grouped (stably) first.
  const float* xs = x.f32();
  float* ys = y.f32();
  std::vector<int64_t> order;
  if (!sorted) {
    order.resize(static_cast<size_t>(R));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return re[a] < re[b]; });
    ep_x_.resize(static_cast<size_t>(R * D));
    ep_y_.resize(static_cast<size_t>(R * Dout));
    for (int64_t i = 0; i < R; ++i) std::copy_n(xs + order[static_cast<size_t>(i)] * D, D, ep_x_.begin() + i * D);
    xs = ep_x_.data();
    ys = ep_y_.data();
  }
  for (int64_t r0 = 0; r0 < R;) {
    const int32_t e = re[sorted ? r0 : order[static_cast<size_t>(r0)]];
    int64_t r1 = r0 + 1;
    while (r1 < R && re[sorted ? r1 : order[static_cast<size_t>(r1)]] == e) ++r1;
    swiglu(w.experts[static_cast<size_t>(e)], xs + r0 * D, r1 - r0, w.swiglu_limit, ys + r0 * Dout);
    r0 = r1;
  }
  if (!sorted)
    for (int64_t i = 0; i < R; ++i)
      std::copy_n(ep_y_.begin() + i * Dout, Dout, y.f32() + order[static_cast<size_t>(i)] * Dout);
}

void CpuBackend::moe_combine(TensorView y, TensorView row_of, TensorView experts, TensorView weights,
                             TensorView out) {
  check_f32_contiguous(y, "moe_combine rows");
  check_f32_contiguous(out, "moe_combine output");
  const int64_t T = out.rows(), D = out.last_dim(), K = experts.numel() / std::max<int64_t>(T, 1);
  const int64_t R = y.rows();
  DEEPINFER_CHECK(row_of.numel() == T * K && weights.numel() == T * K,
                  "moe_combine: row_of / weights of {} / {} entries for [{}, {}]", row_of.numel(), weights.numel(), T, K);
  DEEPINFER_CHECK(R == 0 || y.last_dim() == D, "moe_combine: rows of width {} for an output of width {}",
                  y.last_dim(), D);
  const int32_t* ex = experts.i32();
  const int32_t* ro = row_of.i32();
  const float* wt = weights.f32();
  for (int64_t i = 0; i < T * K; ++i)
    DEEPINFER_CHECK(ro[i] < R, "moe_combine: row {} of token {} outside the {} rows", ro[i], i / K, R);
  ThreadPool::global().parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    std::vector<int64_t> ks(static_cast<size_t>(K));
    for (size_t t = b; t < e; ++t) {
      const int64_t base = static_cast<int64_t>(t) * K;
      std::iota(ks.begin(), ks.end(), int64_t{0});
      // Ascending expert id, ties by k: the order moe_experts adds in.
      std::stable_sort(ks.begin(), ks.end(), [&](int64_t a, int64_t c) { return ex[base + a] < ex[base + c]; });
      float* row = out.f32() + static_cast<int64_t>(t) * D;
      for (int64_t k : ks) {
        if (ro[base + k] < 0) continue;
        const float wgt = wt[base + k];
        const float* yr = y.f32() + static_cast<int64_t>(ro[base + k]) * D;
        for (int64_t d = 0; d < D; ++d) row[d] += wgt * yr[d];
      }
    }
  });
}

}  // namespace deepinfer::cpu
