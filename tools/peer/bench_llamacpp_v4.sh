#!/usr/bin/env bash
# llama.cpp (CUDA, sm_90) on a random-weight DeepSeek-V4-Flash-shaped model, one H200, plus
# transformers' own DeepseekV4ForCausalLM decode as a third data point.
#
# deepinfer's copy of ../shared/tools/peer-llamacpp/bench_llamacpp_v4.sh (tools/gpu/bench.sh runs
# it). Changes: LLAMA_SRC (a trimmed source .tar.xz from tools/peer/make_llama_src.sh) instead of
# the git bundle; AFTER_GEN_CMD runs on core 0 right after the checkpoint is written (our engine on
# the same folder, $SRC) while the GGUF conversion runs on core 1; FINAL_CMD runs last.
#
# Run on the GPU machine (see README.md next to this file for getting the llama.cpp bundle).
#
# What it does (timestamps of every phase go to run.log and the summary):
#   1. git clone peer/llama.cpp.bundle -> $WORK/llama.cpp; CUDA build (sm_90 only, Release,
#      targets llama-bench + llama-batched-bench) in the BACKGROUND on cores 1..N-1
#   2. meanwhile on core 0: write a random checkpoint in the released DeepSeek-V4 layout
#      (peer/dsv4_make_ckpt.py, on the GPU), convert it with llama.cpp's convert_hf_to_gguf.py
#      (peer/dsv4_convert.py), delete the source; if the build is still running, time
#      transformers' decode now (peer/dsv4_hf_decode.py), else after the llama.cpp runs
#   3. llama-bench: pp512/pp4096 (ubatch 512 and 2048), tg128 at depth 0 and 4096 (batch 1)
#   4. llama-batched-bench: prompt 512 and 4096, 128 decode steps, 1/8/32 parallel sequences
#   5. summary.md + results.json + logs into $OUT (8 files), refreshed after every phase
#
# Knobs (environment):
#   RATIOS=4,128      per-layer compress ratios (0 sliding / 4 CSA / 128 HCA); layers = entries
#   HASH_LAYERS=0     first N layers hash-routed (tid2eid), as the first 3 of the real model
#   PHASE=all         all | prep (build+model+convert+HF) | bench (needs a prep on the same warm machine)
#   WORK=/tmp/dsv4    scratch (build, GGUF); reused when present: built binaries and a finished GGUF are skipped
#   DEADLINE_S=570    stop starting new work after this many seconds
#   REPS=3            llama-bench repetitions
#   HF=1              run the transformers timing (0 = skip); HF_PROMPT=512 HF_DECODE=32
#   KEEP_SRC=0        keep the generated safetensors folder
#   LB_EXTRA=""       extra llama-bench args (e.g. "-fa 0,1"); BB_NPL=1,8,32 BB_NPP=512,4096 BB_NTG=128
#   GEN_DEVICE=cuda GEN_EXTRA=""  generator device / extra args (smoke tests with small dims)
#   LB_PP=512,4096 LB_UB=512,2048 LB_TG=128 LB_DEPTH=0,4096   llama-bench prompt / ubatch / generate / depth
#   LLAMA_SRC=""      trimmed llama.cpp source tarball (instead of LLAMA_BUNDLE)
#   AFTER_GEN_CMD=""  shell command run after the checkpoint is written (SRC=<folder> in its environment)
#   FINAL_CMD=""      shell command run after everything else
set -uo pipefail
# no internet on the GPU machine: keep transformers / huggingface_hub from trying
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false

