#!/usr/bin/env bash
# Packs the campaign's fuzz binaries (built here as scripts/fuzz_campaign.sh builds them) with the
# shared libraries they need beyond glibc / libstdc++, so a campaign can run on a machine with more
# cores and no clang (e.g. the GPU machine's 16 cores):
#   scripts/fuzz_stage.sh                        # -> .fuzz-stage/stage.tar.xz (ignored by git)
#   # there, from the repository root:
#   (cd .fuzz-stage && tar -xJf stage.tar.xz) && LD_LIBRARY_PATH=$PWD/.fuzz-stage/lib \
#     FUZZ_PREBUILT=1 FUZZ_BUILD_DIR=.fuzz-stage FUZZ_NO_MERGE=1 FUZZ_TARGETS="regex" scripts/fuzz_campaign.sh 1
# then bring the corpus back and merge it here (scripts/fuzz_merge.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz_common.sh
build=${FUZZ_BUILD_DIR:-build-fuzz-campaign}
fuzz_build "$build"
rm -rf .fuzz-stage && mkdir -p .fuzz-stage/fuzz .fuzz-stage/lib
cp "${fuzz_targets[@]/#/$build/fuzz/}" .fuzz-stage/fuzz/
for lib in $(ldd "$build"/fuzz/fuzz_* | awk '/=> \// { print $3 }' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" .fuzz-stage/lib/ ;;
  esac
done
(cd .fuzz-stage && tar -cJf stage.tar.xz fuzz lib && rm -rf fuzz lib)
echo "staged in .fuzz-stage/stage.tar.xz ($(du -h .fuzz-stage/stage.tar.xz | cut -f1))"
