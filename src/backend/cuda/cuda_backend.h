#pragma once
// The CUDA backend (Hopper SM90 first). Host side (g++): validation, weight mirrors, staging and
// launches; kernels live in *.cu files behind plain launcher functions (*_kernels.h).
// The CUDA backend: every op of backend.h as CUDA kernels on one stream.
// Activations and state pools live in device memory from allocator(); weights arrive as host views
// (backend.h) and are mirrored to the device once, on first use, in their stored dtype. Per-step
// metadata (token ids, positions, sequence slices, block tables) is uploaded per call into a small
// device staging area. This first version favours straightforward kernels checked against the
// CPU op by test_backend_ops; the kernels issue (#13) takes them to the floor.
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_types.h"
#include "backend/cuda/launch_control.h"
#include "backend/cuda/step_plan.h"

namespace deepinfer::cuda {

class CublasLinear;  // cublas_linear.h

// Plain cudaMalloc / cudaFree (never managed memory), counted by the Allocator base.
class CudaAllocator final : public Allocator {
 public:
  Device device() const override { return Device::CUDA; }
  std::string_view name() const override { return "cuda"; }
  void copy(void* dst, const void* src, size_t bytes) override;
  void write(void* dst, const void* host_src, size_t bytes) override;

 protected:
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) noexcept override;
};

// A weight matrix mirrored on the device: stored bytes and scales, with the host description.
struct DeviceWeight {
  WeightMatrix host;  // rows, cols, dtype, block sizes (its pointers are host pointers)
  const std::byte* data = nullptr;
  const std::byte* scale = nullptr;
  bool fp8_exact_in_f16 = false;  // DevMatrix::fp8_exact_in_f16
  const float* row_scale = nullptr;  // DevMatrix::row_scale
  DevMatrix dev() const {
    return {.dtype = static_cast<int>(host.dtype),
            .scale_dtype = static_cast<int>(host.scale_dtype),
            .rows = host.rows,
            .cols = host.cols,
            .data = reinterpret_cast<const uint8_t*>(data),
            .scale = reinterpret_cast<const uint8_t*>(scale),
            .scale_cols = host.scale_cols,
            .block_rows = host.block_rows,
            .block_cols = host.block_cols,
            .fp8_exact_in_f16 = fp8_exact_in_f16 ? 1 : 0,
            .unused = 0,
            .row_scale = row_scale};
  }
};

// Operands of CUDA ops: contiguous tensors of `dtype` in device memory.
inline void check_device(const TensorView& t, DType dtype, const char* what) {
  DEEPINFER_CHECK(t.dtype == dtype && t.device == Device::CUDA && t.is_contiguous(),
                  "{}: expected a contiguous {} CUDA tensor", what, dtype_name(dtype));
}

