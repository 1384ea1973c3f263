#!/usr/bin/env bash
# Where inside one kernel the time goes: ncu's per-instruction view (SASS with executed counts and
# warp-stall samples) of the first launch matching KERNELS in one decode step of the V4-Flash-shaped
# bench model, plus the kernel's SASS from cuobjdump, in ONE device call (after tools/gpu/build.sh
# here; the device tool: carry [".gpu"]):
#
#   KERNELS='moe_gemv_fp4_kernel<.int.2, .bool.1' BATCH=32 tools/gpu/ncu_source.sh
#
# (KERNELS: an ncu -k regex on the demangled name, as tools/gpu/ncu_gemm.sh explains.) Writes
# $OUT/ncu_source.csv (ncu --page source), $OUT/ncu_source_hot.txt (the instructions with the most
# stall samples) and $OUT/sass.txt (the matching functions' SASS, where the image has cuobjdump).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
ncu_setup || exit 1  # $out, the bench checkpoint at $src, $ncu
[ -n "${KERNELS:-}" ] || { echo "KERNELS (an ncu -k regex) is required"; exit 1; }
"$ncu" --profile-from-start off --clock-control none --kernel-name-base demangled -k "regex:$KERNELS" -c 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source no \
  --export "$out/ncu_source" --force-overwrite \
  "$root/.gpu/deepinfer" bench --model "$src" --device cuda --batch "${BATCH:-32}" --context 4096 --prefill none \
  --steps 1 --warmup 1 --profile > "$out/ncu_source_run.txt" 2>&1
echo "ncu rc $?"
"$ncu" --import "$out/ncu_source.ncu-rep" --page source --print-source sass --csv > "$out/ncu_source.csv" 2>&1
echo "source page rc $? ($(wc -l < "$out/ncu_source.csv") lines)"
python3 - "$out/ncu_source.csv" > "$out/ncu_source_hot.txt" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next((i for i, r in enumerate(rows) if "Warp Stall Sampling (All Samples)" in r), None)
if head is None:
    sys.exit("no 'Warp Stall Sampling (All Samples)' column in the source page")
cols, body = rows[head], rows[head + 1:]
samp, src = cols.index("Warp Stall Sampling (All Samples)"), cols.index("Source")
num = lambda v: float(v.replace(",", "") or 0)
print(f"{len(body)} instructions, {sum(num(r[samp]) for r in body):.0f} stall samples; the 60 with the most:")
for r in sorted(body, key=lambda r: -num(r[samp]))[:60]:
    print(f"{num(r[samp]):8.0f}  {r[0]:>6}  {r[src]}")
EOF
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$cuobjdump" ]; then
  # The functions whose mangled name holds SASS_MATCH (default: the kernel's base name).
  "$cuobjdump" -sass "$root/.gpu/deepinfer" 2>/dev/null | awk -v m="${SASS_MATCH:-${KERNELS%%<*}}" '
    /Function : / { keep = index($0, m) > 0 } keep { print }' > "$out/sass.txt"
  echo "sass: $(wc -l < "$out/sass.txt") lines"
else
  echo "no cuobjdump on this machine"
fi
