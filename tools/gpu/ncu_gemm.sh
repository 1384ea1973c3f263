#!/usr/bin/env bash
# Why the decode GEMMs stream below bandwidth: ncu's detailed sections (speed of light, memory
# workload, warp stall reasons, occupancy, launch shape, source counters) for the weight-streaming
# kernels of one decode step of the V4-Flash-shaped bench model, in ONE device call (after
# tools/gpu/build.sh here; the device tool: carry [".gpu"]):
#
#   tools/gpu/ncu_gemm.sh            # BATCH=1 (default) or BATCH=32; KERNELS: an ncu -k regex;
#                                    # PREFILL=2048: one prefill of that many tokens instead of decode;
#                                    # LAUNCH_COUNT=N: the first N matching launches only;
#                                    # KERNELS matches the demangled name with its template
#                                    # arguments as ncu writes them, `<(int)4, (bool)1, (int)2>`:
#                                    # e.g. KERNELS='moe_gemv_fp4_kernel<.int.4, .bool.1' ('<4, 1'
#                                    # matches nothing: docs/perf.md, session 24)
#
# Writes $OUT/ncu_gemm.txt (the report), $OUT/ncu_gemm_stalls.txt (every stall reason, the excess
# sectors and wavefronts) and $OUT/ncu_gemm.ncu-rep (open in Nsight Compute).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
ncu_setup || exit 1  # $out, the bench checkpoint at $src, $ncu
# A decode step inside the bench's profiler range; a prefill (no range: the whole run, so use
# LAUNCH_COUNT) otherwise.
if [ -n "${PREFILL:-}" ]; then shape=(--batch none --prefill "$PREFILL" --prefill-runs 1) range=(--profile-from-start on)
else shape=(--batch "${BATCH:-1}" --context 4096 --prefill none --steps 1 --warmup 1 --profile) range=(--profile-from-start off); fi
"$ncu" "${range[@]}" --clock-control none --kernel-name-base demangled -k "regex:${KERNELS:-linear_tc_kernel|moe_gemv_fp4_kernel|decode_gemv|_stream_kernel}" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --section SourceCounters --export "$out/ncu_gemm" --force-overwrite \
  ${LAUNCH_COUNT:+-c "$LAUNCH_COUNT"} "$root/.gpu/deepinfer" bench --model "$src" --device cuda "${shape[@]}" \
  > "$out/ncu_run.txt" 2>&1
echo "ncu rc $?"
"$ncu" --import "$out/ncu_gemm.ncu-rep" --page details --print-units base > "$out/ncu_gemm.txt" 2>&1
# Every warp stall reason (the details page lists only the top ones) and the excess sectors /
# wavefronts behind ncu's coalescing and bank-conflict hints.
"$ncu" --import "$out/ncu_gemm.ncu-rep" --page details --print-details all --print-units base 2>&1 |
  grep -E "^  [^ ]|Stall [A-Z]|Excessive|Hit Rate|Throughput  " > "$out/ncu_gemm_stalls.txt"
"$ncu" --import "$out/ncu_gemm.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  > "$out/ncu_gemm_raw.csv" 2>&1
tail -5 "$out/ncu_run.txt"
wc -l "$out/ncu_gemm.txt"
