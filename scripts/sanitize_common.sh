# Sourced by scripts/sanitize.sh and scripts/fuzz_smoke.sh (not run on its own).
#
#   configure_sanitizer_build asan|tsan DIR
#
# Configures DIR as a clang build of the CPU code under the sanitizer: asan = AddressSanitizer +
# UndefinedBehaviorSanitizer (+ LeakSanitizer) with the libFuzzer targets built in the same tree
# (their libraries coverage-instrumented: fuzz/CMakeLists.txt), so CI compiles the libraries once
# for the ASan test suite and the short fuzz runs; tsan = ThreadSanitizer.
# -O1 -g and no NDEBUG: asserts stay on, inlining keeps stacks readable, and the model tests stay
# fast enough. Test and CLI code (tests/, tools/) is compiled at -O0 (DEEPINFER_TEST_CODE_FLAGS):
# it is not hot, and -O0 halves its ASan compile time. No CUDA, no benchmarks, no Python module.
configure_sanitizer_build() {
  local mode=$1 dir=$2 flags fuzz tool
  for tool in clang clang++; do
    command -v "$tool" > /dev/null || { echo "sanitize: $tool not found (run scripts/install_deps.sh)" >&2; return 1; }
  done
  if [ "$mode" = asan ]; then
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    fuzz=ON
  else
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    fuzz=OFF
  fi
  # CMAKE_BUILD_TYPE is a custom name so no Release/Debug flags are added.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    "-DCMAKE_C_FLAGS_SANITIZE=-O1 -g" "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -g" \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags" \
    -DDEEPINFER_CUDA=OFF -DDEEPINFER_BUILD_TESTS=ON -DDEEPINFER_BUILD_BENCH=OFF \
    -DDEEPINFER_BUILD_PYTHON=OFF -DDEEPINFER_FUZZ=$fuzz -DDEEPINFER_LOAD_TEST_REQUESTS=200 \
    -DDEEPINFER_TEST_CODE_FLAGS=-O0 > /dev/null
}
