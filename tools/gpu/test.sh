#!/usr/bin/env bash
# Runs on the GPU machine (after tools/gpu/build.sh here, with .gpu carried): every op of every
# backend against double-precision references (test_backend: cpu and cuda), the fixture and kjv
# parity tests and the batched-forward bit-identity tests with the model on CUDA, the engine tests
# on CUDA, expert parallelism (test_dist) with the ranks' models on CUDA, and a CLI generation on both
# devices; prints a summary table. Logs go to $OUT if set.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
out=${OUT:-/tmp/deepinfer-gpu}
mkdir -p "$out"
# The test binaries look for tests/data and models/ where they were built (/work/main).
if [ "$root" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$root" /work/main; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
declare -a rows
failures=0
run() {  # name, command...
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E "^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test|tests? ran" "$out/$name.log" | tr '\n' ' ')
  rows+=("$(printf '%-34s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - start)) "$summary")")
  [ $rc -eq 0 ] || { failures=$((failures + 1)); echo "--- $name failed; last lines:"; grep -E "Failure|FAILED|error" "$out/$name.log" | head -30; }
}
# DeepSeek-V4.1's ops have no CUDA kernels yet (issue #11): their tests run on the CPU only, and
# are named here rather than skipped, so the gap shows in this script.
v41_ops='RoundBf16TiesToEven:MhcCoefficientsAndCollapseAreMhcPre:CompressPoolCarriesOpenGroupsAcrossSteps:SparseAndBlockAttentionV41:IndexerV41CandidateBlocks:EngramHashOverTwoSteps:EngramHashBelowAReplayFloorTakesTheGivenHistory:EngramGate:MoeExpertsV41Bf16Semantics'
v41_cuda_excluded=$(echo "$v41_ops" | tr ':' '\n' | sed 's#^#*BackendOps.#; s#$#/cuda*#' | paste -sd:)
echo "not on CUDA yet (issue #11): the V4.1 ops and model tests ($v41_ops; V41Parity.*, BatchedForwardV41.*, BatchedForward.*/3-4, LLMApiV41.*)"
run backend_ops .gpu/test_backend --gtest_filter="*BackendOps*:-$v41_cuda_excluded"
run model_parity_cuda env DEEPINFER_DEVICE=cuda .gpu/test_model --gtest_filter='-*V41Parity.*:*BatchedForwardV41.*:Models/BatchedForward.*/3:Models/BatchedForward.*/4'
run engine_cuda env DEEPINFER_DEVICE=cuda .gpu/test_engine --gtest_filter='-LLMApiV41.*'
# Expert parallelism over the in-process transport with every rank's model on the GPU (ranks as
# threads sharing it): EP = 2 and 4 against one rank, bit for bit.
run ep_cuda env DEEPINFER_DEVICE=cuda .gpu/test_dist --gtest_filter='V4/ExpertParallel.*'
# The NCCL transport on one GPU: its collectives, and EP through it = the plain forward.
run nccl_cuda env DEEPINFER_DEVICE=cuda .gpu/test_dist_nccl
for device in cpu cuda; do
  run "generate_$device" .gpu/deepinfer generate --model models/kjv-tiny-v4 --device "$device" \
    --prompt "Psalms 23:1 The LORD is my shepherd; I" --max-tokens 48 --temperature 0 --print-ids
done
ids_of() { grep -E '^[0-9]+( [0-9]+)*$' "$out/generate_$1.log" | tail -1; }
if [ -n "$(ids_of cpu)" ] && [ "$(ids_of cpu)" = "$(ids_of cuda)" ]; then same=yes; else same=NO; fi
echo
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
echo "greedy ids, cpu vs cuda identical: $same" | tee -a "$out/summary.txt"
[ "$same" = yes ] || failures=$((failures + 1))
exit $((failures > 0))
