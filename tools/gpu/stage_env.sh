# Sourced by the scripts that run on the GPU machine (test.sh, bench.sh, ncu_gemm.sh), from the
# repository root: unpacks what tools/gpu/build.sh staged in .gpu/ and puts its libraries on the
# loader path, with NCCL (not carried: 218 MB) from the image's PyTorch wheel (nvidia-nccl), since
# the CUDA build's binaries link it. Sets `root`.
if [ -f .gpu/stage.tar.xz ]; then (cd .gpu && tar -xJf stage.tar.xz); fi
root=$(pwd)
export LD_LIBRARY_PATH="$root/.gpu/lib:${LD_LIBRARY_PATH:-}"
nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
echo "NCCL from ${nccl_dir:-nowhere (binaries linking it will fail to start)}"
# cuBLASLt (opened at run time by DEEPINFER_CUBLAS_GEMM=1; 540 MB, not carried): the CUDA toolkit's,
# else PyTorch's wheel.
if [ -z "${DEEPINFER_CUBLASLT:-}" ]; then
  for c in /usr/local/cuda/lib64/libcublasLt.so.13 \
           $(python3 -c "import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], 'lib', 'libcublasLt.so.13'))" 2>/dev/null); do
    [ -f "$c" ] && { export DEEPINFER_CUBLASLT=$c; break; }
  done
fi
echo "cuBLASLt from ${DEEPINFER_CUBLASLT:-the loader path}"

# The 4-layer V4-Flash-shaped benchmark checkpoint (CSA, HCA, CSA, HCA; tools/peer/dsv4_make_ckpt.py)
# at $src, generated on first use; its log to $1/gen.log. Returns non-zero (after the log's tail) if
# generation fails.
src=/tmp/dsv4/src-ours
bench_checkpoint() {
  [ -f "$src/config.json" ] && return 0
  # Into a side folder, renamed when complete: a failed run must not leave a config.json behind
  # that the next call takes for a checkpoint.
  rm -rf "$src.partial"
  python3 tools/peer/dsv4_make_ckpt.py --out "$src.partial" --ratios 4,128,4,128 \
    --tokenizer-dir tests/data/tokenizers/deepseek-v3 > "$1/gen.log" 2>&1 || { tail "$1/gen.log"; return 1; }
  rm -rf "$src" && mv "$src.partial" "$src"
}

# The ncu scripts' common start (ncu_breakdown.sh, ncu_gemm.sh, ncu_source.sh): $out (OUT, else
# /tmp/deepinfer-ncu) made, the bench checkpoint at $src, $ncu the image's Nsight Compute CLI.
# Returns non-zero (after a line saying why) where one is missing.
ncu_setup() {
  out=${OUT:-/tmp/deepinfer-ncu}
  mkdir -p "$out"
  bench_checkpoint "$out" || return 1
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "no ncu on this machine"; return 1; }
}
