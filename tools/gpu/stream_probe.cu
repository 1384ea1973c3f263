// How much a weight stream's bandwidth depends on how many contiguous bytes of a row each copy
// burst covers (a question for the FP4 / FP8 decode GEMVs, whose warps read 16 rows a step with
// 64 or 128 bytes of each row: docs/perf.md, session 23). Standalone, no deepinfer code:
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/gpu/stream_probe.cu -o stream_probe
//   ./stream_probe            # prints one line per pattern: bytes, time, TB/s
// (The CUDA build builds it too, as build-cuda/tools/stream_probe.)
//
// Every pattern reads the same 1 GiB once per repetition, as a decode GEMV would: rows of 2,048
// bytes (a 4,096-column FP4 row), warps of 8 per CTA, 16-row tiles spread over the CTAs, cp.async
// 16-byte copies into a ring of stages in shared memory (the GEMV's pipeline), one word of each
// landed stage added up so that nothing is optimised away.
//  - "rows": a step copies C bytes of each of the warp's 16 rows (C = 64: the FP4 GEMV today).
//  - "tile": the same bytes laid out tile by tile, a step's 16 C bytes contiguous (a repacked
//    weight, what a load-time reorder would give).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps, kTileRows = 16;
constexpr int64_t kRowBytes = 2048;

__device__ __forceinline__ void copy16(void* dst, const void* src) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int n>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n)); }

// C: bytes of a row a step; D: stages; kTile: the tile-contiguous layout.
template <int C, int D, bool kTile>
__global__ void __launch_bounds__(kThreads) probe(const uint8_t* w, int64_t tiles, unsigned* sink) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kPieces = kTileRows * C / 16;  // 16-byte copies a step
  static_assert(kPieces % 32 == 0, "whole copies per lane");
  constexpr int kPerLane = kPieces / 32;
  constexpr int64_t kSteps = kRowBytes / C;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* ring = smem + static_cast<size_t>(warp) * D * kTileRows * C;
  unsigned acc = 0;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps + warp, stride = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t tile = first; tile < tiles; tile += stride) {
    const uint8_t* base = w + tile * kTileRows * kRowBytes;
    auto copy_step = [&](int64_t s, int st) {
#pragma unroll
      for (int q = 0; q < kPerLane; ++q) {
        const int piece = q * 32 + lane;  // consecutive lanes, consecutive 16 bytes of a row
        const int row = piece / (C / 16), off = (piece % (C / 16)) * 16;
        const uint8_t* src = kTile ? base + s * kTileRows * C + piece * 16 : base + row * kRowBytes + s * C + off;
        copy16(ring + static_cast<size_t>(st) * kTileRows * C + piece * 16, src);
      }
    };
#pragma unroll
    for (int n = 0; n < D - 1; ++n) {
      if (n < kSteps) copy_step(n, n);
      commit();
    }
#pragma unroll 1
    for (int64_t i = 0; i < kSteps; ++i) {
      if (i + D - 1 < kSteps) copy_step(i + D - 1, static_cast<int>((i + D - 1) % D));
      commit();
      wait_groups<D - 1>();
      __syncwarp();
      acc += *reinterpret_cast<const unsigned*>(ring + static_cast<size_t>(i % D) * kTileRows * C + lane * 4);
      __syncwarp();
    }
  }
  if (acc == 0x12345678u) *sink = acc;  // practically never: keeps the reads
}

template <int C, int D, bool kTile>
int run(const uint8_t* w, int64_t bytes, unsigned* sink, int ctas_per_sm, int sms) {
  const size_t smem = static_cast<size_t>(kWarps) * D * kTileRows * C;
  // Pad shared memory so that exactly ctas_per_sm CTAs fit an SM.
  const size_t padded = ctas_per_sm == 1 ? std::max<size_t>(smem, 120 * 1024) : std::max<size_t>(smem, 60 * 1024);
  CHECK(cudaFuncSetAttribute(probe<C, D, kTile>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(padded)));
  const int64_t tiles = bytes / (kTileRows * kRowBytes);
  int fit = 0;  // what really fits an SM (the large rings may not fit two)
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, probe<C, D, kTile>, kThreads, padded));
  if (fit < ctas_per_sm) return 0;  // this pattern does not fit that many CTAs: nothing to print
  const unsigned grid = static_cast<unsigned>(sms * ctas_per_sm);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  probe<C, D, kTile><<<grid, kThreads, padded>>>(w, tiles, sink);  // warm-up
  CHECK(cudaGetLastError());
  constexpr int kReps = 10;
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < kReps; ++r) probe<C, D, kTile><<<grid, kThreads, padded>>>(w, tiles, sink);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  const double s = ms / 1e3 / kReps;
  std::printf("%-5s C=%4d B/row/step  stages=%d  in flight/warp=%6d B  CTAs/SM=%d  %8.3f ms  %.2f TB/s\n",
              kTile ? "tile" : "rows", C, D, (D - 1) * kTileRows * C, ctas_per_sm, s * 1e3, bytes / s / 1e12);
  return 0;
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, sms);
  const int64_t bytes = int64_t{1} << 30;
  uint8_t* w = nullptr;
  unsigned* sink = nullptr;
  CHECK(cudaMalloc(&w, bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(w, 1, bytes));
  // Plain copy bandwidth, for the ratio.
  {
    uint8_t* dst = nullptr;
    CHECK(cudaMalloc(&dst, bytes / 2));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaMemcpy(dst, w, bytes / 2, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(a));
    for (int r = 0; r < 10; ++r) CHECK(cudaMemcpy(dst, w, bytes / 2, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    std::printf("cudaMemcpy D2D: %.2f TB/s (read + write)\n", 2.0 * (bytes / 2) * 10 / (ms / 1e3) / 1e12);
    CHECK(cudaFree(dst));
  }
  int rc = 0;
  for (int cps : {1, 2}) {
    rc |= run<64, 4, false>(w, bytes, sink, cps, sms);   // the FP4 GEMV today (3 KB in flight a warp)
    rc |= run<64, 8, false>(w, bytes, sink, cps, sms);   // deeper ring, same bursts
    rc |= run<128, 3, false>(w, bytes, sink, cps, sms);  // 128-byte bursts, ~4 KB in flight
    rc |= run<128, 4, false>(w, bytes, sink, cps, sms);
    rc |= run<256, 2, false>(w, bytes, sink, cps, sms);
    rc |= run<256, 3, false>(w, bytes, sink, cps, sms);
    rc |= run<512, 2, false>(w, bytes, sink, cps, sms);
    rc |= run<64, 4, true>(w, bytes, sink, cps, sms);    // repacked tiles, same bytes in flight
    rc |= run<64, 8, true>(w, bytes, sink, cps, sms);
    rc |= run<128, 3, true>(w, bytes, sink, cps, sms);
  }
  return rc;
}
