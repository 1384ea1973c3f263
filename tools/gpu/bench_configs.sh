#!/usr/bin/env bash
# `deepinfer bench` on the V4-Flash-shaped checkpoint (tools/peer/dsv4_make_ckpt.py, 4 layers) once
# per configuration, in ONE device call (after tools/gpu/build.sh here; the device tool: carry
# [".gpu"]), optionally after a gtest run of the op suite:
#
#   tools/gpu/bench_configs.sh "LABEL [VAR=VALUE ...] [-- bench args]" ...
#   e.g. tools/gpu/bench_configs.sh "auto" "cuda_attention DEEPINFER_TC_ATTENTION_MIN_TOKENS=1000000"
#
# A configuration is a label, then environment assignments, then after "--" extra bench arguments.
# BIN=DIR (among the assignments) runs another staged build: tools/gpu/build.sh on another commit,
# then `mv .gpu .gpu-other` (ignored by git; carry it too), and "other BIN=.gpu-other": an A/B of
# two commits in one device call.
# OPS_FILTER: a gtest filter for .gpu/test_backend run first (none: no op tests). BENCH_ARGS: the
# bench arguments every configuration shares (default: batches 1, 8, 32, 128 at 4K context and
# prefills of 2K and 8K). Writes $OUT/bench_configs.md (a line per configuration and measurement)
# and each run's log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
out=${OUT:-/tmp/deepinfer-bench-configs}
mkdir -p "$out"
if [ "$root" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$root" /work/main; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat "$root/.gpu/COMMIT" 2>/dev/null || echo '?')" | tee -a "$out/gpu.txt"
summary="$out/bench_configs.md"
if [ -n "${OPS_FILTER:-}" ]; then
  .gpu/test_backend --gtest_filter="$OPS_FILTER" > "$out/ops.log" 2>&1
  echo "ops ($OPS_FILTER): rc $? $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/ops.log" | tr '\n' ' ')" | tee -a "$summary"
  grep -E '^\[  FAILED  \]' "$out/ops.log" | tee -a "$summary"
fi
bench_checkpoint "$out" || exit 1
shared=${BENCH_ARGS:---batch 1,8,32,128 --context 4096 --prefill 2048,8192 --prefill-runs 1 --steps 5}
# Killed (e.g. by `timeout`, which signals the whole group) while a configuration runs: the
# measurements its log has so far still reach the summary.
current=""
cut_short() {
  [ -n "$current" ] && grep -E "decode B=|prefill [0-9]" "$out/bench_$current.log" | sed "s/^/  $current (cut short): /" | tee -a "$summary"
  exit 143
}
trap cut_short TERM INT
for config in "$@"; do
  read -r -a words <<< "$config"
  label=${words[0]}
  envs=() extra=() after=0 bin=.gpu
  for w in "${words[@]:1}"; do
    if [ "$w" = -- ]; then after=1
    elif [ "$after" = 1 ]; then extra+=("$w")
    elif [[ $w == BIN=* ]]; then bin=${w#BIN=}
    else envs+=("$w"); fi
  done
  if [ "$bin" != .gpu ] && [ -f "$bin/stage.tar.xz" ] && [ ! -x "$bin/deepinfer" ]; then
    (cd "$bin" && tar -xJf stage.tar.xz)
  fi
  [ -x "$bin/deepinfer" ] || { echo "bench $label: no $bin/deepinfer" | tee -a "$summary"; continue; }
  current=$label
  # shellcheck disable=SC2086
  env "${envs[@]}" LD_LIBRARY_PATH="$root/$bin/lib:$LD_LIBRARY_PATH" "$bin/deepinfer" bench --model "$src" \
    --device cuda $shared "${extra[@]}" > "$out/bench_$label.log" 2>&1
  echo "bench $label (${envs[*]} ${extra[*]} $bin): rc $?" | tee -a "$summary"
  current=""
  grep -E "decode B=|prefill [0-9]" "$out/bench_$label.log" | sed "s/^/  $label: /" | tee -a "$summary"
done
