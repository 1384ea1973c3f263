#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address + undefined sanitizers; the libraries under test
# carry coverage instrumentation too, so the fuzzer is guided inside them) into build-fuzz and runs
# each one for a short time (FUZZ_SECONDS, default 20). Any crash fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
# A missing fuzz target or toolchain is an error, never a silent pass.
ls fuzz/*_fuzz.cpp > /dev/null 2>&1 || { echo "fuzz_smoke: no fuzz/*_fuzz.cpp targets found" >&2; exit 1; }
for tool in clang clang++; do
  command -v "$tool" > /dev/null || { echo "fuzz_smoke: $tool not found (run scripts/install_deps.sh)" >&2; exit 1; }
done
seconds=${FUZZ_SECONDS:-20}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DDEEPINFER_FUZZ=ON -DDEEPINFER_BUILD_TESTS=OFF \
  -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF \
  "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined" > /dev/null
targets=()
for f in fuzz/*_fuzz.cpp; do n=$(basename "$f" _fuzz.cpp); targets+=("fuzz_$n"); done
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
passed=0
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/${t#fuzz_}"
  mkdir -p "build-fuzz/corpus-$t"
  args=("build-fuzz/corpus-$t")
  [ -d "$corpus" ] && args+=("$corpus")
  echo "fuzzing $t for ${seconds}s"
  build-fuzz/fuzz/$t -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=0 "${args[@]}" \
    > "build-fuzz/$t.log" 2>&1 || { tail -40 "build-fuzz/$t.log"; echo "fuzz target $t crashed"; exit 1; }
  passed=$((passed + 1))
done
echo "fuzz: ${passed} targets ran without a crash"
