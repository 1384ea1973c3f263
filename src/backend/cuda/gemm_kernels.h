#pragma once
// Launchers for the CUDA backend's GEMM-shaped kernels: linear / grouped linear over the stored
// weight formats, MoE routing, and the MoE expert pipeline (plan, grouped SwiGLU GEMMs, combine).
// Plain functions over raw device pointers, launched on the legacy default stream (stream 0); the
// caller (ops_gemm.cpp) validates shapes and checks each launch. Built by nvcc (gemm_kernels.cu) and
// g++ alike, so nothing here includes deepinfer headers beyond device_types.h.
//
// Every output value is the same float32 arithmetic whatever the other rows of the call (fixed lane
// chunks, a fixed butterfly and a split-K chosen from the weight's shape; skinny_gemm.cuh): results
// are batch invariant.
#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_types.h"

namespace deepinfer::cuda {

// Rows (tokens) per CTA pass of the GEMM kernels, and so per MoE tile.
constexpr int kGemmTileRows = 8;

// The kernel format of a stored weight: its dtype where the vector path takes it (16-byte aligned
// rows, FP8 blocks a multiple of 16 columns), else the element-wise one. MoE launches take the
// format all their experts share (kGemmGenericFormat, the element-wise path, where they differ).
int gemm_format(const DevMatrix& w);
constexpr int kGemmGenericFormat = 6;

// y[t, g*R + r] = sum_c W[g*R + r, c] x[t, g*C + c] for W [groups*R, C] (groups = 1: plain linear);
// x [tokens, groups*C], y [tokens, groups*R], both contiguous float32.
void launch_linear(const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y);

// --- MoE routing ---
// scoring: 0 sqrt(softplus), 1 sigmoid, 2 softmax (backend::ScoringFunc order).
struct MoeRouteArgs {
  float* logits = nullptr;           // [T, E], replaced by the scores
  int64_t tokens = 0, experts = 0, top_k = 0;
  int scoring = 0;
  const float* bias = nullptr;          // [E] or null: added for the choice only
  const int32_t* hash_experts = nullptr;  // hash routing: the tokens' tid2eid rows [T, K], or null
  float routed_scaling_factor = 1.0f;
  bool norm_topk_prob = true;
  int32_t* out_experts = nullptr;    // [T, K]
  float* out_weights = nullptr;      // [T, K]
};
void launch_moe_route(const MoeRouteArgs& a);

// --- MoE experts ---
// A run of routed rows [row_begin, row_end) of one expert (rows are grouped by expert).
struct MoeTile {
  int32_t expert, row_begin, row_end, pad;
};
// Upper bound on the tiles of `routed` rows over `experts` experts.
inline int64_t moe_max_tiles(int64_t routed, int64_t experts) {
  const int64_t busy = routed < experts ? routed : experts;
  return (routed + (kGemmTileRows - 1) * busy) / kGemmTileRows + 1;
}
// Device index buffers of one moe_experts call (int32 each; sizes in brackets).
struct MoeIndex {
  int32_t* counts;     // [E]
  int32_t* pos;        // [T*K] rank of (t, k) within its expert's rows
  int32_t* offsets;    // [E + 1] first row of each expert
  int32_t* row_of;     // [T*K] routed row of (t, k), -1 for an expert id outside [0, E)
  int32_t* row_token;  // [T*K] token of each routed row
  int32_t* tile_count; // [1]
  MoeTile* tiles;      // [moe_max_tiles(T*K, E)]
};
// Groups the routed (t, k) pairs of experts [T, K] by expert into rows and tiles.
void launch_moe_plan(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts, const MoeIndex& ix);
// h[row, i] = silu(min(g, limit)) * clamp(u, -limit, limit), g / u = w1 / w3 of the row's expert
// times x[row_src[row]] (row_src null: row itself). With tiles null, rows [0, identity_rows) run
// on expert 0 of w1s / w3s (the shared expert); else grid_tiles blocks read tiles[] up to *tile_count.
// x [*, D], h [rows, I].
void launch_moe_gate_up(int fmt, const DevMatrix* w1s, const DevMatrix* w3s, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src,
                        const float* x, int64_t D, int64_t I, float limit, float* h);
// y[row, d] = w2 of the row's expert times h[row] (same tiling as launch_moe_gate_up). y [rows, D].
void launch_moe_down(int fmt, const DevMatrix* w2s, const MoeTile* tiles, const int32_t* tile_count, int64_t grid_tiles,
                     int64_t identity_rows, const float* h, int64_t I, int64_t D, float* y);
// out[t] += weights[t, k] * ye[row_of[t, k]] over token t's experts in ascending expert id.
void launch_moe_combine(float* out, const float* ye, const int32_t* experts, const float* weights,
                        const int32_t* row_of, int64_t tokens, int64_t top_k, int64_t D);
// dst[0, n) = 0 (on stream 0).
void launch_zero(float* dst, int64_t n);

}  // namespace deepinfer::cuda
