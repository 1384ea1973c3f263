#!/usr/bin/env bash
# The README's second command: build (if needed) and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tools/deepinfer ] || { scripts/install_deps.sh && scripts/build.sh; }
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Short fuzzing runs of the parsers (libFuzzer, clang); each must finish without a crash. Not
# optional: a missing script or toolchain fails the run instead of skipping it.
scripts/fuzz_smoke.sh
