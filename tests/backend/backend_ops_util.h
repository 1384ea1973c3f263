#pragma once
// Shared pieces of the test_backend_ops suite (backend_ops_*_test.cpp): one fixture instantiated for
// every registered backend (plain and batch-invariant), seeded random inputs that are never zero,
// weights encoded in every stored dtype with their exact double values, and a comparison that
// fails on NaN/Inf. The double-precision references live in the test files, written from the
// documented semantics of backend/backend.h (and MODELS.md), not from any backend's code.
//
// Every activation and output an op sees lives in the backend's own memory (DeviceTensor below,
// from Backend::allocator()): inputs are uploaded with copy_to_backend, outputs start as NaN there
// and are downloaded with copy_to_host after synchronize(), so a device backend runs this suite
// unchanged. Weights, token ids, positions and block tables stay host memory, as backend.h says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/dtype.h"

namespace deepinfer::backend_ops_test {

struct BackendCase {
  std::string name;
  bool batch_invariant = false;
};

// So failure messages name the case instead of dumping its bytes.
// The tie policy a backend actually applies: one that cannot reproduce torch's CPU tie order
// (Backend::reproduces_reference_ties(site) false) must break ties toward the lower index under both.
inline backend::TopKTies effective_ties(const backend::Backend& be, backend::TopKTies asked, backend::TopKSite site) {
  return asked == backend::TopKTies::Reference && !be.reproduces_reference_ties(site) ? backend::TopKTies::LowerIndex
                                                                                        : asked;
}

inline void PrintTo(const BackendCase& c, std::ostream* os) {
  *os << c.name << (c.batch_invariant ? " (batch-invariant)" : "");
}

inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> out;
  for (const auto& name : backend::available_backends()) {
    out.push_back({name, false});
    out.push_back({name, true});
  }
  return out;
}

inline std::vector<BackendCase> invariant_backend_cases() {
  std::vector<BackendCase> out;
  for (const auto& c : backend_cases())
    if (c.batch_invariant) out.push_back(c);
  return out;
}

inline std::string case_name(const testing::TestParamInfo<BackendCase>& info) {
  return info.param.name + (info.param.batch_invariant ? "_invariant" : "");
}

// The run's seed: DEEPINFER_TEST_SEED if set, else fresh. Every test derives its own stream from it
// and its name, and prints it in every failure.
inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("DEEPINFER_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }();
  return seed;
}

// --- host <-> backend (see the header comment) ---
template <typename T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>, "DeviceTensor holds F32 or I32");
  return std::is_same_v<T, float> ? DType::F32 : DType::I32;
}

// `size()` elements of T in backend memory (a Buffer from be.allocator()), with host copies in
// and out. download() waits for every op issued so far, so it always sees their results.
template <typename T>
class DeviceTensor {
 public:
  DeviceTensor(backend::Backend& be, size_t n) : be_(&be), n_(n), buf_(n * sizeof(T), be.allocator()) {}
  // Of v's size, holding v.
  DeviceTensor(backend::Backend& be, const std::vector<T>& v) : DeviceTensor(be, v.size()) { upload(v); }
  // n copies of `value` (NaN / -7 for outputs: an op that skips an element leaves it there).
  static DeviceTensor filled(backend::Backend& be, size_t n, T value) {
    DeviceTensor t(be, n);
    t.upload(std::vector<T>(n, value));
    return t;
  }

  size_t size() const { return n_; }
  T* data() const { return buf_.as<T>(); }