class CudaBackend final : public backend::Backend {
 public:
  explicit CudaBackend(const backend::BackendOptions& options);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::CUDA; }
  bool batch_invariant() const override { return options_.batch_invariant; }
  bool batching_keeps_bits() const override;
  // The indexer's Reference ties are replayed on the device (torch_topk.cuh: rows with a tie at
  // the k-th score only); the router's ties go to the lower index (a tie needs equal sqrtsoftplus
  // scores, which continuous logits never meet).
  bool reproduces_reference_ties(backend::TopKSite site) const override {
    return site == backend::TopKSite::IndexerEntries;
  }

  Allocator& allocator() override { return allocator_; }
  void copy_to_backend(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override;
  void make_current() override;
  // Decode steps of the listed batch sizes are captured as CUDA graphs (the second time their shape
  // is seen) and replayed while every launch of the step matches the recording (step_graphs.cpp).
  void run_step(const backend::StepShape& shape, const std::function<void()>& device_ops) override;
  int64_t recorded_step_size(const backend::StepShape& shape) const override;
  bool records_step(const backend::StepShape& shape) const override { return graphable(shape); }
  backend::StepGraphStats step_graph_stats() const override { return graph_stats_; }
  void perturb_next_replay(int64_t op) override { perturb_op_ = op; }

  void linear(const WeightMatrix& w, TensorView x, TensorView y) override;
  void linears(TensorView x, std::span<const backend::LinearOut> outs) override;
  void grouped_linear(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y) override;
  void gather_rows(TensorView src, std::span<const int64_t> rows, TensorView dst) override;
  void embed(const WeightMatrix& table, std::span<const int32_t> ids, TensorView out) override;
  void embed_ids(const WeightMatrix& table, TensorView ids, TensorView out) override;
  void rms_norm(TensorView x, const float* weight, float eps, TensorView out) override;
  void rope(TensorView x, std::span<const int64_t> positions, const backend::RopeFreqs& freqs, bool inverse) override;

  void mhc_pre(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual, TensorView input,
               TensorView post, TensorView comb) override;
  void mhc_post(TensorView residual, TensorView out, TensorView post, TensorView comb) override;
  void mhc_head(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual,
                TensorView hidden) override;

  void compress(const backend::CompressorLayout& c, const backend::CompressorWeights& w,
                const backend::RopeFreqs& freqs, TensorView kv, TensorView gate,
                std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state) override;
  void indexer_select(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                      float head_weight_scale, float score_scale, int64_t top_k, backend::TopKTies ties,
                      std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                      TensorView selected) override;
  void store_window(const backend::WindowLayout& wl, TensorView kv, std::span<const backend::SeqSlice> seqs,
                    const backend::StateStorage& state) override;
  void sparse_attention(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                        const backend::CompressorLayout* entries, TensorView selected, const float* sink, float scale,
                        std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                        TensorView out) override;

  void moe_route(const backend::RoutingParams& p, TensorView logits, std::span<const int32_t> token_ids,
                 TensorView experts, TensorView weights) override;
  void moe_experts(const backend::MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                   TensorView out) override;
  void moe_shared_expert(const backend::MoeWeights& w, TensorView x, TensorView out) override;
  void moe_expert_rows(const backend::MoeWeights& w, TensorView x, TensorView row_expert, TensorView y) override;
  void moe_combine(TensorView y, TensorView row_of, TensorView experts, TensorView weights, TensorView out) override;
  void quantize_dequantize(TensorView x, backend::ActQuant format) override;
  void sample(TensorView logits, std::span<const backend::SampleRow> rows, std::span<int32_t> tokens) override;

  // DeepSeek-V4.1 (ops_v41.cpp).
  void round_bf16(TensorView x) override;
  void mhc_coefficients(const backend::MhcWeights& w, const backend::MhcParams& p, TensorView residual, TensorView pre,
                        TensorView post, TensorView comb) override;
  void mhc_collapse(TensorView residual, TensorView pre, TensorView out) override;
  void compress_pool(const backend::CompressorLayout& c, TensorView kv, TensorView gate,
                     std::span<const backend::EntryRef> entries, std::span<const backend::SeqSlice> seqs,
                     const backend::StateStorage& state, TensorView out) override;
  void store_entries(const backend::CompressorLayout& c, TensorView rows, std::span<const backend::EntryRef> entries,
                     std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state) override;
  void indexer_select_v41(const backend::CompressorLayout& keys, TensorView q, TensorView head_weights,
                          const backend::IndexerV41Params& p, std::span<const backend::SeqSlice> seqs,
                          const backend::StateStorage& state, TensorView candidates, TensorView selected) override;
  void sparse_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl,
                            const backend::CompressorLayout* entries, TensorView selected, const float* sink,
                            float scale, std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                            TensorView out) override;
  void block_attention_v41(TensorView q, TensorView kv, const backend::WindowLayout& wl, const float* sink, float scale,
                           std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                           TensorView out) override;
  void moe_experts_v41(const backend::MoeWeights& w, const backend::MoeV41Quant& quant, TensorView x,
                       TensorView experts, TensorView weights, TensorView out) override;
  void engram_gate(TensorView residual, TensorView kv, const float* weight, float eps) override;
  void engram_hash(const backend::EngramHashParams& p, const backend::WindowLayout& history,
                   std::span<const int32_t> compressed_ids, std::span<const int32_t> floor_history,
                   std::span<const backend::SeqSlice> seqs, const backend::StateStorage& state,
                   TensorView hash_ids) override;

  // --- helpers for the op files ---
  // Every op runs on the backend's own stream (blocking: ordered with legacy-stream copies).
  cudaStream_t stream() const { return stream_; }
  // The device mirror of a weight matrix / of a host float array (uploaded on first use).
  const DeviceWeight& weight(const WeightMatrix& w);
  const float* floats(const float* host, size_t count);
  const int32_t* ints(const int32_t* host, size_t count);
  // Per-op staging: copies host data into device scratch that stays valid until the next op
  // begins (begin_op). The copy goes through a pinned host ring with cudaMemcpyAsync on the one
  // stream, so it is ordered after earlier kernels (a later op's upload never overwrites data a
  // kernel still reads) and the host does not wait for the GPU: the launches of a step queue up.
  // The ring is reused only after a synchronize, once it has filled.
  void begin_op() {
    staging_used_ = 0;
    staging_chunk_ = 0;
    launch_control().stream = stream_;
    if (step_mode_ != StepMode::None) on_op_begin();
  }
  // The running step's work partition (step_plan.h); an eager step's outside run_step.
  const StepPlan& plan() const { return plan_; }
  // Inside a recorded step: blocks per sequence table the recording holds (tables are padded to it,
  // and launch sizes that follow context length use it as their bound); 0 otherwise.
  int64_t step_block_capacity() const { return plan_.block_capacity; }
  // The positions a recorded step's tables can hold (0 outside one): the bound its launch sizes use.
  int64_t step_token_capacity(const backend::StateStorage& state) const {
    return plan_.block_capacity * state.block_tokens;
  }
  template <typename T>
  T* stage(std::span<const T> host) {
    return static_cast<T*>(stage_bytes(host.data(), host.size_bytes()));
  }
  // The step's sequences as DeviceSeq plus their concatenated block tables.
  struct StagedSeqs {
    const DeviceSeq* seqs = nullptr;
    const int32_t* blocks = nullptr;
    int32_t count = 0;
    std::vector<DeviceSeq> host;  // the same, on the host (for launch sizing)
  };
  StagedSeqs stage_seqs(std::span<const backend::SeqSlice> seqs, int64_t tokens, const backend::StateStorage& state);
  static DevState dev_state(const backend::StateStorage& s) {
    return {s.slots, s.blocks, s.slot_elems, s.block_elems, s.block_tokens};
  }
  static DevCompressor dev_compressor(const backend::CompressorLayout& c) {
    return {c.rate, c.head_dim, c.width, c.overlap ? 1 : 0, c.slot_offset, c.block_offset, c.entries_per_block};
  }
  DevRope dev_rope(const backend::RopeFreqs& f) {
    return {floats(f.inv_freq.data(), f.inv_freq.size()), f.half(), f.attention_factor, 0};
  }
  // Scratch device memory for one op (reused across calls; contents undefined).
  void* scratch(size_t bytes, int which = 0);
  // The indexer's arguments over the staged step, and the entries a score row must hold
  // (max_held: the step's most, or in a recorded step the most its tables can hold).
  IndexerArgs indexer_args(const backend::CompressorLayout& keys, const StagedSeqs& staged,
                           const backend::StateStorage& state, TensorView q, TensorView head_weights,
                           float head_weight_scale, float score_scale, int64_t* max_held);
  // An mHC site's mixing partials (launch_mhc_mix_partials into scratch 0 / 1): sumsq, dots.
  std::pair<double*, float*> mhc_partials(const backend::MhcWeights& w, TensorView residual, int64_t tokens,
                                          int64_t width, int64_t mixes);

 private:
  void* stage_bytes(const void* host, size_t bytes);
  // moe_experts with `out` starting at empty_value (0 in moe_experts) when there is no shared expert.
  void moe_experts_filled(const backend::MoeWeights& w, TensorView x, TensorView experts, TensorView weights,
                          TensorView out, float empty_value);
  // The routed experts of one MoE layer as its kernels take them: the DevMatrix arrays on the
  // device (uploaded once, not staged per step) and their kernel formats. Cached by the experts
  // span and checked against every matrix's identity on each call (cheap: no lookups), so a list
  // freed and rebuilt at the same address is rebuilt here too (ops_gemm.cpp).
  struct ExpertTable {
    std::vector<WeightMatrix::Identity> ids;  // w1, w3, w2 of each expert
    std::vector<DevMatrix> m1, m3, m2;
    std::vector<Buffer> device;  // the three arrays
    const DevMatrix *d1 = nullptr, *d3 = nullptr, *d2 = nullptr;
    int64_t inter = 0;            // I
    int tc_gate_up = -1, tc_down = -1, gate_up_format = 0, down_format = 0;
    int fp4_gemv_rows = 0;  // the routed FP4 GEMV's largest tile for gate / up and down (0: none)
  };
  const ExpertTable& expert_table(std::span<const backend::SwigluExpert> experts, int64_t D);
  // linear and grouped_linear after validation (ops_gemm.cpp).
  void linear_any(const WeightMatrix& w, int64_t groups, TensorView x, TensorView y);
  // The cuBLASLt GEMM (cublas_linear.h) y [T, groups * R] = W x, W the rows of `ws` stacked (same
  // columns): cublas_ready says whether it runs for these operands (policy, formats, an algorithm)
  // and sizes its scratch, launching nothing; cublas_gemm then runs it.
  bool cublas_ready(std::span<const DevMatrix> ws, int64_t groups, int64_t T, const float* y);
  void cublas_gemm(std::span<const DevMatrix> ws, int64_t groups, const float* x, int64_t T, float* y);
  // Whether a GEMM of `rows` rows (per expert, for the routed experts) runs on the tensor cores
  // (gemm_kernels.h: TcPolicy).
  bool tensor_cores_for(int64_t rows) const;
  bool tensor_cores_for_experts(int64_t routed_rows, int64_t experts) const;
  bool tensor_cores_when(bool auto_choice) const;
  // Whether sparse attention over `tokens` tokens of head size hd runs on the tensor cores
  // (ops_attention.cpp).
  bool attention_on_tensor_cores(int64_t tokens, int64_t hd) const;
  // scratch() slots of the tensor-core GEMM's split activations (this one and the next).
  static constexpr int kTcScratch = 3;
  // scratch() slots of the cuBLASLt GEMM's bf16 weight and x, and of the shared expert's gate / up.
  static constexpr int kCublasScratch = 9;
  // scratch() slot of the shared expert's slice partials (the grid-split schedule; moe_experts).
  static constexpr int kSharedSliceScratch = 6;

  // run_step's pieces (step_graphs.cpp).
  // A recorded step is a chain of graphs of up to kOpsPerSegment ops each: a replay launches each
  // one as soon as the host has checked its ops, so the GPU starts while the host goes on.
  struct Segment {
    cudaGraphExec_t exec = nullptr;
    uint64_t signature = 0;  // of its launches (launch_control.h)
    int64_t first_op = 0;    // ops before it in the step
  };
  struct StepGraph {
    std::vector<Segment> segments;
    int64_t ops = 0;  // in the whole step
    int64_t seen = 0, failures = 0, mismatches_in_a_row = 0, last_used = 0;
    StepGraph() = default;
    StepGraph(const StepGraph&) = delete;
    StepGraph& operator=(const StepGraph&) = delete;
    ~StepGraph() { clear(); }
    void clear() {
      for (Segment& s : segments)
        if (s.exec) cudaGraphExecDestroy(s.exec);
      segments.clear();
      ops = 0;
    }
  };
  struct StepKey {
    int64_t tokens, sequences, logit_rows, block_capacity;
    auto operator<=>(const StepKey&) const = default;
  };
  enum class StepMode { None, Eager, Capture, Replay, Abandoned };
  bool graphable(const backend::StepShape& shape) const;
  // The ops from number skip_ops + 1 on launch (those before ran already, from graphs).
  void run_eager(const std::function<void()>& device_ops, int64_t skip_ops = 0);
  bool replay(StepGraph& g, const std::function<void()>& device_ops);
  void capture(StepGraph& g, const std::function<void()>& device_ops);
  void begin_recorded_step();  // waits for the stream, restarts the pinned ring, frees retired scratch
  void on_op_begin();          // segment boundaries (begin_op, inside a recorded or skipping step)
  bool close_capture_segment();  // ends, instantiates and launches the open capture
  void open_capture_segment();
  void discard_open_capture();   // ends an open capture and drops what it recorded
  bool launch_replayed_segment();  // the current segment, if the host's launches matched it

  backend::BackendOptions options_;
  CudaAllocator allocator_;
  cudaStream_t stream_ = nullptr;
  std::map<StepKey, std::unique_ptr<StepGraph>> graphs_;
  int64_t graph_clock_ = 0;
  backend::StepGraphStats graph_stats_;
  StepPlan idle_plan_;  // an eager step's, for ops called outside run_step
  StepPlan plan_;
  StepMode step_mode_ = StepMode::None;
  StepGraph* step_graph_ = nullptr;  // being captured or replayed
  int64_t op_index_ = 0;             // ops begun in this step
  int64_t skip_ops_ = 0;             // Eager: ops 1..skip_ops_ are suppressed
  size_t segment_ = 0;               // Replay: the segment being checked
  int64_t segment_first_op_ = 0;     // Capture: where the open segment starts
  int64_t failed_from_op_ = -1;      // Capture / Replay: the ops from here on must run eagerly
  int64_t perturb_op_ = -1;          // perturb_next_replay
  bool capturing_ = false;           // a stream capture is open
  bool step_unusable_ = false;       // this capture / replay did something a recording cannot hold
  std::vector<Buffer> retired_scratch_;  // replaced while capturing; freed after the graph ran
  std::mutex mutex_;
  std::map<WeightMatrix::Identity, std::pair<DeviceWeight, std::vector<Buffer>>> weights_;
  std::map<std::pair<const void*, size_t>, Buffer> arrays_;
  std::vector<Buffer> staging_;  // chunks; earlier chunks stay valid while an op stages more
  size_t staging_chunk_ = 0, staging_used_ = 0;
  std::byte* pinned_ = nullptr;  // host side of the staged copies (cudaHostAlloc), a ring
  size_t pinned_used_ = 0;
  static constexpr size_t kPinnedBytes = size_t{8} << 20;
  std::vector<Buffer> scratch_;
  std::map<std::pair<const void*, size_t>, ExpertTable> expert_tables_;
  std::unique_ptr<CublasLinear> cublas_;  // on first use; last, so it goes before allocator_'s memory
};

}  // namespace deepinfer::cuda
