#pragma once
// The seam between model code and kernels. Model code (model/<arch>/) is a sequence of these ops;
// each backend (cpu/ today, cuda/ next) implements every one. Ops take tensor views and the step's
// per-sequence slices, write only their outputs (and, for the state ops, the pools), and allocate
// nothing per call beyond scratch they keep between calls. Shapes are in the comments: T = tokens of
// the step, H = heads, D = hidden, n = hc_mult, E = routed experts, K = experts per token.
//
// The work split of an op (GEMM tiles, threads, split-K) is the backend's choice, except under
// `batch_invariant`: then every output row must be computed by the same arithmetic whatever the
// other rows of the step are, so a sequence's results do not depend on its batch or chunking.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/state.h"
#include "backend/weight_matrix.h"
#include "core/buffer.h"
#include "core/tensor.h"

namespace deepinfer::backend {

// How top-k selections (MoE experts, indexer entries) break exact ties.
enum class TopKTies {
  // Exactly as the reference (torch.topk on the CPU, see cpu::torch_top_k_indices). Which of equal
  // scores survives then depends on how many candidates the forward call ranks, so a chunked
  // prefill can differ from a one-shot prefill where an exact tie sits at the k-th place.
  Reference,
  // The lower index wins, ranking only the candidates each token may see: independent of chunking
  // and batching. Chosen by DEEPINFER_BATCH_INVARIANT=1.
  LowerIndex,
};

// Where a top-k selection happens: the MoE router's experts (continuous scores, where exact ties
// are constructed rather than met) or the indexer's entries (ReLU scores: ties at zero are common).
enum class TopKSite { MoeExperts, IndexerEntries };

// Rotary frequencies of one rope flavour: pair i of a head's trailing 2 * inv_freq.size() channels
// rotates by position * inv_freq[i]; cos and sin are scaled by attention_factor.
struct RopeFreqs {
  std::span<const float> inv_freq;
  float attention_factor = 1.0f;
  int64_t half() const { return static_cast<int64_t>(inv_freq.size()); }
};

// One mHC mixer site: fn [(2+n)*n, n*D] (head: [n, n*D]), base [(2+n)*n] (head: [n]), scale [3]
// (head: [1]), all float32.
struct MhcWeights {
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
};

struct MhcParams {
  int64_t hc_mult = 4;
  int64_t sinkhorn_iters = 20;
  float hc_eps = 1e-6f;    // added after sigmoid / softmax and to each Sinkhorn divide
  float norm_eps = 1e-6f;  // of the unweighted RMSNorm over the flattened copies
};

// The float32 parameters of a compressor (its projections run as linear() in the model code).
struct CompressorWeights {
  const float* ape = nullptr;   // learned position bias [rate, width]
  const float* norm = nullptr;  // RMSNorm weight [head_dim]
  float norm_eps = 1e-6f;
};

// One projection of Backend::linears: its weight and where its outputs go.
struct LinearOut {
  const WeightMatrix* w = nullptr;
  TensorView y;
};

struct SwigluExpert {
  const WeightMatrix* w1 = nullptr;  // gate [I, D]
  const WeightMatrix* w2 = nullptr;  // down [D, I]
  const WeightMatrix* w3 = nullptr;  // up [I, D]
};

struct MoeWeights {
  std::span<const SwigluExpert> experts;  // [E]
  SwigluExpert shared;
  float swiglu_limit = 10.0f;  // gate <= limit, up in [-limit, limit]
};

enum class ScoringFunc { SqrtSoftplus, Sigmoid, Softmax };

struct RoutingParams {
  ScoringFunc scoring = ScoringFunc::SqrtSoftplus;
  int64_t top_k = 0;
  float routed_scaling_factor = 1.0f;
  bool norm_topk_prob = true;         // renormalise the chosen scores to sum 1 before scaling
  const float* bias = nullptr;        // e_score_correction_bias [E]: added for the choice only
  const int32_t* tid2eid = nullptr;   // hash routing: experts of token id v are tid2eid[v*K .. v*K+K)
  int64_t tid2eid_rows = 0;           // vocabulary rows of tid2eid
  TopKTies ties = TopKTies::Reference;
};

// The activation fake-quantisations of the DeepSeek-V4.1 reference (its kernel.py act_quant /
// fp4_act_quant with inplace=True): each group of `group` values along the last dimension gets a
// scale from its amax, is rounded to the element format (round to nearest even, saturating) and is
// multiplied back by the scale.
enum class ActQuant {
  Fp8Ue8m0,   // e4m3, group 32, scale 2^ceil(log2(max(amax, 1e-4) / 448))
  Fp4Ue8m0,   // e2m1, group 32, scale 2^ceil(log2(max(amax, 6 * 2^-126) / 6))  (index q / k)
  Fp4E4m3x16  // e2m1, group 16, scale e4m3(max(amax, 6 * 2^-9) / 6)             (compressed KV)
};

// --- DeepSeek-V4.1 op parameters ---

// One compressed entry a step completes: entry `entry` of the step's sequence `seq` (index into seqs).
// seq = -1 is padding (a recorded step keeps its entry count fixed): the ops compute nothing for it
// (compress_pool writes a zero row, store_entries skips it).
struct EntryRef {
  int32_t seq = 0;
  int64_t entry = 0;
};

// The V4.1 indexer's hierarchical candidate filter (MODELS.md): the candidate source scores blocks of
// `block_size` entries by their best entry, pins the block of the newest visible entry and keeps
// the top `blocks` of them; index layers after it score only inside those blocks.
enum class CandidateRole { None, Source, Filter };

struct IndexerV41Params {
  int64_t top_k = 0;
  float head_weight_scale = 1.0f;  // weights_proj output times this, rounded to bf16 as the reference does
  CandidateRole candidates = CandidateRole::None;
  int64_t candidate_blocks = 0, candidate_block_size = 0;
};

// Engram's n-gram hash (V4.1 engram.py): for each engram layer, position p hashes the compressed ids
// at p, p-1, ..., p-(max_ngram-1) (pad_id before the sequence start): rolling XOR of id * multiplier,
// one bucket per (n-gram size, head) column, modulo its prime plus its offset in the table.
struct EngramHashParams {
  int64_t max_ngram = 0, layers = 0, heads = 0;
  int64_t pad_id = 0;                  // compressed id of the pad token
  const int64_t* multipliers = nullptr;  // [layers, max_ngram]
  const int64_t* primes = nullptr;       // [layers, (max_ngram - 1) * heads]
  const int64_t* offsets = nullptr;      // [layers, (max_ngram - 1) * heads]
  int64_t columns() const { return (max_ngram - 1) * heads; }
};

// Which V4.1 expert GEMMs take FP8-quantised activations (their weights are FP8 or FP4 on disk).
struct MoeV41Quant {
  bool routed = false, shared = false;
};

// One logits row's draw (Backend::sample). The arithmetic is sample_math.h's, so every backend
// draws the same token from the same row.
struct SampleRow {
  double temperature = 0;  // 0: greedy (the largest logit, ties to the lowest id)
  int64_t top_k = 0;       // 0: off
  double top_p = 1;        // 1: off
  double min_p = 0;        // 0: off
  double uniform = 0;      // the draw, in [0, 1)
  // Allowed tokens (bit i % 32 of word i / 32; guided decoding), or empty: all allowed. Disallowed
  // tokens count as -inf.
  std::span<const uint32_t> allowed;
};

// What decides whether a step may replay a recording (run_step).
struct StepShape {
  int64_t tokens = 0, sequences = 0, logit_rows = 0;
  bool decode = false;     // every sequence brings exactly one token
  int64_t max_blocks = 0;  // the longest block table of the step
  bool replayable = true;  // false: the step leaves the device inside (an expert-parallel executor)
  // Of `sequences`, how many are padding (Backend::recorded_step_size; counted, not part of a key).
  int64_t padding = 0;
};

// How steps ran on a recording backend.
struct StepGraphStats {
  int64_t eager = 0;       // launched op by op (not recordable, first of its shape, or a fallback)
  int64_t captures = 0;    // recorded (and run)
  int64_t replays = 0;     // replayed from a recording
  int64_t mismatches = 0;  // a recording of the shape existed but the step's launches differed
  int64_t capture_failures = 0;
  // Decode steps padded up to a recorded batch size, and the padding rows they ran.
  int64_t padded_steps = 0, padding_rows = 0;
  // Host time spent in the ops' code: of the replays (host code with launches suppressed, signature
  // check, graph launch) and of the eager steps (queueing every launch).
  double replay_host_s = 0, eager_host_s = 0;
};

// Weights (WeightMatrix and the float vectors ops read) must outlive the backend and not change:
// a backend may prepare a weight on first use (repack it, upload it) and keep that copy.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
  virtual bool batch_invariant() const = 0;
  // Whether a row's results never depend on the other rows of a call in this mode. Always under
  // batch invariance; in the default mode a device backend may pick kernels by the number of rows
  // (the CUDA backend's tensor-core GEMM for many rows, docs/engine.md), and then batching may
  // change low bits, as in vLLM's default mode.
  virtual bool batching_keeps_bits() const { return true; }
  // Whether TopKTies::Reference reproduces torch.topk's CPU tie order at `site` (the CPU backend
  // does at both); where a backend does not, exact ties go to the lower index under both policies.
  virtual bool reproduces_reference_ties(TopKSite) const { return false; }

