#!/usr/bin/env bash
# Where a prefill's (or a decode step's) GPU time goes, by kernel: ncu's gpu__time_duration of every
# kernel of one `deepinfer bench` run on the V4-Flash-shaped checkpoint, summed by kernel name, in
# ONE device call (after tools/gpu/build.sh here; the device tool: carry [".gpu"]):
#
#   tools/gpu/ncu_breakdown.sh        # PREFILL=2048 (default) or BATCH=32 (one decode step instead);
#                                     # NCU_CACHE=none: keep the caches between kernels (default:
#                                     # ncu flushes them, which inflates the small kernels)
#
# The bench's warm-up runs are profiled too (same shapes), so the shares, not the sums, are the
# point. Writes $OUT/ncu_breakdown.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
out=${OUT:-/tmp/deepinfer-ncu}
mkdir -p "$out"
bench_checkpoint "$out" || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 1; }
if [ -n "${BATCH:-}" ]; then
  shape=(--batch "$BATCH" --context 4096 --prefill none --steps 1 --warmup 1 --profile) range=(--profile-from-start off)
  what="one decode step at batch $BATCH"
else
  shape=(--batch none --prefill "${PREFILL:-2048}" --prefill-runs 1) range=(--profile-from-start on)
  what="prefill ${PREFILL:-2048} (with its warm-up)"
fi
"$ncu" "${range[@]}" --clock-control none --cache-control "${NCU_CACHE:-all}" --metrics gpu__time_duration.sum --csv --page raw \
  "$root/.gpu/deepinfer" bench --model "$src" --device cuda "${shape[@]}" > "$out/ncu_breakdown.csv" 2> "$out/ncu_breakdown.err"
echo "ncu rc $?"
python3 - "$out/ncu_breakdown.csv" "$what" > "$out/ncu_breakdown.md" <<'EOF'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 3]
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
names, values = rows[head].index("Kernel Name"), rows[head].index("gpu__time_duration.sum")
total, by_kernel, launches = 0.0, collections.Counter(), collections.Counter()
for r in rows[head + 1:]:
    try:
        ns = float(r[values].replace(",", ""))
    except ValueError:
        continue  # the units row
    name = r[names]
    for noise in ("void ", "(anonymous namespace)::", "<unnamed>::", "unnamed>::", "deepinfer::cuda::", "tc::"):
        name = name.replace(noise, "")
    name = name.split("(")[0]  # the parameter list; template arguments stay (they name the instance)
    by_kernel[name] += ns
    launches[name] += 1
    total += ns
print(f"{sys.argv[2]}: {total / 1e6:.2f} ms of kernels, {sum(launches.values())} launches\n")
print("| kernel | share | ms | launches |\n|---|---:|---:|---:|")
for name, ns in by_kernel.most_common(30):
    print(f"| `{name}` | {100 * ns / total:.1f}% | {ns / 1e6:.2f} | {launches[name]} |")
EOF
cat "$out/ncu_breakdown.md"
