#!/usr/bin/env bash
# Builds the CUDA configuration (sm_90a) into build-cuda and stages what the GPU machine needs into
# .gpu/ (ignored by git): the test binaries, the CLI and the shared libraries they link that the
# GPU machine's image lacks. Then run, on the GPU machine, from the repository root:
#   tools/gpu/test.sh            (the device tool: carry [".gpu"])
#   tools/gpu/bench.sh           (carry [".gpu", ".peer"]; `deepinfer bench` is in the CLI)
# STAGE=bench stages the CLI alone (a smaller carry when the tests are not needed); TARGETS="a b"
# builds and stages just those targets (test binaries or deepinfer).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_BUILD_PYTHON=OFF \
  -DDEEPINFER_BUILD_BENCH=OFF "$@" > /dev/null
if [ -n "${TARGETS:-}" ]; then
  # A subset, e.g. TARGETS="test_backend" (when another target does not build yet).
  # shellcheck disable=SC2086
  cmake --build build-cuda -j "$(nproc)" --target $TARGETS
  rm -rf .gpu && mkdir -p .gpu/lib
  for t in $TARGETS; do
    if [ "$t" = deepinfer ]; then cp build-cuda/tools/deepinfer .gpu/; else cp "build-cuda/tests/$t" .gpu/; fi
  done
elif [ "${STAGE:-all}" = bench ]; then
  cmake --build build-cuda -j "$(nproc)" --target deepinfer
  rm -rf .gpu && mkdir -p .gpu/lib
  cp build-cuda/tools/deepinfer .gpu/
else
  cmake --build build-cuda -j "$(nproc)" --target test_backend test_model test_engine test_dist test_dist_nccl deepinfer
  rm -rf .gpu && mkdir -p .gpu/lib
  cp build-cuda/tests/test_backend build-cuda/tests/test_model build-cuda/tests/test_engine build-cuda/tests/test_dist \
    build-cuda/tests/test_dist_nccl build-cuda/tools/deepinfer .gpu/
fi
# Stripped: unstripped test binaries (~44 MB) plus the tree exceed the device tool's 64 MiB.
strip --strip-unneeded .gpu/deepinfer .gpu/test_* 2>/dev/null || true
# Which source the binaries are (the benchmark table names it).
dirty=$(git status --porcelain -- src tools include CMakeLists.txt 2>/dev/null | head -1)
echo "$(git rev-parse --short HEAD)${dirty:+ + uncommitted changes}" > .gpu/COMMIT
for lib in $(ldd .gpu/* 2>/dev/null | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;  # the GPU image has its own
    libnccl.so*) ;;  # 218 MB, past the carry limit: tools/gpu/test.sh finds the GPU image's (PyTorch's)
    *) cp -L "$lib" .gpu/lib/ ;;
  esac
done
# Compressed, so the tree plus .gpu fit the device tool's 64 MiB (the CUDA binaries are ~50 MB
# stripped); tools/gpu/test.sh and bench.sh unpack it on the GPU machine.
# (CI only checks that the CUDA code builds: NO_STAGE_ARCHIVE=1 skips the packing.)
if [ -z "${NO_STAGE_ARCHIVE:-}" ] && command -v xz > /dev/null; then
  # xz -9: its 64 MB window spans the binaries, which share the same CUDA fatbin (28 -> 17 MB).
  tar -C .gpu -cf - . | nice xz -9 -T2 > .gpu-stage.tar.xz && rm -rf .gpu && mkdir .gpu && mv .gpu-stage.tar.xz .gpu/stage.tar.xz
  echo "staged in .gpu/stage.tar.xz ($(du -h .gpu/stage.tar.xz | cut -f1))"
else
  echo "staged in .gpu: $(ls .gpu | tr '\n' ' ')"
fi
# The device tool carries the working tree plus .gpu, at most 64 MiB: say so here, not there.
tree_bytes=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
stage_bytes=$(du -sb .gpu | cut -f1)
if [ $((tree_bytes + stage_bytes)) -gt $((64 * 1024 * 1024)) ]; then
  echo "warning: tree ($((tree_bytes / 1048576)) MiB) + .gpu ($((stage_bytes / 1048576)) MiB) exceed the device tool's 64 MiB;" \
    "the GPU scripts never read tests/data/tokenizer (5.7 MB): move it out of the tree for the device calls, and back after"
fi
