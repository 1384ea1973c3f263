#include "dist/ep_moe.h"

#include <cstring>

#include "core/buffer.h"
#include "core/error.h"

namespace deepinfer::dist {

namespace {

template <typename T>
void append(Bytes& b, const T* p, size_t n) {
  if (n == 0) return;  // memcpy's pointers must be valid even for 0 bytes (an empty vector's are null)
  const size_t at = b.size();
  b.resize(at + n * sizeof(T));
  std::memcpy(b.data() + at, p, n * sizeof(T));
}

// b with room for `bytes` on `alloc` (kept across calls: no allocation per MoE layer once sizes settle).
void* reserve(Buffer& b, size_t bytes, Allocator& alloc) {
  if (b.size() < bytes || b.allocator() != &alloc) b = Buffer(bytes, alloc);
  return b.data();
}

}  // namespace

ExpertParallelMoe::ExpertParallelMoe(EpTransport& transport, ExpertPlacement placement, int64_t load_window_steps)
    : transport_(transport),
      placement_(std::move(placement)),
      load_(placement_.layers, placement_.experts, load_window_steps) {
  DEEPINFER_CHECK(placement_.ranks == transport_.world_size(), "expert placement over {} ranks in a group of {}",
                  placement_.ranks, transport_.world_size());
}

void ExpertParallelMoe::moe_experts(backend::Backend& be, int64_t layer, const backend::MoeWeights& w, TensorView x,
                                    TensorView experts, TensorView weights, TensorView out) {
  const int W = transport_.world_size(), me = transport_.rank();
  const int64_t T = x.rows(), D = x.last_dim(), K = experts.last_dim();
  const auto E = static_cast<int64_t>(w.experts.size());
  DEEPINFER_CHECK(E == placement_.experts && layer >= 0 && layer < placement_.layers,
                  "expert parallelism: layer {} with {} experts, placed for {} layers x {} experts", layer, E,
                  placement_.layers, placement_.experts);
  try {
    if (T > 0) be.moe_shared_expert(w, x, out);

    // Routed rows to their owners: per destination, records of (expert id, D floats).
    std::vector<int32_t> ex(static_cast<size_t>(T * K));
    std::vector<float> xh(static_cast<size_t>(T * D));
    if (T > 0) {
      be.copy_to_host(ex.data(), experts.data, ex.size() * sizeof(int32_t));
      be.copy_to_host(xh.data(), x.data, xh.size() * sizeof(float));
    }
    load_.record(layer, ex);
    const size_t record = sizeof(int32_t) + static_cast<size_t>(D) * sizeof(float);
    std::vector<Bytes> send(static_cast<size_t>(W));
    std::vector<std::pair<int, int64_t>> where(static_cast<size_t>(T * K));  // (owner, record index)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = ex[static_cast<size_t>(t * K + k)];
        DEEPINFER_CHECK(e >= 0 && e < E, "expert parallelism: expert {} outside [0, {})", e, E);
        const int dest = placement_.owner(layer, e, t);
        Bytes& b = send[static_cast<size_t>(dest)];
        where[static_cast<size_t>(t * K + k)] = {dest, static_cast<int64_t>(b.size() / record)};
        append(b, &e, 1);
        append(b, xh.data() + t * D, static_cast<size_t>(D));
        (dest == me ? stats_.rows_local : stats_.rows_sent) += 1;
      }
    std::vector<Bytes> recv = transport_.all_to_all(std::move(send));

    // The rows this rank serves, in source-rank order.
    int64_t R = 0;
    for (const Bytes& b : recv) {
      DEEPINFER_CHECK(b.size() % record == 0, "expert parallelism: a dispatch of {} bytes is not whole rows",
                      b.size());
      R += static_cast<int64_t>(b.size() / record);
    }
    std::vector<float> rows_x(static_cast<size_t>(R * D)), rows_y(static_cast<size_t>(R * D));
    std::vector<int32_t> rows_e(static_cast<size_t>(R));
    int64_t r = 0;
    for (int s = 0; s < W; ++s) {
      const Bytes& b = recv[static_cast<size_t>(s)];
      for (size_t off = 0; off < b.size(); off += record, ++r) {
        std::memcpy(&rows_e[static_cast<size_t>(r)], b.data() + off, sizeof(int32_t));
        std::memcpy(rows_x.data() + r * D, b.data() + off + sizeof(int32_t), static_cast<size_t>(D) * sizeof(float));
        DEEPINFER_CHECK(placement_.holds(me, layer, rows_e[static_cast<size_t>(r)]),
                        "expert parallelism: rank {} got a row for expert {} of layer {}, which it does not hold", me,
                        rows_e[static_cast<size_t>(r)], layer);
      }
      if (s != me) stats_.rows_received += static_cast<int64_t>(b.size() / record);
    }
    if (R > 0) {
      // On the backend's memory: the rows in, the results out (host memory on the CPU backend).
      Allocator& alloc = be.allocator();
      void* dx = reserve(rows_x_, rows_x.size() * sizeof(float), alloc);
      void* de = reserve(rows_e_, rows_e.size() * sizeof(int32_t), alloc);
      void* dy = reserve(rows_y_, rows_y.size() * sizeof(float), alloc);
      be.copy_to_backend(dx, rows_x.data(), rows_x.size() * sizeof(float));
      be.copy_to_backend(de, rows_e.data(), rows_e.size() * sizeof(int32_t));
      be.moe_expert_rows(w, TensorView::contiguous(dx, DType::F32, {R, D}, be.device()),
                         TensorView::contiguous(de, DType::I32, {R}, be.device()),
                         TensorView::contiguous(dy, DType::F32, {R, D}, be.device()));
      be.copy_to_host(rows_y.data(), dy, rows_y.size() * sizeof(float));
    }

    // Results back to the rows' ranks, in the order they came.
    std::vector<Bytes> back(static_cast<size_t>(W));
    r = 0;
    for (int s = 0; s < W; ++s) {
      const auto n = static_cast<int64_t>(recv[static_cast<size_t>(s)].size() / record);
      append(back[static_cast<size_t>(s)], rows_y.data() + r * D, static_cast<size_t>(n * D));
      r += n;
    }
    std::vector<Bytes> results = transport_.all_to_all(std::move(back));
    if (T == 0) return;

    // Each (token, k) result at row t * K + k, then added in ascending expert id.
    std::vector<float> y(static_cast<size_t>(T * K * D));
    std::vector<int32_t> row_of(static_cast<size_t>(T * K));
    for (int64_t i = 0; i < T * K; ++i) {
      const auto [src, idx] = where[static_cast<size_t>(i)];
      const Bytes& b = results[static_cast<size_t>(src)];
      const size_t off = static_cast<size_t>(idx * D) * sizeof(float);
      DEEPINFER_CHECK(off + static_cast<size_t>(D) * sizeof(float) <= b.size(),
                      "expert parallelism: rank {} returned {} bytes, short of row {}", src, b.size(), idx);
      std::memcpy(y.data() + i * D, b.data() + off, static_cast<size_t>(D) * sizeof(float));
      row_of[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    }
    Allocator& alloc = be.allocator();
    void* dy = reserve(combine_y_, y.size() * sizeof(float), alloc);
    void* dr = reserve(combine_rows_, row_of.size() * sizeof(int32_t), alloc);
    be.copy_to_backend(dy, y.data(), y.size() * sizeof(float));
    be.copy_to_backend(dr, row_of.data(), row_of.size() * sizeof(int32_t));
    be.moe_combine(TensorView::contiguous(dy, DType::F32, {T * K, D}, be.device()),
                   TensorView::contiguous(dr, DType::I32, {T, K}, be.device()), experts, weights, out);
  } catch (const std::exception& e) {
    transport_.abort(e.what());
    throw;
  }
}

void ExpertParallelMoe::rebalance(int64_t slots) {
  const int64_t L = placement_.layers, E = placement_.experts;
  const std::vector<float> mine = load_.load();
  Bytes b;
  append(b, mine.data(), mine.size());
  const std::vector<Bytes> all = transport_.all_gather(std::move(b));
  std::vector<float> total(static_cast<size_t>(L * E), 0.0f);
  for (const Bytes& r : all) {  // rank order: every rank sums the same way
    DEEPINFER_CHECK(r.size() == total.size() * sizeof(float), "rebalance: a rank sent {} bytes of load", r.size());
    std::vector<float> v(total.size());
    std::memcpy(v.data(), r.data(), r.size());
    for (size_t i = 0; i < v.size(); ++i) total[i] += v[i];
  }
  placement_ = placement_from_plan(rebalance_experts(total, L, E, {slots, 1, 1, placement_.ranks}), placement_.ranks);
}

}  // namespace deepinfer::dist