  void upload(const std::vector<T>& v) {
    if (v.size() != n_) {
      ADD_FAILURE() << "test bug: uploading " << v.size() << " values into a device tensor of " << n_;
      return;
    }
    if (n_) be_->copy_to_backend(buf_.data(), v.data(), n_ * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    be_->synchronize();
    if (n_) be_->copy_to_host(v.data(), buf_.data(), n_ * sizeof(T));
    return v;
  }
  // A contiguous view of all of it (the shape must cover exactly size() elements).
  TensorView view(std::initializer_list<int64_t> dims) const {
    TensorView t = buf_.view(dtype_of<T>(), dims);
    EXPECT_EQ(t.numel(), static_cast<int64_t>(n_)) << "test bug: view shape does not match its data";
    return t;
  }

 private:
  backend::Backend* be_;
  size_t n_;
  Buffer buf_;
};

using DeviceF32 = DeviceTensor<float>;
using DeviceI32 = DeviceTensor<int32_t>;

class BackendOps : public testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    const std::string test = std::string(info->test_suite_name()) + "." + info->name();
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the test name
    for (char c : test) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    rng.seed(run_seed() ^ h);
    trace_ = std::make_unique<testing::ScopedTrace>(
        __FILE__, __LINE__,
        "seed " + std::to_string(run_seed()) + " (rerun with DEEPINFER_TEST_SEED=" + std::to_string(run_seed()) +
            "), backend " + GetParam().name + (GetParam().batch_invariant ? " batch-invariant" : ""));
    backend::BackendOptions options;
    options.batch_invariant = GetParam().batch_invariant;
    be = backend::make_backend(GetParam().name, options);
    ASSERT_TRUE(be);
    ASSERT_EQ(be->batch_invariant(), GetParam().batch_invariant);
  }
  void TearDown() override { trace_.reset(); }

  // Uniform magnitude in [0.1, 1] * scale with a random sign: never zero.
  float nonzero(float scale = 1.0f) {
    std::uniform_real_distribution<float> mag(0.1f, 1.0f);
    return (rng() & 1 ? 1.0f : -1.0f) * mag(rng) * scale;
  }
  std::vector<float> randoms(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = nonzero(scale);
    return v;
  }
  int64_t uniform_int(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  // Top-2 expert ids of T tokens, [T, 2]: two distinct ids in [0, experts) per token.
  std::vector<int32_t> two_distinct_experts(int64_t T, int64_t experts) {
    std::vector<int32_t> chosen(static_cast<size_t>(T * 2));
    for (int64_t t = 0; t < T; ++t) {
      chosen[t * 2] = static_cast<int32_t>(uniform_int(0, experts - 1));
      do chosen[t * 2 + 1] = static_cast<int32_t>(uniform_int(0, experts - 1)); while (chosen[t * 2 + 1] == chosen[t * 2]);
    }
    return chosen;
  }

  // Host data uploaded into a fresh tensor in the backend's memory.
  template <typename T>
  DeviceTensor<T> on_device(const std::vector<T>& host) {
    return DeviceTensor<T>(*be, host);
  }
  // An output in the backend's memory, every element NaN until the op writes it.
  DeviceF32 nan_output(size_t n) { return DeviceF32::filled(*be, n, NAN); }
  // y [T, w.rows] = linear (groups 1) or grouped_linear of x [T, groups * w.cols], downloaded.
  std::vector<float> run_linear(const WeightMatrix& w, int64_t groups, const std::vector<float>& x, int64_t T) {
    const auto dx = on_device(x);
    auto y = nan_output(static_cast<size_t>(T * w.rows));
    const int64_t X = groups * w.cols;
    if (groups == 1)
      be->linear(w, dx.view({T, X}), y.view({T, w.rows}));
    else
      be->grouped_linear(w, groups, dx.view({T, X}), y.view({T, w.rows}));
    return y.download();
  }

  // Weights (and mHC mixers) live, unchanged, as long as the backend: a backend may keep derived
  // forms of them keyed by their address (the CPU backend repacks each weight once). Tests make
  // every weight through keep(), so no weight's storage is freed and reused while the backend lives.
  template <typename T>
  T& keep(T value) {
    auto held = std::make_shared<T>(std::move(value));
    kept_.push_back(held);
    return *held;
  }

 private:
  std::vector<std::shared_ptr<void>> kept_;  // declared before `be`: destroyed after it

 protected:
  std::mt19937_64 rng;
  std::unique_ptr<backend::Backend> be;

 private:
  std::unique_ptr<testing::ScopedTrace> trace_;
};

// --- comparison ---
// max |got - want| / (range of want), +Inf on a size mismatch or any non-finite value (so NaN fails),
// with where the worst element is.
struct Diff {
  double relative = 0;
  size_t worst = 0;
  std::string detail;
};

inline Diff relative_diff(const std::vector<float>& got, const std::vector<double>& want) {
  Diff d;
  if (got.size() != want.size()) {
    d.relative = INFINITY;
    d.detail = "size " + std::to_string(got.size()) + " != expected " + std::to_string(want.size());
    return d;
  }
  double lo = INFINITY, hi = -INFINITY, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      d.relative = INFINITY;
      d.worst = i;
      d.detail = "reference is not finite at " + std::to_string(i) + " (test bug)";
      return d;
    }
    if (!std::isfinite(got[i])) {
      d.relative = INFINITY;
      d.worst = i;
      d.detail = "non-finite value " + std::to_string(got[i]) + " at " + std::to_string(i) + ", expected " +
                 std::to_string(want[i]);
      return d;
    }
    lo = std::min(lo, want[i]);
    hi = std::max(hi, want[i]);
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (e > worst) {  // a NaN e would never get here: it was rejected above
      worst = e;
      d.worst = i;
    }
  }
  const double range = hi > lo ? hi - lo : std::max(std::fabs(hi), 1.0);
  d.relative = worst / range;
  if (!want.empty()) {
    std::ostringstream s;
    s << "worst at " << d.worst << ": got " << got[d.worst] << ", expected " << want[d.worst] << " (range " << range
      << ")";
    d.detail = s.str();
  }
  return d;
}