T0=$(date +%s)
REPO=$(pwd)
PEER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK=${WORK:-/tmp/dsv4}
OUT=${OUT:-$WORK/out}
RATIOS=${RATIOS:-4,128}
HASH_LAYERS=${HASH_LAYERS:-0}
PHASE=${PHASE:-all}
DEADLINE_S=${DEADLINE_S:-570}
REPS=${REPS:-3}
HF=${HF:-1}
HF_PROMPT=${HF_PROMPT:-512}
HF_DECODE=${HF_DECODE:-32}
KEEP_SRC=${KEEP_SRC:-0}
LB_EXTRA=${LB_EXTRA:-}
BB_NPL=${BB_NPL:-1,8,32}
BB_NPP=${BB_NPP:-512,4096}
BB_NTG=${BB_NTG:-128}
PY=${PYTHON:-python3}
CUDA_ARCH=${CUDA_ARCH:-90-real}
GEN_DEVICE=${GEN_DEVICE:-cuda}   # device for the random generator (smoke tests: cpu)
GEN_EXTRA=${GEN_EXTRA:-}         # extra dsv4_make_ckpt.py args (smoke tests: small dims)
LB_PP=${LB_PP:-512,4096}
LB_UB=${LB_UB:-512,2048}
LB_TG=${LB_TG:-128}
LB_DEPTH=${LB_DEPTH:-0,4096}
LLAMA_SRC=${LLAMA_SRC:-}
AFTER_GEN_CMD=${AFTER_GEN_CMD:-}
FINAL_CMD=${FINAL_CMD:-}

NCPU=$(nproc)
JOBS=${JOBS:-$(( NCPU > 2 ? NCPU - 1 : NCPU ))}
if command -v taskset >/dev/null 2>&1 && [ "$NCPU" -ge 4 ]; then
    PIN_PY="taskset -c 0"
    PIN_CONV="taskset -c 1"
    PIN_BUILD="taskset -c 2-$((NCPU - 1))"
    JOBS=$(( NCPU - 2 ))
else
    PIN_PY=""
    PIN_CONV=""
    PIN_BUILD=""
fi

LLAMA="$WORK/llama.cpp"
BUILD="$LLAMA/build"
BIN="$BUILD/bin"
N_LAYERS=$(echo "$RATIOS" | tr ',' '\n' | grep -c .)
TAG="L${N_LAYERS}-r${RATIOS//,/-}-h${HASH_LAYERS}"
SRC="$WORK/src-$TAG"
GGUF="$WORK/dsv4-flash-$TAG.gguf"
CFG_DIR="$WORK/cfg-$TAG"              # config.json kept for the transformers run
RES="$WORK/results"
LOGD="$WORK/logs"
mkdir -p "$WORK" "$OUT" "$RES" "$LOGD"
if [ "$PHASE" != "bench" ]; then
    rm -f "$RES"/llama-bench-*.jsonl "$RES/batched.jsonl" "$RES/phases.tsv" "$RES/hf.json"
    # build.log / prep.log are kept when their products are reused (cached), truncated otherwise
    rm -f "$LOGD/run.log" "$LOGD/llama-bench.log" "$LOGD/batched-bench.log" "$LOGD/hf.log"
else
    rm -f "$LOGD/llama-bench.log" "$LOGD/batched-bench.log"
    echo "=============== PHASE=bench (same warm machine as the prep call) ===============" >> "$LOGD/run.log"
fi

el()   { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE_S - $(date +%s) + T0 )); }
log()  { echo "[$(date +%H:%M:%S) +$(el)s] $*" | tee -a "$LOGD/run.log"; }
phase_done() { # name start status
    local now name="$1"; now=$(el)
    [ "$PHASE" = "bench" ] && name="(bench call) $1"
    printf '%s\t%s\t%s\t%s\n' "$name" "$2" "$(( now - $2 ))" "$3" >> "$RES/phases.tsv"
    log "phase $1: $3 ($(( now - $2 )) s)"
}
FLOCK=""; command -v flock >/dev/null 2>&1 && FLOCK="flock $WORK/results/meta.lock"
meta_set() { # key value(json); serialized: the build lane and the model lane both write
    $FLOCK "$PY" - "$RES/meta.json" "$1" "$2" <<'EOF'
import json, os, sys
p, k, v = sys.argv[1], sys.argv[2], sys.argv[3]
m = json.load(open(p)) if os.path.exists(p) else {}
try:
    m[k] = json.loads(v)
except Exception:
    m[k] = v
json.dump(m, open(p, "w"), indent=1)
EOF
}
publish() {
    for f in run.log build.log prep.log llama-bench.log batched-bench.log hf.log after_gen.log final.log; do
        [ -f "$LOGD/$f" ] && cp -f "$LOGD/$f" "$OUT/$f"
    done
    "$PY" "$PEER/dsv4_summarize.py" "$WORK" "$OUT" > /dev/null 2>> "$LOGD/run.log" || true
}
trap publish EXIT

