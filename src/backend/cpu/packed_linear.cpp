#include "backend/cpu/packed_linear.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer::cpu {

namespace {

constexpr int64_t P = PackedLinear::kPanelRows;
constexpr int kTokensPerPass = 6;  // 6 tokens x 64 rows: 24 accumulator registers of 16 lanes (AVX-512)

inline float multiply_add(float a, float b, float acc) {
#ifdef __FMA__
  return std::fma(a, b, acc);  // one rounding, the same in every instantiation
#else
  return acc + a * b;
#endif
}

inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

// y[t, r] for TT tokens and the n (<= 64) rows of one panel [cols][64].
template <int TT, typename W>
void panel_kernel(const W* panel, int64_t k, const float* x, float* y, int64_t y_stride, int64_t n) {
  float acc[TT][P] = {};
  for (int64_t c = 0; c < k; ++c) {
    float w[P];
    for (int64_t r = 0; r < P; ++r) w[r] = widen(panel[c * P + r]);
    for (int t = 0; t < TT; ++t) {
      const float xv = x[t * k + c];
      for (int64_t r = 0; r < P; ++r) acc[t][r] = multiply_add(xv, w[r], acc[t][r]);
    }
  }
  for (int t = 0; t < TT; ++t) std::memcpy(y + t * y_stride, acc[t], static_cast<size_t>(n) * sizeof(float));
}

template <typename W>
void run_panels(const W* panels, int64_t rows, int64_t k, const float* x, int64_t tokens, float* y) {
  const int64_t count = (rows + P - 1) / P;
  // Threads split the panels (and, when there are few panels and many tokens, the tokens too);
  // either way each output is computed by the same chain.
  const auto threads = static_cast<int64_t>(ThreadPool::global().size());
  const int64_t token_groups =
      std::clamp<int64_t>((2 * threads + count - 1) / count, 1, std::max<int64_t>(1, tokens / kTokensPerPass));
  ThreadPool::global().parallel_for(static_cast<size_t>(count * token_groups), [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const int64_t p = static_cast<int64_t>(item) % count, g = static_cast<int64_t>(item) / count;
      const int64_t t0 = tokens * g / token_groups, t1 = tokens * (g + 1) / token_groups;
      const W* panel = panels + p * k * P;
      const int64_t r0 = p * P, n = std::min(P, rows - r0);
      int64_t t = t0;
      for (; t + kTokensPerPass <= t1; t += kTokensPerPass)
        panel_kernel<kTokensPerPass>(panel, k, x + t * k, y + t * rows + r0, rows, n);
      switch (t1 - t) {  // the rest in one pass (same chains, fewer of them)
        case 5: panel_kernel<5>(panel, k, x + t * k, y + t * rows + r0, rows, n); break;
        case 4: panel_kernel<4>(panel, k, x + t * k, y + t * rows + r0, rows, n); break;
        case 3: panel_kernel<3>(panel, k, x + t * k, y + t * rows + r0, rows, n); break;
        case 2: panel_kernel<2>(panel, k, x + t * k, y + t * rows + r0, rows, n); break;
        case 1: panel_kernel<1>(panel, k, x + t * k, y + t * rows + r0, rows, n); break;
        default: break;
      }
    }
  });
}

}  // namespace

const PackedLinear::Packed& PackedLinear::packed(const WeightMatrix& w) {
  const auto key = w.identity();
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  }
  auto p = std::make_unique<Packed>();
  p->rows = w.rows;
  p->cols = w.cols;
  p->bf16 = w.dtype == DType::BF16;
  const int64_t count = (w.rows + P - 1) / P, k = w.cols;
  if (p->bf16) p->half.assign(static_cast<size_t>(count * k * P), 0);
  else p->full.assign(static_cast<size_t>(count * k * P), 0.0f);
  ThreadPool::global().parallel_for(static_cast<size_t>(count), [&](size_t b, size_t e) {
    std::vector<float> row(static_cast<size_t>(k));
    for (size_t pi = b; pi < e; ++pi) {
      const auto panel = static_cast<int64_t>(pi);
      for (int64_t r = 0; r < P && panel * P + r < w.rows; ++r) {
        const int64_t src = panel * P + r;
        if (p->bf16) {
          // memcpy: a stored tensor need not be 2-byte aligned (safetensors packs tensors back to
          // back, so an odd-sized FP8 tensor leaves the next one at an odd address).
          const std::byte* bits = w.data + src * k * 2;
          for (int64_t c = 0; c < k; ++c)
            std::memcpy(&p->half[static_cast<size_t>((panel * k + c) * P + r)], bits + c * 2, 2);
        } else {
          w.row_to_float(src, row.data());
          for (int64_t c = 0; c < k; ++c) p->full[static_cast<size_t>((panel * k + c) * P + r)] = row[static_cast<size_t>(c)];
        }
      }
    }
  });
  std::lock_guard lock(mutex_);
  auto [it, inserted] = cache_.emplace(key, std::move(p));
  return *it->second;
}

void PackedLinear::run(const WeightMatrix& w, const float* x, int64_t tokens, float* y) {
  if (tokens == 0 || w.rows == 0) return;
  DEEPINFER_CHECK(w.valid(), "linear: weight has no data");
  const Packed& p = packed(w);
  if (p.bf16) run_panels(p.half.data(), p.rows, p.cols, x, tokens, y);
  else run_panels(p.full.data(), p.rows, p.cols, x, tokens, y);
}

size_t PackedLinear::packed_bytes() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [key, p] : cache_) n += p->half.size() * 2 + p->full.size() * 4;
  return n;
}

}  // namespace deepinfer::cpu
