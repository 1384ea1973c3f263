#pragma once
// Launchers for the CUDA backend's GEMM-shaped kernels: linear / grouped linear over the stored
// weight formats, MoE routing, and the MoE expert pipeline (plan, grouped SwiGLU GEMMs, combine).
// Plain functions over raw device pointers, launched on the calling thread's stream (launch_control.h); the
// caller (ops_gemm.cpp) validates shapes and checks each launch. Built by nvcc (gemm_kernels.cu) and
// g++ alike, so nothing here includes deepinfer headers beyond device_types.h.
//
// GEMMs of different rounding, and when each runs (tc_policy, DEEPINFER_TC_GEMM):
//  - the weight-streaming CUDA-core tile (skinny_gemm.cuh: fixed lane chunks, a fixed butterfly
//    and a split-K chosen from the weight's shape): fastest for the few rows of a decode step;
//  - the tensor-core GEMM (tc_gemm.cu) for every format in a layout of 16-byte rows (gemm_format):
//    2.5x the CUDA-core tile's prefill; its schedules for few and many rows give identical bits.
//  - FP8 decode (1-2 rows) of large matrices: the tensor-core GEMV (decode_gemv_tc.cu), below.
// Within one kernel every output value is the same arithmetic whatever the other rows of the call.
// Auto (the default): in the default mode, calls of at least tc_min_rows() rows (for the routed
// experts, more than 2 rows per expert on average) take the tensor cores, so batching may change a row's low bits (as in
// vLLM's default mode; Backend::batching_keeps_bits); under batch invariance every call takes the
// CUDA-core tile. DEEPINFER_TC_GEMM=1 puts every call of a capable weight on the tensor cores
// (batch invariant in both modes: the op tests check its schedules bit for bit), =0 none.
#include <cstddef>
#include <cstdint>
#include <span>

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
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"  // no padding in argument structs (see device_types.h)
struct MoeRouteArgs {
  float* logits = nullptr;           // [T, E], replaced by the scores
  int64_t tokens = 0, experts = 0, top_k = 0;
  int32_t scoring = 0;
  int32_t pad = 0;
  const float* bias = nullptr;          // [E] or null: added for the choice only
  const int32_t* hash_experts = nullptr;  // hash routing: the tokens' tid2eid rows [T, K], or null
  float routed_scaling_factor = 1.0f;
  int32_t norm_topk_prob = 1;  // 0 / 1
  int32_t* out_experts = nullptr;    // [T, K]
  float* out_weights = nullptr;      // [T, K]
};
void launch_moe_route(const MoeRouteArgs& a);

