#!/usr/bin/env bash
# Runs each libFuzzer target for a short time (FUZZ_SECONDS, default 20) on its committed corpus
# (fuzz/corpus/<name>/ or fuzz/corpus/<name>.tar.xz), nproc targets at a time. The targets live in
# the ASan test build (scripts/sanitize_common.sh; build-asan, or FUZZ_SMOKE_BUILD_DIR), built here
# if needed. Any crash
# fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz_common.sh
source scripts/sanitize_common.sh
seconds=${FUZZ_SECONDS:-20}
dir=${FUZZ_SMOKE_BUILD_DIR:-build-asan}
fuzz_list
configure_sanitizer_build asan "$dir"
cmake --build "$dir" -j "$(nproc)" --target "${fuzz_targets[@]}"
run_one() {
  local t=$1 seeds
  mkdir -p "$dir/fuzz-smoke/corpus-$t"
  local args=("$dir/fuzz-smoke/corpus-$t")
  if seeds=$(committed_corpus fuzz/corpus "${t#fuzz_}" "$dir/fuzz-smoke/seeds-$t"); then args+=("$seeds"); fi
  "$dir/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=0 "${args[@]}" \
    > "$dir/fuzz-smoke/$t.log" 2>&1
}
mkdir -p "$dir/fuzz-smoke"
pids=() names=() failed=()
wait_one() {  # waits for the oldest running target
  if ! wait "${pids[0]}"; then failed+=("${names[0]}"); fi
  pids=("${pids[@]:1}") names=("${names[@]:1}")
}
for t in "${fuzz_targets[@]}"; do
  ((${#pids[@]} < $(nproc))) || wait_one
  echo "fuzzing $t for ${seconds}s"
  run_one "$t" &
  pids+=($!) names+=("$t")
done
while ((${#pids[@]})); do wait_one; done
for t in "${failed[@]}"; do tail -40 "$dir/fuzz-smoke/$t.log"; echo "fuzz target $t crashed"; done
((${#failed[@]} == 0)) || exit 1
echo "fuzz: ${#fuzz_targets[@]} targets ran without a crash"
