#!/usr/bin/env bash
# Merges a corpus found elsewhere (a campaign run on another machine with FUZZ_NO_MERGE=1, see
# scripts/fuzz_stage.sh) into the committed one, minimised, as scripts/fuzz_campaign.sh does:
#   scripts/fuzz_merge.sh NAME FOLDER...     # e.g. scripts/fuzz_merge.sh regex /tmp/camp/regex/corpus
# Uses the campaign's build (FUZZ_BUILD_DIR, default build-fuzz-campaign; built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/fuzz_merge.sh NAME FOLDER..." >&2; exit 2; }
name=$1
shift
source scripts/fuzz_common.sh
build=${FUZZ_BUILD_DIR:-build-fuzz-campaign}
corpora=${FUZZ_CORPUS_ROOT:-fuzz/corpus}
[ -f "fuzz/${name}_fuzz.cpp" ] || { echo "fuzz_merge: no target fuzz/${name}_fuzz.cpp" >&2; exit 2; }
[ -x "$build/fuzz/fuzz_$name" ] || fuzz_build "$build"
for d in "$@"; do [ -d "$d" ] || { echo "fuzz_merge: no folder $d" >&2; exit 2; }; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
committed=""
committed=$(committed_corpus "$corpora" "$name" "$work/seeds") || committed=""
merge_corpus "$build/fuzz/fuzz_$name" "$corpora" "$name" "$work" "$committed" "$@"
