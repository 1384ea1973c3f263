// CUDA dense ops, host side: shape checks, weight mirrors and staging, then the kernels of
// dense_kernels.cu.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dense_kernels.h"

namespace deepinfer::cuda {

void CudaBackend::gather_rows(TensorView src, std::span<const int64_t> rows, TensorView dst) {
  begin_op();
  check_device(src, DType::F32, "gather_rows input");
  check_device(dst, DType::F32, "gather_rows output");
  const int64_t T = src.rank ? src.dim(0) : 0, width = T ? src.numel() / T : 0;
  const auto R = static_cast<int64_t>(rows.size());
  DEEPINFER_CHECK(dst.numel() == R * width, "gather_rows: output holds {} values, {} rows of {} need {}", dst.numel(),
                  R, width, R * width);
  for (int64_t r : rows) DEEPINFER_CHECK(r >= 0 && r < T, "gather_rows: row {} outside [0, {})", r, T);
  if (R == 0) return;
  launch_gather_rows(src.f32(), stage(rows), R, width, dst.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::embed(const WeightMatrix& table, std::span<const int32_t> ids, TensorView out) {
  begin_op();
  check_device(out, DType::F32, "embed output");
  const auto T = static_cast<int64_t>(ids.size());
  const int64_t D = table.cols, copies = out.numel() / std::max<int64_t>(1, T * D);
  DEEPINFER_CHECK(out.numel() == T * copies * D && out.last_dim() == D, "embed: output does not hold {} x {} rows of {}",
                  T, copies, D);
  for (int32_t id : ids)
    DEEPINFER_CHECK(id >= 0 && id < table.rows, "token id {} outside the embedding's {} rows", id, table.rows);
  if (T == 0) return;
  launch_embed(weight(table).dev(), stage(ids), T, copies, out.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::embed_ids(const WeightMatrix& table, TensorView ids, TensorView out) {
  begin_op();
  check_device(ids, DType::I32, "embed_ids ids");
  check_device(out, DType::F32, "embed_ids output");
  const int64_t T = ids.numel(), D = table.cols, copies = out.numel() / std::max<int64_t>(1, T * D);
  DEEPINFER_CHECK(out.numel() == T * copies * D && out.last_dim() == D,
                  "embed_ids: output does not hold {} x {} rows of {}", T, copies, D);
  if (T == 0) return;
  launch_embed(weight(table).dev(), ids.i32(), T, copies, out.f32());  // ids outside the table: NaN rows
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::rms_norm(TensorView x, const float* weight_host, float eps, TensorView out) {
  begin_op();
  check_device(x, DType::F32, "rms_norm input");
  check_device(out, DType::F32, "rms_norm output");
  DEEPINFER_CHECK(out.numel() == x.numel(), "rms_norm: output size {} != input size {}", out.numel(), x.numel());
  const int64_t n = x.last_dim();
  launch_rms_norm(x.f32(), weight_host ? floats(weight_host, static_cast<size_t>(n)) : nullptr, eps, x.rows(), n,
                  out.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::rope(TensorView x, std::span<const int64_t> positions, const backend::RopeFreqs& freqs, bool inverse) {
  begin_op();
  check_device(x, DType::F32, "rope input");
  DEEPINFER_CHECK(x.rank == 3 && x.dim(0) == static_cast<int64_t>(positions.size()),
                  "rope: expected [T, heads, head_dim] with T = {} positions", positions.size());
  DEEPINFER_CHECK(2 * freqs.half() <= x.dim(2), "rope: {} rotary pairs do not fit a head of {}", freqs.half(), x.dim(2));
  if (positions.empty()) return;
  launch_rope(x.f32(), stage(positions), x.dim(0), x.dim(1), x.dim(2), dev_rope(freqs), inverse);
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::mhc_pre(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                          TensorView input, TensorView post, TensorView comb) {
  begin_op();
  for (const auto* t : {&residual, &input, &post, &comb}) check_device(*t, DType::F32, "mhc_pre tensor");
  const int64_t n = p.hc_mult, D = residual.last_dim(), T = residual.rows() / n, mix = (2 + n) * n;
  DEEPINFER_CHECK(residual.numel() == T * n * D && input.numel() == T * D && post.numel() == T * n &&
                      comb.numel() == T * n * n,
                  "mhc_pre: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  if (T == 0) return;
  const auto [sumsq, dots] = mhc_partials(w, residual, T, n * D, mix);
  launch_mhc_pre_finish(sumsq, dots, T, n, D, p.norm_eps, floats(w.base, static_cast<size_t>(mix)), floats(w.scale, 3),
                        p.hc_eps, p.sinkhorn_iters, residual.f32(), input.f32(), post.f32(), comb.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

std::pair<double*, float*> CudaBackend::mhc_partials(const backend::MhcWeights& w, TensorView residual,
                                                     int64_t tokens, int64_t width, int64_t mixes) {
  const int64_t chunks = mhc_mix_chunks(width);
  auto* sumsq = static_cast<double*>(scratch(static_cast<size_t>(tokens * chunks) * sizeof(double), 0));
  auto* dots = static_cast<float*>(scratch(static_cast<size_t>(tokens * chunks * mixes) * sizeof(float), 1));
  launch_mhc_mix_partials(residual.f32(), tokens, width, floats(w.fn, static_cast<size_t>(mixes * width)), mixes, sumsq,
                          dots);
  DEEPINFER_CUDA_LAUNCHED();
  return {sumsq, dots};
}

void CudaBackend::mhc_post(TensorView residual, TensorView out, TensorView post, TensorView comb) {
  begin_op();
  for (const auto* t : {&residual, &out, &post, &comb}) check_device(*t, DType::F32, "mhc_post tensor");
  const int64_t D = out.last_dim(), T = out.rows(), n = post.numel() / std::max<int64_t>(T, 1);
  DEEPINFER_CHECK(residual.numel() == T * n * D && comb.numel() == T * n * n,
                  "mhc_post: tensors do not match T = {}, hc_mult = {}, D = {}", T, n, D);
  if (T == 0) return;
  if (launch_mhc_post_inplace(residual.f32(), out.f32(), post.f32(), comb.f32(), T, n, D)) {
    DEEPINFER_CUDA_LAUNCHED();
    return;
  }
  auto* old = static_cast<float*>(scratch(static_cast<size_t>(T * n * D) * sizeof(float), 0));
  DEEPINFER_CUDA_CHECK(stream_copy(old, residual.data, static_cast<size_t>(T * n * D) * sizeof(float),
                                  cudaMemcpyDeviceToDevice));
  launch_mhc_post(old, out.f32(), post.f32(), comb.f32(), T, n, D, residual.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

void CudaBackend::mhc_head(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                           TensorView hidden) {
  begin_op();
  check_device(residual, DType::F32, "mhc_head input");
  check_device(hidden, DType::F32, "mhc_head output");
  const int64_t n = p.hc_mult, D = hidden.last_dim(), rows = hidden.rows();
  DEEPINFER_CHECK(residual.numel() == rows * n * D, "mhc_head: residual does not hold {} x {} x {}", rows, n, D);
  if (rows == 0) return;
  const auto [sumsq, dots] = mhc_partials(w, residual, rows, n * D, n);
  launch_mhc_head_finish(sumsq, dots, rows, n, D, p.norm_eps, floats(w.base, static_cast<size_t>(n)), floats(w.scale, 1),
                         p.hc_eps, residual.f32(), hidden.f32());
  DEEPINFER_CUDA_LAUNCHED();
}

}  // namespace deepinfer::cuda