# ---------------------------------------------------------------- environment
init_meta() {
    if [ ! -f "$RES/meta.json" ] || [ "$PHASE" != "bench" ]; then echo '{}' > "$RES/meta.json"; fi
    meta_set ratios "\"$RATIOS\""
    meta_set n_layers "$N_LAYERS"
    meta_set hash_layers "$HASH_LAYERS"
    meta_set cuda_arch "\"$CUDA_ARCH\""
    meta_set cfg_path "\"$CFG_DIR/config.json\""
}
env_dump() {
    {
        echo "--- nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2>&1
        echo "--- nvcc"; nvcc --version 2>&1 | tail -2
        echo "--- cmake / ninja / g++"; cmake --version 2>&1 | head -1; ninja --version 2>&1; g++ --version 2>&1 | head -1
        echo "--- cpu"; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz" | head -4
        echo "--- python"; $PIN_PY "$PY" -c "import sys, torch, transformers, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'numpy', numpy.__version__)" 2>&1 | tail -1
        echo "--- disk"; df -h "$WORK" 2>&1 | tail -1
        echo "--- mem"; free -g 2>&1 | head -2
    } >> "$LOGD/run.log" 2>&1
    meta_set gpu "\"$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)\""
    meta_set driver "\"$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)\""
    meta_set nvcc "\"$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)\""
}

TOK_DIR=""
for d in ${TOKENIZER_DIR:-} "$REPO/shared/tokenizers/deepseek-v3" "$REPO/../shared/tokenizers/deepseek-v3" "$PEER/tokenizer"; do
    if [ -f "$d/tokenizer.json" ] && [ -f "$d/tokenizer_config.json" ]; then TOK_DIR="$d"; break; fi
done

# ---------------------------------------------------------------- 1. clone + build (background)
build_ok() { [ -x "$BIN/llama-bench" ] && [ -x "$BIN/llama-batched-bench" ]; }
do_clone() {
    local t; t=$(el)
    if [ ! -f "$LLAMA/convert_hf_to_gguf.py" ]; then
        rm -rf "$LLAMA"
        if [ -n "$LLAMA_SRC" ]; then
            mkdir -p "$WORK" && tar -C "$WORK" -xJf "$LLAMA_SRC" >> "$LOGD/build.log" 2>&1 || { phase_done unpack "$t" FAIL; return 1; }
        else
            git clone -q "${LLAMA_BUNDLE:-$PEER/llama.cpp.bundle}" "$LLAMA" >> "$LOGD/build.log" 2>&1 || { phase_done clone "$t" FAIL; return 1; }
        fi
    fi
    if [ -f "$LLAMA/COMMIT" ]; then
        meta_set llama_commit "\"$(cat "$LLAMA/COMMIT") (trimmed source)\""
    else
        meta_set llama_commit "\"$(git -C "$LLAMA" rev-parse --short HEAD)\""
    fi
    phase_done clone "$t" ok
}
do_build() {
    if build_ok; then phase_done build "$(el)" cached; return 0; fi
    local t; t=$(el)
    : > "$LOGD/build.log"
    local budget=$(( $(left) - 100 ))
    [ "$PHASE" = "prep" ] && budget=$(( $(left) - 10 ))
    [ "$budget" -lt 60 ] && budget=60
    {
        echo "=== cmake configure $(date +%T)"
        cmake -S "$LLAMA" -B "$BUILD" -G Ninja \
            -DCMAKE_BUILD_TYPE=Release \
            -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
            -DGGML_NATIVE=ON -DGGML_CCACHE=OFF -DGGML_CUDA_NCCL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
            -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF \
            -DLLAMA_USE_PREBUILT_UI=OFF
        echo "=== build $(date +%T) jobs=$JOBS budget=${budget}s"
        timeout "$budget" $PIN_BUILD cmake --build "$BUILD" --target llama-bench llama-batched-bench -j "$JOBS"
        echo "=== build exit $? $(date +%T)"
        if [ -f "$BUILD/.ninja_log" ]; then
            echo "=== slowest compile steps (s): "
            awk 'NR>1 {printf "%7.1f %s\n", ($2-$1)/1000, $4}' "$BUILD/.ninja_log" | sort -rn | head -15
            awk 'NR>1 {s+=($2-$1)/1000} END {printf "=== total compile CPU-time %.0f s over %d steps\n", s, NR-1}' "$BUILD/.ninja_log"
        fi
    } >> "$LOGD/build.log" 2>&1
    if build_ok; then
        meta_set build_s "$(( $(el) - t ))"
        phase_done build "$t" ok
    else
        phase_done build "$t" "FAIL/timeout (see build.log)"
        return 1
    fi
}

