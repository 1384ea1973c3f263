#!/usr/bin/env bash
# The GEMM policies (gemm_kernels.h: DEEPINFER_TC_GEMM) side by side in ONE device call (after
# tools/gpu/build.sh here; the device tool: carry [".gpu"]): the tensor-core GEMM's op tests with it
# pinned on, for each warp tile in ROWS_PER_WARP (DEEPINFER_TC_ROWS_PER_WARP), then `deepinfer bench`
# on the V4-Flash-shaped checkpoint (tools/peer/dsv4_make_ckpt.py, 4 layers) with the CUDA-core tile
# only (DEEPINFER_TC_GEMM=0), the default (auto: tensor cores from MIN_ROWS rows, each value in
# MIN_ROWS as DEEPINFER_TC_MIN_ROWS), and the tensor cores at every row count (=1).
#
#   tools/gpu/tc_sweep.sh        # BENCH_ARGS: deepinfer bench arguments; ROWS_PER_WARP ("2"); MIN_ROWS ("16")
#
# Writes $OUT/tc_sweep.md (one line per configuration and measurement) and the logs.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
out=${OUT:-/tmp/deepinfer-tc}
mkdir -p "$out"
if [ "$root" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$root" /work/main; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat "$root/.gpu/COMMIT" 2>/dev/null || echo '?')" | tee -a "$out/gpu.txt"
rows=${ROWS_PER_WARP:-2}
filter='*BackendOps*Linear*:*BackendOps*Moe*:*BackendOps*Grouped*:*BackendOps*Quantised*'
for rg in $rows; do
  DEEPINFER_TC_GEMM=1 DEEPINFER_TC_ROWS_PER_WARP=$rg .gpu/test_backend --gtest_filter="$filter" > "$out/ops_rg$rg.log" 2>&1
  echo "ops, tensor cores, $rg row groups a warp: rc $? $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/ops_rg$rg.log" | tr '\n' ' ')" |
    tee -a "$out/tc_sweep.md"
done
bench_checkpoint "$out" || exit 1
args=${BENCH_ARGS:---batch 1,8,32,128 --context 4096 --prefill 2048,8192 --prefill-runs 1 --steps 5}
bench() {  # label, env...
  local label=$1; shift
  # shellcheck disable=SC2086
  env "$@" .gpu/deepinfer bench --model "$src" --device cuda $args > "$out/bench_$label.log" 2>&1
  echo "bench $label: rc $?" | tee -a "$out/tc_sweep.md"
  grep -E "decode B=|prefill [0-9]" "$out/bench_$label.log" | sed "s/^/  $label: /" | tee -a "$out/tc_sweep.md"
}
bench cuda_core DEEPINFER_TC_GEMM=0
for n in ${MIN_ROWS:-16}; do bench "auto_min$n" DEEPINFER_TC_MIN_ROWS="$n"; done
for rg in $rows; do bench "tc_always_rg$rg" DEEPINFER_TC_GEMM=1 DEEPINFER_TC_ROWS_PER_WARP="$rg"; done
