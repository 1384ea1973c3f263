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
