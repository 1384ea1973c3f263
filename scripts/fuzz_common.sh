# Sourced by scripts/fuzz_smoke.sh and scripts/fuzz_campaign.sh (not run on its own).
#
#   fuzz_list        sets the array fuzz_targets (fuzz_<name> for each fuzz/<name>_fuzz.cpp); a
#                    missing target is an error, never a silent pass
#   fuzz_build DIR   the campaign's build: checks the toolchain, configures DIR with clang at -O2
#                    (address + undefined sanitizers; the libraries under test carry coverage
#                    instrumentation too, so the fuzzer is guided inside them) and builds every
#                    target. The short CI runs use the ASan test build instead (scripts/fuzz_smoke.sh).
# Build parallelism: FUZZ_BUILD_JOBS (default nproc).
fuzz_list() {
  ls fuzz/*_fuzz.cpp > /dev/null 2>&1 || { echo "fuzz: no fuzz/*_fuzz.cpp targets found" >&2; return 1; }
  fuzz_targets=()
  local f
  for f in fuzz/*_fuzz.cpp; do fuzz_targets+=("fuzz_$(basename "$f" _fuzz.cpp)"); done
}

fuzz_build() {
  local dir=$1 tool
  fuzz_list
  for tool in clang clang++; do
    command -v "$tool" > /dev/null || { echo "fuzz: $tool not found (run scripts/install_deps.sh)" >&2; return 1; }
  done
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DDEEPINFER_FUZZ=ON -DDEEPINFER_BUILD_TESTS=OFF \
    -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined" > /dev/null
  cmake --build "$dir" -j "${FUZZ_BUILD_JOBS:-$(nproc)}" --target "${fuzz_targets[@]}"
}
