#!/usr/bin/env bash
# The README's second command: build (if needed) and run every test: the ctest suite, short
# fuzzing runs of the parsers, the suite again under ASan + UBSan, and the concurrency tests under
# ThreadSanitizer (docs/hardening.md has what each runs and costs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tools/deepinfer ] || { scripts/install_deps.sh && scripts/build.sh; }
cmake --build build -j "$(nproc)"
step() { echo "=== $1 ($(date +%T))"; }
step "ctest"
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Not optional: a missing script or toolchain fails the run instead of skipping it. The ASan
# build also holds the libFuzzer targets that the short fuzz runs use.
step "ASan + UBSan"
scripts/sanitize.sh asan
step "fuzz smoke"
scripts/fuzz_smoke.sh
step "ThreadSanitizer"
scripts/sanitize.sh tsan
step "all tests passed"