# ---------------------------------------------------------------- 2. model: generate + convert
do_model() {
    if [ -s "$GGUF" ] && [ -f "$GGUF.ok" ]; then
        while IFS=$'\t' read -r k v; do [ -n "$k" ] && meta_set "$k" "$v"; done < "$GGUF.ok"
        phase_done gen+convert "$(el)" "cached ($GGUF)"
        return 0
    fi
    local t; t=$(el)
    : > "$LOGD/prep.log"
    rm -rf "$SRC" "$GGUF" "$GGUF.tmp" "$GGUF.ok"
    log "disk before gen: $(df -h "$WORK" | tail -1 | awk '{print $4" free"}')"
    $PIN_PY "$PY" "$PEER/dsv4_make_ckpt.py" --out "$SRC" --ratios "$RATIOS" --hash-layers "$HASH_LAYERS" \
        --tokenizer-dir "$TOK_DIR" --device "$GEN_DEVICE" $GEN_EXTRA >> "$LOGD/prep.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then phase_done gen "$t" "FAIL rc=$rc (see prep.log)"; return 1; fi
    meta_set src_gib "$(du -sb "$SRC" | awk '{printf "%.2f", $1/2^30}')"
    phase_done gen "$t" ok
    mkdir -p "$CFG_DIR"; cp -f "$SRC/config.json" "$CFG_DIR/config.json"

    t=$(el)
    local conv_pin="$PIN_PY"
    [ -n "$AFTER_GEN_CMD" ] && conv_pin="$PIN_CONV"
    (
        echo "=== convert (lazy) $(date +%T)" >> "$LOGD/prep.log"
        $conv_pin "$PY" "$PEER/dsv4_convert.py" "$LLAMA" "$SRC" "$GGUF.tmp" --outtype bf16 >> "$LOGD/prep.log" 2>&1
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "=== convert failed rc=$rc, retrying with --no-lazy $(date +%T)" >> "$LOGD/prep.log"
            rm -f "$GGUF.tmp"
            $conv_pin "$PY" "$PEER/dsv4_convert.py" "$LLAMA" "$SRC" "$GGUF.tmp" --outtype bf16 --no-lazy >> "$LOGD/prep.log" 2>&1
            rc=$?
        fi
        exit $rc
    ) &
    local conv_pid=$!
    if [ -n "$AFTER_GEN_CMD" ]; then
        local ta; ta=$(el)
        log "after-gen command (core 0, GPU) while the conversion runs on core 1"
        SRC="$SRC" $PIN_PY bash -c "$AFTER_GEN_CMD" >> "$LOGD/after_gen.log" 2>&1
        phase_done after-gen "$ta" "rc=$?"
    fi
    wait "$conv_pid"; rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$GGUF.tmp" ]; then phase_done convert "$t" "FAIL rc=$rc (see prep.log)"; return 1; fi
    mv -f "$GGUF.tmp" "$GGUF"
    local k_src k_gguf k_vocab k_types k_disk
    k_src="$(du -sb "$SRC" | awk '{printf "%.2f", $1/2^30}')"
    k_gguf="$(stat -c %s "$GGUF" | awk '{printf "%.2f", $1/2^30}')"
    k_vocab="\"$(grep -o 'VOCAB_PATH=.*' "$LOGD/prep.log" | tail -1 | cut -c12- | tr -d '"\\')\""
    k_types="\"$(grep -o -- '--> [A-Z0-9_]*' "$LOGD/prep.log" | sort | uniq -c | awk '{printf "%s%s x%s", (NR>1?", ":""), $3, $1}') + MXFP4 experts\""
    k_disk="\"peak ~$(du -sb "$SRC" "$GGUF" | awk '{s+=$1} END {printf "%.1f", s/2^30}') GiB (src+gguf) + build; $(df -h "$WORK" | tail -1 | awk '{print $4}') free after convert\""
    printf 'src_gib\t%s\ngguf_gib\t%s\nvocab_path\t%s\ngguf_types\t%s\ndisk\t%s\n' \
        "$k_src" "$k_gguf" "$k_vocab" "$k_types" "$k_disk" > "$GGUF.ok"
    while IFS=$'\t' read -r k v; do [ -n "$k" ] && meta_set "$k" "$v"; done < "$GGUF.ok"
    phase_done convert "$t" ok
    log "disk after convert: $(df -h "$WORK" | tail -1 | awk '{print $4" free"}'), GGUF $(du -h "$GGUF" | cut -f1), src $(du -sh "$SRC" | cut -f1)"
    if [ "$KEEP_SRC" != "1" ]; then rm -rf "$SRC"; log "deleted $SRC"; fi
}