constexpr double kTolerance = 1e-4;  // of the output range: float32 accumulation over these sizes

#define EXPECT_CLOSE(got, want, what)                                                                       \
  do {                                                                                                      \
    const auto _d = ::deepinfer::backend_ops_test::relative_diff((got), (want));                           \
    EXPECT_LE(_d.relative, ::deepinfer::backend_ops_test::kTolerance) << (what) << ": " << _d.detail;     \
  } while (0)

// --- stored weights ---
// Exact values of the stored codes, by their definitions (independent of core/dtype.h).
inline double decode_e4m3(uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 0xf, m = v & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}
inline double decode_e2m1(uint8_t v) {
  const int s = (v >> 3) & 1, e = (v >> 1) & 3, m = v & 1;
  const double mag = e == 0 ? m * 0.5 : std::ldexp(1.0 + m / 2.0, e - 1);
  return s ? -mag : mag;
}
inline double decode_e8m0(uint8_t v) { return std::ldexp(1.0, v - 127); }
inline double decode_f16(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double mag = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -mag : mag;
}
inline double decode_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// What a stored weight's scales are.
enum class Scales { None, F32Blocks, E8M0Blocks };

// A weight matrix in its stored form plus the exact double value of every element.
struct StoredWeight {
  std::vector<std::byte> data, scale;
  WeightMatrix w;
  std::vector<double> values;  // [rows, cols]
  double at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * w.cols + c)]; }
};

// Random nonzero codes in `dtype` (FP8 block-scaled with `scales` over block x block tiles; FP4 with
// one E8M0 per 32 columns). Magnitudes stay around 1 so sums stay well conditioned.
inline StoredWeight make_weight(std::mt19937_64& rng, DType dtype, int64_t rows, int64_t cols, Scales scales = Scales::None,
                                int64_t block = 128) {
  StoredWeight s;
  s.w.dtype = dtype;
  s.w.rows = rows;
  s.w.cols = cols;
  s.values.resize(static_cast<size_t>(rows * cols));
  auto byte = [&] { return static_cast<uint8_t>(rng() & 0xff); };
  auto sign = [&] { return (rng() & 1) ? 1.0f : -1.0f; };
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  const size_t n = s.values.size();
  switch (dtype) {
    case DType::F32: {
      s.data.resize(n * 4);
      for (size_t i = 0; i < n; ++i) {
        const float v = sign() * mag(rng);
        std::memcpy(s.data.data() + i * 4, &v, 4);
        s.values[i] = v;
      }
      break;
    }
    case DType::BF16: {
      s.data.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = f32_to_bf16(sign() * mag(rng));
        std::memcpy(s.data.data() + i * 2, &b, 2);
        s.values[i] = decode_bf16(b);
      }
      break;
    }
    case DType::F16: {  // sign, exponent 10..15 (values 2^-5 .. 2), any mantissa
      s.data.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const auto h = static_cast<uint16_t>(((rng() & 1) << 15) | ((10 + rng() % 6) << 10) | (rng() & 0x3ff));
        std::memcpy(s.data.data() + i * 2, &h, 2);
        s.values[i] = decode_f16(h);
      }
      break;
    }
    case DType::F8_E4M3: {
      s.data.resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint8_t code;
        do code = byte(); while ((code & 0x7f) == 0x7f || (code & 0x7f) == 0);  // no NaN, no zero
        s.data[i] = static_cast<std::byte>(code);
        s.values[i] = decode_e4m3(code);
      }
      if (scales != Scales::None) {
        const int64_t srows = (rows + block - 1) / block, scols = (cols + block - 1) / block;
        std::vector<double> scale_values(static_cast<size_t>(srows * scols));
        if (scales == Scales::E8M0Blocks) {
          s.scale.resize(scale_values.size());
          for (size_t i = 0; i < scale_values.size(); ++i) {
            const auto e = static_cast<uint8_t>(118 + rng() % 8);  // 2^-9 .. 2^-2
            s.scale[i] = static_cast<std::byte>(e);
            scale_values[i] = decode_e8m0(e);
          }
          s.w.scale_dtype = DType::F8_E8M0;
        } else {
          s.scale.resize(scale_values.size() * 4);
          for (size_t i = 0; i < scale_values.size(); ++i) {
            const float v = mag(rng) / 64.0f;
            std::memcpy(s.scale.data() + i * 4, &v, 4);
            scale_values[i] = v;
          }
          s.w.scale_dtype = DType::F32;
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) s.values[r * cols + c] *= scale_values[(r / block) * scols + c / block];
        s.w.scale_cols = scols;
        s.w.block_rows = s.w.block_cols = block;
      }
      break;
    }
    case DType::F4_E2M1: {  // two codes per byte, low nibble = even column; one E8M0 per 32 columns
      s.data.resize(n / 2);
      const int64_t scols = cols / 32;
      s.scale.resize(static_cast<size_t>(rows * scols));
      for (auto& b : s.scale) b = static_cast<std::byte>(124 + rng() % 6);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; c += 2) {
          uint8_t lo, hi;
          do lo = byte() & 0xf; while ((lo & 7) == 0);
          do hi = byte() & 0xf; while ((hi & 7) == 0);
          s.data[static_cast<size_t>((r * cols + c) / 2)] = static_cast<std::byte>(lo | (hi << 4));
          const double sc = decode_e8m0(static_cast<uint8_t>(s.scale[static_cast<size_t>(r * scols + c / 32)]));
          s.values[static_cast<size_t>(r * cols + c)] = decode_e2m1(lo) * sc;
          s.values[static_cast<size_t>(r * cols + c + 1)] = decode_e2m1(hi) * sc;
        }
      s.w.scale_dtype = DType::F8_E8M0;
      s.w.scale_cols = scols;
      s.w.block_rows = 1;
      s.w.block_cols = 32;
      break;
    }
    default:
      ADD_FAILURE() << "make_weight: unsupported dtype " << dtype_name(dtype);
  }
  s.w.data = s.data.data();
  if (!s.scale.empty()) s.w.scale = s.scale.data();
  return s;
}

