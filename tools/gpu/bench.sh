#!/usr/bin/env bash
# The benchmark every kernel is judged by, in ONE device call (after tools/gpu/build.sh and
# tools/peer/make_llama_src.sh here; the device tool: carry [".gpu", ".peer"], timeout 600):
#
#   tools/gpu/bench.sh
#
# On the GPU machine it writes a random-weight V4-Flash-shaped checkpoint (4 layers: CSA, HCA,
# CSA, HCA) in the released layout (tools/peer/dsv4_make_ckpt.py), and then, in this order on the
# GPU (the llama.cpp CUDA build runs meanwhile on cores 2..15):
#   1. ours:  deepinfer bench on that folder: decode B = 1, 8, 32, 128 at 4K context, prefill 2K and
#             8K, each next to its floor measured in the same run (tools/cli/cmd_bench.cpp); then the
#             decode steps again with --enforce-eager (no CUDA graphs)
#   2. transformers DeepseekV4ForCausalLM (eager, bf16) on the same config, batch 1
#   3. llama.cpp on the same checkpoint converted to GGUF: llama-bench pp2048/pp8192 and tg at depth
#      4096, llama-batched-bench 4096-token prompts x 1/8/32/128 sequences
#   4. kjv-tiny-v4 and the v4_tiny_a fixture on cpu and cuda (tokens/s, greedy ids compared)
#   5. ncu (if time is left): kernel times of one decode step at batch 1 and 32
# and prints one table (tools/gpu/bench_table.py). Files in $OUT: summary.md (the table), ours.json,
# peer_results.json, logs.tar.gz. Knobs: DEADLINE_S (560), SKIP_PEERS=1 (ours + kjv only),
# OURS_ARGS (extra deepinfer bench arguments), NCU=0.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/stage_env.sh  # unpacks .gpu, sets root and the loader path (NCCL included)
out=${OUT:-/tmp/deepinfer-bench}
work=/tmp/dsv4
logs=$work/deepinfer
mkdir -p "$out" "$logs"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
bin="$root/.gpu/deepinfer"
[ -x "$bin" ] || { echo "no .gpu/deepinfer: run tools/gpu/build.sh first and carry .gpu"; exit 1; }

# cuBLAS for the GEMM ceiling (opened at run time by the benchmark).
if [ -z "${DEEPINFER_CUBLAS:-}" ]; then
  for c in /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.12 \
           $(python3 -c "import nvidia.cublas, os; d = os.path.dirname(nvidia.cublas.__file__); print(os.path.join(d, 'lib', 'libcublas.so.13'))" 2>/dev/null); do
    [ -f "$c" ] && { export DEEPINFER_CUBLAS=$c; break; }
  done
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$logs/gpu.txt"
echo "commit $(cat "$root/.gpu/COMMIT" 2>/dev/null || echo '?'); cublas ${DEEPINFER_CUBLAS:-none}" | tee -a "$logs/gpu.txt"

ours_v4="\"$bin\" bench --model \"\$SRC\" --device cuda --batch 1,8,32,128 --context 4096 --prefill 2048,8192 \
  --json $logs/ours.json ${OURS_ARGS:-} > $logs/ours.txt 2>&1; echo \$SRC > $logs/src_path"

# The same decode steps launched kernel by kernel (--enforce-eager): what the CUDA graphs save.
ours_eager="\"$bin\" bench --model \"\$SRC\" --device cuda --batch 1,8,32,128 --context 4096 --prefill none \
  --enforce-eager --json $logs/ours_eager.json > $logs/ours_eager.txt 2>&1"

# kjv and a fixture on both devices (cheap), then ncu on the V4 checkpoint if time is left.
cat > "$logs/final.sh" <<EOF
set -u
left() { echo \$(( $DEADLINE_S - \$(date +%s) + $T0 )); }
for dev in cpu cuda; do
  timeout 45 "$bin" bench --model models/kjv-tiny-v4 --device \$dev --batch 1,8,32,128 --context 2048 \
    --prefill 2048 --steps 5 --prefill-runs 2 --greedy 48 --json $logs/kjv_\$dev.json > $logs/kjv_\$dev.txt 2>&1
  timeout 20 "$bin" bench --model tests/data/fixtures/v4_tiny_a --device \$dev --batch 1,8,32,128 --context 192 \
    --prefill 128 --steps 5 --prefill-runs 2 --greedy 32 --json $logs/tiny_\$dev.json > $logs/tiny_\$dev.txt 2>&1
done
src=\$(cat $logs/src_path 2>/dev/null)
ncu=\$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "${NCU:-1}" = 1 ] && [ -n "\$ncu" ] && [ -n "\$src" ] && [ -d "\$src" ] && [ \$(left) -gt 100 ]; then
  timeout \$(( \$(left) - 15 )) "\$ncu" --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \
    --csv --print-units base --print-kernel-base function --log-file $logs/ncu.csv \
    "$bin" bench --model "\$src" --device cuda --batch 1,32 --context 4096 --prefill none --steps 1 --warmup 1 \
    --profile > $logs/ncu_bench.txt 2>&1
  echo "ncu rc \$?"
fi
EOF

if [ "${SKIP_PEERS:-0}" = 1 ]; then
  # Ours alone: the checkpoint, our benchmark, kjv / fixture.
  SRC=$work/src-ours
  [ -f "$SRC/config.json" ] || python3 tools/peer/dsv4_make_ckpt.py --out "$SRC" --ratios 4,128,4,128 \
    --tokenizer-dir tests/data/tokenizers/deepseek-v3 > "$logs/gen.log" 2>&1
  SRC=$SRC bash -c "$ours_v4"
  SRC=$SRC bash -c "$ours_eager"
  bash "$logs/final.sh" > "$logs/final.log" 2>&1
else
  WORK=$work OUT=$work/peer RATIOS=4,128,4,128 KEEP_SRC=1 DEADLINE_S=$DEADLINE_S HF=1 HF_PROMPT=2048 HF_DECODE=16 \
    LLAMA_SRC="$root/.peer/llama-src.tar.xz" TOKENIZER_DIR="$root/tests/data/tokenizers/deepseek-v3" \
    LB_PP=2048,8192 LB_UB=2048 LB_TG=32 LB_DEPTH=4096 REPS=2 BB_NPP=4096 BB_NTG=16 BB_NPL=1,8,32,128 \
    AFTER_GEN_CMD="timeout 280 bash -c '$ours_v4; $ours_eager'" FINAL_CMD="bash $logs/final.sh" \
    bash tools/peer/bench_llamacpp_v4.sh > "$logs/peer_driver.log" 2>&1
fi

python3 tools/gpu/bench_table.py "$work" > "$out/summary.md" 2> "$logs/table.err"
cp -f "$logs/ours.json" "$out/ours.json" 2>/dev/null
cp -f "$work/peer/results.json" "$out/peer_results.json" 2>/dev/null
tar -C "$work" -czf "$out/logs.tar.gz" deepinfer peer logs results 2>/dev/null
cat "$out/summary.md"
echo "total $(( $(date +%s) - T0 )) s"