# ---------------------------------------------------------------- transformers timing
do_hf() { # when
    [ "$HF" = "1" ] || return 0
    if [ -f "$RES/hf.json" ] && grep -q '"ok": true' "$RES/hf.json" && [ "$PHASE" = "bench" ]; then return 0; fi
    local t; t=$(el)
    local budget=$(( $(left) - 5 )); [ "$budget" -gt 240 ] && budget=240
    if [ "$budget" -lt 60 ]; then phase_done hf "$t" "skipped (no time)"; return 0; fi
    meta_set hf_when "\"$1\""
    timeout "$budget" $PIN_PY "$PY" "$PEER/dsv4_hf_decode.py" --model-dir "$CFG_DIR" --json "$RES/hf.json" \
        --prompt "$HF_PROMPT" --decode "$HF_DECODE" >> "$LOGD/hf.log" 2>&1
    local rc=$?
    phase_done hf "$t" "$([ $rc -eq 0 ] && echo ok || echo "FAIL rc=$rc (see hf.log)")"
    publish
}

# ---------------------------------------------------------------- 3./4. llama.cpp benchmarks
run_capped() { # max_s cmd...  (caps by remaining time)
    local max=$1; shift
    local budget=$(( $(left) - 5 ))
    [ "$budget" -gt "$max" ] && budget=$max
    if [ "$budget" -lt 20 ]; then echo "skipped: no time left" ; return 124; fi
    timeout "$budget" "$@"
}
do_llama_bench() {
    local t; t=$(el)
    local LB=("$BIN/llama-bench" -m "$GGUF" -ngl 999 -r "$REPS" -o jsonl)
    {
        echo "=== pp $(date +%T)"
        run_capped 150 "${LB[@]}" -p "$LB_PP" -n 0 -ub "$LB_UB" $LB_EXTRA > "$RES/llama-bench-1pp.jsonl"
        echo "=== rc $? $(date +%T)"; cat "$RES/llama-bench-1pp.jsonl"
        echo "=== tg $(date +%T)"
        run_capped 150 "${LB[@]}" -p 0 -n "$LB_TG" -d "$LB_DEPTH" $LB_EXTRA > "$RES/llama-bench-2tg.jsonl"
        echo "=== rc $? $(date +%T)"; cat "$RES/llama-bench-2tg.jsonl"
    } >> "$LOGD/llama-bench.log" 2>&1
    phase_done llama-bench "$t" "$(grep -c avg_ts "$RES"/llama-bench-*.jsonl 2>/dev/null | awk -F: '{s+=$2} END {print s+0}') results"
    publish
}
do_batched() {
    local t; t=$(el)
    # n_ctx must hold every sequence: max(npl) * (max(npp) + ntg), split evenly across sequences
    local maxpl maxpp ctx
    maxpl=$(echo "$BB_NPL" | tr ',' '\n' | sort -n | tail -1)
    maxpp=$(echo "$BB_NPP" | tr ',' '\n' | sort -n | tail -1)
    ctx=$(( maxpl * (maxpp + BB_NTG + 128) ))
    {
        echo "=== batched-bench ctx=$ctx $(date +%T)"
        run_capped 200 "$BIN/llama-batched-bench" -m "$GGUF" -ngl 999 -c "$ctx" -b 2048 -ub 512 \
            -npp "$BB_NPP" -ntg "$BB_NTG" -npl "$BB_NPL" --output-format jsonl -v > "$RES/batched.jsonl"
        echo "=== rc $? $(date +%T)"; cat "$RES/batched.jsonl"
    } >> "$LOGD/batched-bench.log" 2>&1
    phase_done batched-bench "$t" "$(grep -c speed_tg "$RES/batched.jsonl" 2>/dev/null || echo 0) results"
    publish
}