// --- MoE experts ---
// A run of routed rows [row_begin, row_end) of one expert (rows are grouped by expert).
struct MoeTile {
  int32_t expert, row_begin, row_end, pad;
};
// Upper bound on the tiles of `routed` rows over `experts` experts, tile_rows rows per tile at most.
inline int64_t moe_max_tiles(int64_t routed, int64_t experts, int64_t tile_rows = kGemmTileRows) {
  const int64_t busy = routed < experts ? routed : experts;
  return (routed + (tile_rows - 1) * busy) / tile_rows + 1;
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
#pragma GCC diagnostic pop
// The int32 words of a MoeIndex for E experts and `routed` pairs, and the index carved from them.
inline size_t moe_index_ints(int64_t E, int64_t routed, int64_t max_tiles) {
  return static_cast<size_t>(E + routed + (E + 1) + routed + routed + 1 + 4 * max_tiles);
}
inline MoeIndex moe_index_in(int32_t* p, int64_t E, int64_t routed) {
  MoeIndex ix;
  ix.counts = p, p += E;
  ix.pos = p, p += routed;
  ix.offsets = p, p += E + 1;
  ix.row_of = p, p += routed;
  ix.row_token = p, p += routed;
  ix.tile_count = p, p += 1;
  ix.tiles = reinterpret_cast<MoeTile*>(p);
  return ix;
}
// Groups the routed (t, k) pairs of experts [T, K] by expert into rows and tiles of tile_rows rows
// at most (a multiple of 8, at most 64).
void launch_moe_plan(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts, const MoeIndex& ix,
                     int tile_rows = kGemmTileRows);
// h[row, i] = silu(min(g, limit)) * clamp(u, -limit, limit), g / u = w1 / w3 of the row's expert
// times x[row_src[row]] (row_src null: row itself). With tiles null, rows [0, identity_rows) run
// on expert 0 of w1s / w3s (the shared expert); else grid_tiles blocks read tiles[] up to *tile_count.
// x [*, D], h [rows, I].
void launch_moe_gate_up(int fmt, const DevMatrix* w1s, const DevMatrix* w3s, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, const int32_t* row_src,
                        const float* x, int64_t D, int64_t I, float limit, float* h, bool few_rows);
// y[row, d] = w2 of the row's expert times h[row] (same tiling as launch_moe_gate_up). y [rows, D].
void launch_moe_down(int fmt, const DevMatrix* w2s, const MoeTile* tiles, const int32_t* tile_count, int64_t grid_tiles,
                     int64_t identity_rows, const float* h, int64_t I, int64_t D, float* y, bool few_rows);
// out[t] += weights[t, k] * ye[row_of[t, k]] over token t's experts in ascending expert id.
void launch_moe_combine(float* out, const float* ye, const int32_t* experts, const float* weights,
                        const int32_t* row_of, int64_t tokens, int64_t top_k, int64_t D);
// h [rows, I] = silu(min(g, limit)) * clamp(u, -limit, limit) of gu [rows, 2I] = [g | u] per row
// (the SwiGLU epilogue of launch_moe_gate_up, for gate / up sums made elsewhere: cuBLASLt).
void launch_swiglu_rows(const float* gu, int64_t rows, int64_t I, float limit, float* h);
// dst[0, n) = value.
void launch_fill(float* dst, int64_t n, float value);

// --- decode GEMV on the tensor cores (decode_gemv_tc.cu) ---
// launch_linear for 1-2 rows of an FP8 weight (no scales, or blocks of >= 64 columns and a
// multiple of 16 rows; 16-row multiples per group; x 16-byte aligned): e4m3 -> f16 MMAs against x
// split into three f16 parts. The default mode's kernel for those calls (not batch invariant: its
// rounding is not the CUDA-core tile's). Launches only where the call fits and is worth it (enough
// CTAs to fill the device; DEEPINFER_DECODE_GEMV=1 takes every call that fits, =0 none: for tests
// and measurements), and says whether it did: false leaves the call to the CUDA-core tile.
bool launch_decode_gemv_tc(const DevMatrix& w, int64_t groups, const float* x, int64_t tokens, float* y);
// The same for the shared expert's gate / up: h = silu(min(w1 x, limit)) * clamp(w3 x, -limit, limit)
// (launch_moe_gate_up's epilogue) for x [tokens, D], h [tokens, I]; w1 / w3 of one shape, I a multiple of 8.
bool launch_decode_swiglu_tc(const DevMatrix& w1, const DevMatrix& w3, const float* x, int64_t tokens, float limit,
                             float* h);

// --- routed FP4 experts of a decode step on the tensor cores (moe_gemv_fp4.cu) ---
// For the routed experts of calls of up to 8 rows an expert on average, where the matrices fit.
// DEEPINFER_MOE_GEMV (read once): 0 never, 1 at every such call (the tests), unset / auto at calls
// of at least moe_gemv_fp4_min_tokens() tokens while DEEPINFER_TC_GEMM is auto. H100, docs/perf.md
// session 21: from four tokens on this kernel won (decode step B=4 3.32 -> 3.09 ms, B=128 32.6 ->
// 25.1 ms); session 28, with its scale windows decoded once: at one token too (B=1 2.036 -> 1.930).
bool moe_gemv_fp4_wanted(int64_t tokens);
// Auto's threshold (DEEPINFER_MOE_GEMV_MIN_TOKENS overrides it, for measurements).
int64_t moe_gemv_fp4_min_tokens();
// The most rows a plan tile may hold for it (8, 4, 2, or 0: it does not take these matrices): every
// matrix of `ws` (one per expert) FP4 with E8M0 per 32 columns, columns a multiple of 128, 16-byte
// rows, 4-byte aligned scales, at least one warp tile of rows; larger tiles need more shared memory.
int moe_gemv_fp4_tile_rows(std::span<const DevMatrix> ws, bool swiglu);
// The plan's tile rows for `routed` rows over `experts` experts whose matrices allow tiles of up to
// max_rows (moe_gemv_fp4_tile_rows): 2, 4 or 8, or 0 (too many rows an expert for this kernel). An
// expert with more rows than a tile reads its weights once per tile.
int moe_gemv_fp4_plan_rows(int64_t routed, int64_t experts, int max_rows);
// launch_moe_gate_up (swiglu: wa gate, wb up) / launch_moe_down for a plan of tiles of at most
// tile_rows (2, 4 or 8) rows.
void launch_moe_gemv_fp4(bool swiglu, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles,
                         const int32_t* tile_count, int64_t max_tiles, int tile_rows, const int32_t* row_src,
                         const float* x, int64_t K, float* y, int64_t n_out, float limit);

// --- tensor-core GEMM (tc_gemm.cu) ---
// DEEPINFER_TC_GEMM (read once): 0 never, 1 always, unset or "auto" by the number of rows.
enum class TcPolicy { Never, Always, Auto };
// A policy switch from the environment variable `name`: unset, empty or "auto" Auto; "0..." Never;
// anything else Always.
TcPolicy policy_from_env(const char* name);
// A positive count from the environment variable `name`, else `fallback`.
int64_t positive_env(const char* name, int64_t fallback);
TcPolicy tc_policy();
// Auto's threshold: rows of a call (DEEPINFER_TC_MIN_ROWS overrides it, for measurements).
int64_t tc_min_rows();
// The same policy's threshold for sparse attention: tokens of a step
// (DEEPINFER_TC_ATTENTION_MIN_TOKENS overrides it; ops_attention.cpp).
int64_t tc_attention_min_tokens();
// The tensor-core kernel format of a weight, or -1 for layouts only the CUDA-core tile takes
// (gemm_format's element-wise ones). F32, F16 and FP8 with F32 scales add a third MMA per step for
// the weight's low bf16 part, so every vector format is on the tensor cores and an F32 copy of
// quantised values (exact in bf16) gives the quantised weight's sums.
// FP8 exact in f16 (DevMatrix::fp8_exact_in_f16) takes f16 operands in the default mode
// (DEEPINFER_TC_FP8_F16=0: bf16 as under a pinned DEEPINFER_TC_GEMM; tc_gemm.cu).
int tc_format(const DevMatrix& w);
// The format one tensor-core launch takes for matrices of formats a and b (-1: none).
int tc_common_format(int a, int b);
// Whether a call of `rows` rows (per tile) reads x itself (split in registers) instead of the split
// copy; otherwise the launchers below split x into xc first.
bool tc_reads_x(int64_t rows, const float* x);
// The activations [rows, groups * C] (C a multiple of 4) as the tensor-core GEMM reads them: bf16 hi,
// mid and lo parts (summing to x exactly; FP8 on f16 operands: f16 hi and lo parts of x 2^-e and
// each row's e), 24 bytes per 4 columns in two planes, each group's
// columns padded to a multiple of 128 and permuted within each 128 (tc_split_bytes(rows, groups, C)
// bytes at `out`, 16-byte aligned).
size_t tc_split_bytes(int64_t rows, int64_t groups, int64_t C);
void launch_tc_split_x(const float* x, int64_t rows, int64_t groups, int64_t C, void* out);
// launch_linear on the tensor cores (fmt = tc_format(w)); xc: room for the split x
// (tc_split_bytes(tokens, groups, C)), unused when tc_reads_x(tokens, x); part: room for the
// grid-split schedule's slice partials (tc_slice_bytes; unused when that is 0).
void launch_linear_tc(int fmt, const DevMatrix& w, int64_t groups, const float* x, void* xc, int64_t tokens, float* y,
                      float* part);
// One weight of launch_linears_tc and where its outputs go ([tokens, w.rows]).
struct TcLinearTarget {
  DevMatrix w;
  float* y;
};
constexpr int kTcMaxTargets = 8;
// launch_linear_tc over up to kTcMaxTargets weights of one tc format and the same columns, all
// reading the same x (Backend::linears: sibling projections), in ONE launch (and one split of x, none
// if x_split: xc already holds x split as fmt reads it; one sum of slices): the slice count and the
// schedule follow from all their rows at once, so a member's bits may differ from its own
// launch_linear_tc's (the shape rule, not the batch, decides them either way). part:
// tc_linears_slice_bytes.
void launch_linears_tc(int fmt, std::span<const TcLinearTarget> targets, const float* x, void* xc, bool x_split,
                       int64_t tokens, float* part);
size_t tc_linears_slice_bytes(int fmt, std::span<const TcLinearTarget> targets, int64_t tokens, const float* x);
// Whether fmt's kernels read x split as f16 parts (else bf16 parts): one split serves the formats of
// one kind.
bool tc_split_f16(int fmt);
// The grid-split schedule, the default (DEEPINFER_TC_GRID_SPLIT=0 turns it off; linear and the shared
// expert's tensor-core GEMMs, launch_moe_gemm_tc over identity rows): calls of more than 8
// tokens stage x in shared memory for every CTA (the 8 warps of a CTA read it once from L2, not once
// each: ncu, H100, batch 32: the FP8 / BF16 linears moved 0.4-0.5 TB/s), and where whole-K CTAs
// would not fill the SMs each slice of the split schedule gets its own CTAs, their partials then
// summed in slice order (sum_slices_kernel, launched by launch_linear_tc). The same MMAs, the same bits
// (but for the default mode's f16-operand formats, which take more slices there unless
// DEEPINFER_TC_GRID_SLICES=0: tc_gemm.cu's grid_slices).
bool tc_grid_split_wanted();
// Bytes of the slice partials launch_linear_tc(fmt, w, ...) needs for this call (0: none).
size_t tc_slice_bytes(int fmt, const DevMatrix& w, int64_t groups, int64_t tokens, const float* x);
// Rows per MoE tile for the tensor-core GEMM at about rows_per_expert rows per expert (8, 32 or 64).
int tc_moe_tile_rows(int64_t rows_per_expert);
// launch_moe_gate_up (swiglu) / launch_moe_down on the tensor cores: fmt the tc_format of all the
// experts' matrices; tiles of tile_rows rows at most (identity rows: blocks of tile_rows); x [x_rows,
// K] (rows through row_src), split into xc (tc_split_bytes(x_rows, 1, K)) unless tc_reads_x(tile_rows, x).
// routed: the experts' split-K is that of routed experts (a fixed rule of the shape), else the
// shared expert's. part: room for the grid-split schedule's slice partials of identity rows
// (tc_identity_slice_bytes; unused when that is 0).
void launch_moe_gemm_tc(bool swiglu, int fmt, const DevMatrix* wa, const DevMatrix* wb, const MoeTile* tiles,
                        const int32_t* tile_count, int64_t grid_tiles, int64_t identity_rows, int tile_rows,
                        const int32_t* row_src, const float* x, int64_t x_rows, void* xc, int64_t K, float* y,
                        int64_t n_out, float limit, bool routed, float* part);
// Bytes of those partials for a call over `rows` identity rows (the shared expert; 0: none).
size_t tc_identity_slice_bytes(bool swiglu, int64_t rows, int tile_rows, const float* x, int64_t K, int64_t n_out);

}  // namespace deepinfer::cuda