// y[t, r] = sum_c W[r, c] x[t, c] in double.
inline std::vector<double> ref_linear(const StoredWeight& w, const std::vector<float>& x, int64_t T) {
  const int64_t R = w.w.rows, C = w.w.cols;
  std::vector<double> y(static_cast<size_t>(T * R));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < R; ++r) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += w.at(r, c) * x[static_cast<size_t>(t * C + c)];
      y[static_cast<size_t>(t * R + r)] = s;
    }
  return y;
}

// --- rope, shared by the dense and state references ---
// Angles are float32 products position * inv_freq, as the reference computes them; the rotation
// itself is done in double.
inline void ref_rope(double* head, int64_t hd, std::span<const float> inv_freq, float attention_factor, int64_t pos,
                     bool inverse) {
  const auto half = static_cast<int64_t>(inv_freq.size());
  double* r = head + hd - 2 * half;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = inv_freq[static_cast<size_t>(i)] * static_cast<float>(pos);
    const double c = std::cos(static_cast<double>(angle)) * attention_factor;
    const double s = (inverse ? -1.0 : 1.0) * std::sin(static_cast<double>(angle)) * attention_factor;
    const double a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

inline std::vector<float> make_inv_freq(int64_t half, double theta) {
  std::vector<float> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[static_cast<size_t>(i)] = static_cast<float>(std::pow(theta, -2.0 * i / (2.0 * half)));
  return f;
}

inline double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline void ref_softmax(std::vector<double>& v) {
  double m = -INFINITY;
  for (double x : v) m = std::max(m, x);
  double sum = 0;
  for (double& x : v) sum += (x = std::exp(x - m));
  for (double& x : v) x /= sum;
}

// A SwiGLU expert's three matrices (BF16, or FP8 / FP4 with E8M0 scales), for the MoE tests.
struct ExpertWeights {
  StoredWeight w1, w2, w3;
  backend::SwigluExpert view() const { return {&w1.w, &w2.w, &w3.w}; }
};

// fp8_block: FP8's square scale blocks (V4 releases 128; FP4 always has 32-column ones).
inline ExpertWeights make_expert(std::mt19937_64& rng, DType dtype, int64_t I, int64_t D, int64_t fp8_block = 32) {
  const Scales s = dtype == DType::BF16 ? Scales::None : Scales::E8M0Blocks;
  const int64_t b = dtype == DType::F8_E4M3 ? fp8_block : 32;
  return {make_weight(rng, dtype, I, D, s, b), make_weight(rng, dtype, D, I, s, b), make_weight(rng, dtype, I, D, s, b)};
}

}  // namespace deepinfer::backend_ops_test