# ---------------------------------------------------------------- main
log "start: PHASE=$PHASE RATIOS=$RATIOS HASH_LAYERS=$HASH_LAYERS WORK=$WORK OUT=$OUT NCPU=$NCPU JOBS=$JOBS"
[ -n "$TOK_DIR" ] || { log "ERROR: no tokenizer.json/tokenizer_config.json found"; exit 1; }
log "tokenizer: $TOK_DIR"
init_meta
HF_DONE=0
if [ "$PHASE" = "all" ] || [ "$PHASE" = "prep" ]; then
    do_clone || exit 1
    do_build &
    BUILD_PID=$!
    env_dump
    do_model; MODEL_RC=$?
    publish
    if [ $MODEL_RC -eq 0 ] && [ "$HF" = "1" ]; then
        if kill -0 "$BUILD_PID" 2>/dev/null || [ "$PHASE" = "prep" ]; then
            log "build still running (or PHASE=prep): transformers timing now, pinned to core 0"
            do_hf "during build (core 0; nvcc on cores 2-$((NCPU-1)))"; HF_DONE=1
        fi
    fi
    wait "$BUILD_PID"; BUILD_RC=$?
    publish
    if [ $BUILD_RC -ne 0 ] || [ $MODEL_RC -ne 0 ]; then
        log "prep failed (build rc=$BUILD_RC, model rc=$MODEL_RC) — see build.log / prep.log"
        exit 1
    fi
fi
if [ "$PHASE" = "prep" ]; then log "prep done"; exit 0; fi
[ "$PHASE" = "bench" ] && env_dump

if ! build_ok || [ ! -s "$GGUF" ]; then
    log "ERROR: binaries or GGUF missing in $WORK (PHASE=bench needs a prep on this same warm machine)"
    exit 1
fi
do_llama_bench
do_batched
if [ "$HF_DONE" = "0" ] && [ "$HF" = "1" ]; then
    do_hf "after the llama.cpp runs (idle machine)"
fi
if [ -n "$FINAL_CMD" ]; then
    t=$(el)
    DEADLINE_LEFT=$(left) bash -c "$FINAL_CMD" >> "$LOGD/final.log" 2>&1
    phase_done final "$t" "rc=$?"
fi
log "done in $(el) s"
publish
cat "$OUT/summary.md" 2>/dev/null
exit 0
