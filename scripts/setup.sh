#!/usr/bin/env bash
# The README's first command: install dependencies, build, and generate text with the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
./build/tools/deepinfer generate --model models/kjv-tiny-v4 \
  --prompt "Psalms 23:1 The LORD is my shepherd; I" --max-tokens 48 --temperature 0
