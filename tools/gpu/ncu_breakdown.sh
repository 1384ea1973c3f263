#!/usr/bin/env bash
# Where a prefill's (or a decode step's) GPU time goes, by kernel: ncu's gpu__time_duration of every
# kernel of one `deepinfer bench` run on the V4-Flash-shaped checkpoint, summed by kernel name, in
# ONE device call (after tools/gpu/build.sh here; the device tool: carry [".gpu"]):
#
#   tools/gpu/ncu_breakdown.sh        # PREFILL=2048 (default) or BATCH=32 (one decode step instead);
#                                     # NCU_CACHE=none: keep the caches between kernels (default:
#                                     # ncu flushes them, which inflates the small kernels);
#                                     # BY_GRID=1: each kernel's grids apart (the head's own row)
#
# The bench's warm-up runs are profiled too (same shapes), so the shares, not the sums, are the
# point. Each kernel's DRAM bytes give its rate and its time against the bytes' floor at COPY_TBS
# (default 4.25 TB/s: the H200's measured copy rate; with caches flushed between kernels, the
# default, the bytes are what the kernel must read). Writes $OUT/ncu_breakdown.md
# (tools/gpu/ncu_summary.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
ncu_setup || exit 1  # $out, the bench checkpoint at $src, $ncu
if [ -n "${BATCH:-}" ]; then
  shape=(--batch "$BATCH" --context 4096 --prefill none --steps 1 --warmup 1 --profile) range=(--profile-from-start off)
  what="one decode step at batch $BATCH"
else
  shape=(--batch none --prefill "${PREFILL:-2048}" --prefill-runs 1) range=(--profile-from-start on)
  what="prefill ${PREFILL:-2048} (with its warm-up)"
fi
"$ncu" "${range[@]}" --clock-control none --cache-control "${NCU_CACHE:-all}" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw \
  "$root/.gpu/deepinfer" bench --model "$src" --device cuda "${shape[@]}" > "$out/ncu_breakdown.csv" 2> "$out/ncu_breakdown.err"
echo "ncu rc $?"
python3 tools/gpu/ncu_summary.py "$out/ncu_breakdown.csv" "$what" "${COPY_TBS:-4.25}" ${BY_GRID:+--by-grid} > "$out/ncu_breakdown.md"
cat "$out/ncu_breakdown.md"
