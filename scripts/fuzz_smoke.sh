#!/usr/bin/env bash
# Builds the libFuzzer targets (scripts/fuzz_common.sh: clang, address + undefined sanitizers,
# coverage-instrumented libraries) into build-fuzz and runs each one for a short time
# (FUZZ_SECONDS, default 20) on its committed corpus fuzz/corpus/<name>. Any crash fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz_common.sh
seconds=${FUZZ_SECONDS:-20}
fuzz_build build-fuzz
passed=0
for t in "${fuzz_targets[@]}"; do
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