  // --- memory ---
  // Where the ops' tensors and the state pools live: activations (Workspace) and pools allocate
  // from it. Weight data (WeightMatrix, the float pointers of the *Weights structs, sinks, biases)
  // stays in host memory; a device backend mirrors it on first use.
  virtual Allocator& allocator() = 0;
  // Copies between host memory and this backend's memory; both complete before they return.
  virtual void copy_to_backend(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // Waits until every op issued so far has finished (a no-op on the CPU).
  virtual void synchronize() = 0;
  // Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice). A thread
  // that runs a model on another GPU than the one it last used calls it first: a data-parallel rank
  // does, once, on its own thread. A no-op on the CPU.
  virtual void make_current() {}

  // --- recorded steps ---
  // The device half of a forward step (ops only: no copy to the host inside) goes through
  // run_step, so a backend can record it once and replay it for later steps of the same shape
  // (CUDA graphs); the default runs it. `device_ops` may run more than once (a replay that cannot
  // be used falls back to launching), so it must not change host state other than its outputs.
  virtual void run_step(const StepShape& shape, const std::function<void()>& device_ops) {
    (void)shape;
    device_ops();
  }
  virtual StepGraphStats step_graph_stats() const { return {}; }
  // How many sequences a decode step of `shape` should run with so that it can replay a recording:
  // the next recorded batch size up, as vLLM pads (the model adds padding rows that write only the
  // pool's scratch slot and block); shape.tokens where nothing would be recorded for it (the
  // default, the CPU, eager mode, prefill, sizes past the largest recorded one).
  virtual int64_t recorded_step_size(const StepShape& shape) const { return shape.tokens; }
  // Whether run_step may record and replay a step of `shape`: the model then keeps the step's
  // launches independent of what varies between such steps (e.g. it pads the compressed entries a
  // step completes to their most, with EntryRef padding).
  virtual bool records_step(const StepShape& shape) const {
    (void)shape;
    return false;
  }
  // For tests: the next replayed step treats the launches of its op number `op` (from 1) as
  // different from the recording, so the replay falls back from there (a no-op where nothing is
  // recorded).
  virtual void perturb_next_replay(int64_t op) { (void)op; }

  // --- sampling ---
  // tokens[r] = the token drawn from logits [R, V] (F32) row r by rows[r]: the allowed mask, then
  // temperature, top-k, min-p, top-p, one draw (cpu/sample_rows.h says exactly how). Throws if a
  // row has NaN or +inf (after the mask) or nothing left. Returns after the tokens are on the host.
  virtual void sample(TensorView logits, std::span<const SampleRow> rows, std::span<int32_t> tokens) = 0;

  // --- dense ---
  // y [T, w.rows] = x [T, w.cols] W^T, W in its stored dtype, float32 accumulation.
  virtual void linear(const WeightMatrix& w, TensorView x, TensorView y) = 0;
  // The projections of one input (V4's wq_a, wkv, the compressors' wkv / wgate, ...): outs[i].y =
  // x W_i^T as linear computes each. A backend may run siblings of one format as one launch (CUDA:
  // one tensor-core GEMM over all their rows); by default one linear each.
  virtual void linears(TensorView x, std::span<const LinearOut> outs) {
    for (const LinearOut& o : outs) linear(*o.w, x, o.y);
  }
  // Block-diagonal projection: W [G*R, C]; y[t, g*R + r] = sum_c W[g*R + r, c] x[t, g*C + c].
  virtual void grouped_linear(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) = 0;
  // dst[i] = src[rows[i]] over the leading dimension (rows of the step that need logits).
  virtual void gather_rows(TensorView src, std::span<const int64_t> rows, TensorView dst) = 0;
  // out [T, copies, D]: every copy of row t = table[ids[t]] widened to float32.
  virtual void embed(const WeightMatrix& table, std::span<const int32_t> ids, TensorView out) = 0;
  // embed with the ids in this backend's memory (ids [N] I32, e.g. computed by an earlier op):
  // out [N, copies, D]. An id outside the table is an error on the CPU and a NaN row on a device,
  // which cannot stop the step (the NaN then fails sampling).
  virtual void embed_ids(const WeightMatrix& table, TensorView ids, TensorView out) = 0;
  // out = x * rsqrt(mean(x^2) + eps) * weight over the last dimension; weight may be null
  // (unweighted); out may alias x.
  virtual void rms_norm(TensorView x, const float* weight, float eps, TensorView out) = 0;
  // Interleaved rotary embedding on the trailing 2 * half channels of each head of x [T, heads, hd],
  // token t at positions[t]; inverse rotates by -position.
  virtual void rope(TensorView x, std::span<const int64_t> positions, const RopeFreqs& freqs, bool inverse) = 0;

  // --- mHC (hyper-connections) ---
  // From residual [T, n, D]: input [T, D] = sum_i pre_i x_i, post [T, n], comb [T, n, n]
  // (comb[j][k]: weight of copy j in output copy k), with sigmoid / softmax + Sinkhorn as MODELS.md.
  virtual void mhc_pre(const MhcWeights& w, const MhcParams& p, TensorView residual, TensorView input,
                       TensorView post, TensorView comb) = 0;
  // residual[t, k] = post[t, k] * out[t] + sum_j comb[t, j, k] residual[t, j].
  virtual void mhc_post(TensorView residual, TensorView out, TensorView post, TensorView comb) = 0;
  // hidden [T, D] = sum_i (sigmoid(mix_i * scale0 + base_i) + eps) x_i, mix = rms(flat) fn^T.
  virtual void mhc_head(const MhcWeights& w, const MhcParams& p, TensorView residual, TensorView hidden) = 0;

  // --- compressed attention state ---
  // Feeds each sequence's new tokens' projections kv, gate [T, width] to its compressor state and
  // writes every entry whose window completes (softmax-gated sum, RMSNorm, rope at w * rate) into
  // its blocks. Block tables must cover the new entries.
  virtual void compress(const CompressorLayout& c, const CompressorWeights& w, const RopeFreqs& freqs,
                        TensorView kv, TensorView gate, std::span<const SeqSlice> seqs,
                        const StateStorage& state) = 0;
  // The indexer: for each token, scores sum_h relu(q[t,h] . k_j) * score_scale * (w[t,h] *
  // head_weight_scale) over the entries j it may see (j < (pos + 1) / rate), keeps the top_k, sorted
  // by entry; selected [T, top_k] I32 padded with -1. q [T, nh, ihd] (roped), head_weights [T, nh].
  // Under TopKTies::Reference the hidden entries of the step's sequence rank too, at -inf, as the
  // reference's one call over the whole chunk does.
  virtual void indexer_select(const CompressorLayout& keys, TensorView q, TensorView head_weights,
                              float head_weight_scale, float score_scale, int64_t top_k, TopKTies ties,
                              std::span<const SeqSlice> seqs, const StateStorage& state, TensorView selected) = 0;
  // Writes the last min(count, window) rows of each sequence's kv [T, hd] into its window ring.
  virtual void store_window(const WindowLayout& wl, TensorView kv, std::span<const SeqSlice> seqs,
                            const StateStorage& state) = 0;
  // Shared-KV attention: q [T, H, hd] over the token's window (its ring before this step, then the
  // step's own kv [T, hd] rows) plus compressed entries: the selected ones (selected [T, k] I32,
  // -1 = none) or, with an empty `selected`, every completed one; per-head sink logits [H] take
  // probability mass and are dropped. entries may be null (sliding layers). out [T, H, hd].
  virtual void sparse_attention(TensorView q, TensorView kv, const WindowLayout& wl, const CompressorLayout* entries,
                                TensorView selected, const float* sink, float scale, std::span<const SeqSlice> seqs,
                                const StateStorage& state, TensorView out) = 0;

  // --- MoE ---
  // From router logits [T, E]: experts [T, K] I32 and weights [T, K] F32. The scores replace the
  // logits in place (logits is scratch to the op).
  virtual void moe_route(const RoutingParams& p, TensorView logits, std::span<const int32_t> token_ids,
                         TensorView experts, TensorView weights) = 0;
  // out [T, D] = shared(x) + sum_k weights[t,k] * expert[experts[t,k]](x), SwiGLU with clamps;
  // experts accumulate in ascending expert id per token.
  virtual void moe_experts(const MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                           TensorView out) = 0;
  // The three parts of moe_experts, for expert parallelism (dist/ep_moe.h), where the routed rows
  // run on other ranks. moe_shared_expert, then moe_expert_rows over every routed row, then
  // moe_combine gives moe_experts' bits. A backend without them throws naming the op.
  // out [T, D] = shared(x), zeros without a shared expert.
  virtual void moe_shared_expert(const MoeWeights& w, TensorView x, TensorView out);
  // y [R, D] row i = expert row_expert[i] (of w.experts) applied to x [R, D] row i, unweighted;
  // row_expert [R] I32. A row's result does not depend on the other rows.
  virtual void moe_expert_rows(const MoeWeights& w, TensorView x, TensorView row_expert, TensorView y);
  // out [T, D] += weights[t, k] * y[row_of[t, k]] over the k with row_of[t, k] >= 0, in ascending
  // experts[t, k] (ties: ascending k), as moe_experts adds them. row_of, experts [T, K] I32.
  virtual void moe_combine(TensorView y, TensorView row_of, TensorView experts, TensorView weights, TensorView out);

  // --- quantisation (DeepSeek-V4.1) ---
  // x [.., n] in place, n a multiple of the format's group (see ActQuant).
  virtual void quantize_dequantize(TensorView x, ActQuant format) = 0;

  // --- DeepSeek-V4.1 (CPU; a backend without them throws "not implemented" naming the op) ---
  // The reference computes in bf16: x rounded to the nearest bfloat16 (ties to even), in place.
  virtual void round_bf16(TensorView x);
  // One mHC site's coefficients without applying them (V4.1 applies a site's pre at the next site):
  // pre [T, n], post [T, n], comb [T, n, n] from residual [T, n, D], as mhc_pre computes them.
  virtual void mhc_coefficients(const MhcWeights& w, const MhcParams& p, TensorView residual, TensorView pre,
                                TensorView post, TensorView comb);
  // out [T, D] = sum_i pre[t, i] residual[t, i] (float32, copies added in order).
  virtual void mhc_collapse(TensorView residual, TensorView pre, TensorView out);
  // Gated pooling of a rate > 1 compressor without position bias or overlap: out [N, head_dim] row i
  // = sum_s softmax_s(gate) * kv over the `rate` tokens of entries[i] (rows of the step's kv / gate
  // [T, head_dim], or of the slot's pending group), then the slot keeps each sequence's open group.
  virtual void compress_pool(const CompressorLayout& c, TensorView kv, TensorView gate,
                             std::span<const EntryRef> entries, std::span<const SeqSlice> seqs,
                             const StateStorage& state, TensorView out);
  // Writes rows [N, head_dim] as the given entries of compressor `c` into their blocks.
  virtual void store_entries(const CompressorLayout& c, TensorView rows, std::span<const EntryRef> entries,
                             std::span<const SeqSlice> seqs, const StateStorage& state);
  // V4.1 indexer in the reference's bf16 arithmetic: score_j = bf16(sum_h bf16(relu(bf16(q_h . k_j)) *
  // w_h)), w = bf16(head_weights * head_weight_scale), over the entries j < (pos + 1) / rate of `keys`;
  // the top_k (ties: lower entry), sorted, -1 padded, into selected [T, top_k] I32. candidates
  // [T, candidate_blocks] I32 (-1 = none) is written by a Source and read by a Filter.
  virtual void indexer_select_v41(const CompressorLayout& keys, TensorView q, TensorView head_weights,
                                  const IndexerV41Params& p, std::span<const SeqSlice> seqs,
                                  const StateStorage& state, TensorView candidates, TensorView selected);
  // sparse_attention as the V4.1 kernel computes it: online softmax over blocks of 64 keys (window
  // first, then the selected entries), probabilities rounded to bf16 before PV, output rounded to
  // bf16. `selected` may be empty (sliding layers).
  virtual void sparse_attention_v41(TensorView q, TensorView kv, const WindowLayout& wl,
                                    const CompressorLayout* entries, TensorView selected, const float* sink,
                                    float scale, std::span<const SeqSlice> seqs, const StateStorage& state,
                                    TensorView out);
  // A DSpark draft block (V4.1 DSparkAttention): each sequence's `count` tokens are one block at
  // positions start .. start + count - 1; every query sees the window ring's rows before `start`
  // (the last W positions, in ring-slot order) and every row of its block's kv [T, hd], no causal
  // mask; sink, bf16 rounding and blocked softmax as sparse_attention_v41. Writes no state.
  virtual void block_attention_v41(TensorView q, TensorView kv, const WindowLayout& wl, const float* sink, float scale,
                                   std::span<const SeqSlice> seqs, const StateStorage& state, TensorView out);
  // V4.1 MoE experts: per expert bf16(w1 x), bf16(w3 x), clamps, bf16(weight * silu(gate) * up), bf16(w2 .),
  // quantised activations where `quant` says; routed experts summed in ascending id, then the shared
  // one; out [T, D] rounded to bf16.
  virtual void moe_experts_v41(const MoeWeights& w, const MoeV41Quant& quant, TensorView x, TensorView experts,
                               TensorView weights, TensorView out);
  // Engram's gate: residual [T, n, D] += sigmoid(signed sqrt(dot)) * value per copy, with key/value
  // from kv [T, (n + 1) * D] and dot = sum(h * weight * key) * rsqrt(ms(h) + eps) * rsqrt(ms(key) + eps)
  // / sqrt(D); weight [n, D]; the result rounded to bf16.
  virtual void engram_gate(TensorView residual, TensorView kv, const float* weight, float eps);
  // Engram hash ids [layers, T, columns] I32 of the step's tokens (compressed ids) from each
  // sequence's id history, kept in the ring `history` (window >= max_ngram - 1, head_dim 1). Below a
  // sequence's window_floor (bounded replay after a prefix hit: the ring holds another sequence's
  // ids) the history comes from `floor_history`, [seqs, max_ngram - 1] compressed ids of positions
  // start - max_ngram + 1 .. start - 1 (pad_id where unknown); empty: pad_id there.
  virtual void engram_hash(const EngramHashParams& p, const WindowLayout& history,
                           std::span<const int32_t> compressed_ids, std::span<const int32_t> floor_history,
                           std::span<const SeqSlice> seqs, const StateStorage& state, TensorView hash_ids);
};

// How a device backend runs sparse attention (cuda/step_plan.h, ops_attention.cpp): Auto lets each
// step choose; Split and Fused force one of the two CUDA-core schedules (the same bits either way);
// TensorCores forces the tensor-core kernel (float32 precision, other low bits; where a head size
// does not fit it, Fused). Tests and benchmarks pin them. The CPU ignores it.
enum class AttentionSchedule { Auto, Split, Fused, TensorCores };

struct BackendOptions {
  bool batch_invariant = false;
  AttentionSchedule attention_schedule = AttentionSchedule::Auto;
  int device_index = 0;  // which GPU (device backends), as CUDA numbers the visible ones
  // Decode steps whose batch size is listed here are recorded once and replayed (CUDA graphs);
  // empty, or enforce_eager: every step launches its kernels one by one.
  std::vector<int64_t> cuda_graph_sizes = default_cuda_graph_sizes(512);
  bool enforce_eager = false;
  // vLLM's `--cuda-graph-sizes N` list: 1, 2, 4, then every multiple of 8 up to N.
  static std::vector<int64_t> default_cuda_graph_sizes(int64_t max_size);
};

// The CPU reference backend (float32, threaded; see cpu/packed_linear.h for its GEMM).
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options = {});

// Every backend built into this binary and usable here ("cpu" always; "cuda" when compiled and a
// device is present), for test_backend_ops and `--device`.
std::vector<std::string> available_backends();
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options = {});
// Devices of that backend here: 1 for "cpu", the visible GPUs for "cuda" (0 without CUDA).
int device_count(std::string_view name);

}  // namespace deepinfer::backend
