# Sourced by scripts/fuzz_smoke.sh and scripts/fuzz_campaign.sh (not run on its own).
#
#   fuzz_list        sets the array fuzz_targets (fuzz_<name> for each fuzz/<name>_fuzz.cpp); a
#                    missing target is an error, never a silent pass
#   fuzz_build DIR   the campaign's build: checks the toolchain, configures DIR with clang at -O2
#                    (address + undefined sanitizers; the libraries under test carry coverage
#                    instrumentation too, so the fuzzer is guided inside them) and builds every
#                    target. The short CI runs use the ASan test build instead (scripts/fuzz_smoke.sh).
#   committed_corpus ROOT NAME DEST
#                    prints the folder holding target NAME's committed inputs: ROOT/NAME, or
#                    ROOT/NAME.tar.xz unpacked into DEST (the packed form of a large corpus: 15 MB of
#                    inputs are 0.2 MB of xz, and the tree travels to the GPU machine whole); fails
#                    when there are none
#   pack_corpus SRC ROOT NAME
#                    writes the inputs in SRC as ROOT/NAME.tar.xz (sorted, fixed times and owners:
#                    the same inputs give the same bytes) and removes a folder ROOT/NAME
#   merge_corpus BIN ROOT NAME WORK COMMITTED NEW...
#                    minimises the committed inputs (folder COMMITTED, may be "") and the folders NEW
#                    into one corpus with BIN -merge=1 (the smallest set with the same coverage;
#                    committed inputs that survive keep their names), packs it as ROOT/NAME.tar.xz
#                    and prints "before -> after" counts. WORK is a scratch folder (merged/, merge.log).
# Build parallelism: FUZZ_BUILD_JOBS (default nproc).
committed_corpus() {
  local root=$1 name=$2 dest=$3
  if [ -d "$root/$name" ]; then
    echo "$root/$name"
  elif [ -f "$root/$name.tar.xz" ]; then
    rm -rf "$dest" && mkdir -p "$dest"
    tar -xJf "$root/$name.tar.xz" -C "$dest" --strip-components=1
    echo "$dest"
  else
    return 1
  fi
}

pack_corpus() {
  local src=$1 root=$2 name=$3 stage
  stage=$(mktemp -d)
  mkdir -p "$stage/$name"
  cp "$src"/* "$stage/$name"/ 2> /dev/null || true
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - "$name" | xz -9 -T1 > "$root/$name.tar.xz"
  rm -rf "$stage" "${root:?}/$name"
}

merge_corpus() {
  local bin=$1 root=$2 name=$3 work=$4 committed=$5
  shift 5
  local merged="$work/merged" before=0 f sum
  rm -rf "$merged" && mkdir -p "$merged"
  local inputs=("$@")
  [ -n "$committed" ] && inputs=("$committed" "${inputs[@]}")
  "$bin" -merge=1 -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -timeout=25 "$merged" "${inputs[@]}" > "$work/merge.log" 2>&1 ||
    { tail -20 "$work/merge.log" >&2; echo "fuzz: merge of $name failed" >&2; return 1; }
  if [ -n "$committed" ]; then
    # libFuzzer names merged inputs by the SHA-1 of their contents; seeds from an earlier merge
    # already carry it as their name.
    for f in "$committed"/*; do
      [ -f "$f" ] || continue
      sum=$(sha1sum "$f" | cut -d' ' -f1)
      if [ -f "$merged/$sum" ] && [ "$sum" != "$(basename "$f")" ]; then mv "$merged/$sum" "$merged/$(basename "$f")"; fi
    done
    before=$(find "$committed" -type f | wc -l)
  fi
  pack_corpus "$merged" "$root" "$name"
  echo "  corpus $root/$name.tar.xz: $before -> $(find "$merged" -type f | wc -l) inputs"
}

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
