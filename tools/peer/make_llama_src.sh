#!/usr/bin/env bash
# Makes the trimmed llama.cpp source archive the GPU benchmark builds (a device call carries at
# most 64 MiB, the full bundle is 35 MB): only what the CUDA build of llama-bench /
# llama-batched-bench and the GGUF converter need. Writes .peer/llama-src.tar.xz (ignored: add
# /.peer/ to .git/info/exclude). Never commit it or anything built from it.
#   tools/peer/make_llama_src.sh [BUNDLE]   (default: npm pack node-llama-cpp@3.22.1 into /tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
work=${TMPDIR:-/tmp}/deepinfer-llama-src
bundle=${1:-}
if [ -z "$bundle" ]; then
  mkdir -p "$work/npm"
  if [ ! -f "$work/npm/package/llama/gitRelease.bundle" ]; then
    (cd "$work/npm" && npm pack node-llama-cpp@3.22.1 > /dev/null && tar xzf node-llama-cpp-3.22.1.tgz)
  fi
  bundle="$work/npm/package/llama/gitRelease.bundle"
fi
rm -rf "$work/llama.cpp" "$work/trim"
git clone -q "$bundle" "$work/llama.cpp" 2>/dev/null
src="$work/llama.cpp"
dst="$work/trim/llama.cpp"
mkdir -p "$dst"
commit=$(git -C "$src" rev-parse --short HEAD)
# The build: top-level CMake, ggml (CPU + CUDA backends only), llama, common, vendor, two tools.
keep=(CMakeLists.txt cmake include src common vendor LICENSE licenses
      ggml/CMakeLists.txt ggml/cmake ggml/include
      tools/batched-bench tools/llama-bench
      convert_hf_to_gguf.py conversion gguf-py requirements requirements.txt pyproject.toml
      models/templates/deepseek-ai-DeepSeek-V4.jinja models/templates/deepseek-ai-DeepSeek-V4-Flash-0731.jinja)
for p in "${keep[@]}"; do
  mkdir -p "$dst/$(dirname "$p")"
  cp -a "$src/$p" "$dst/$p"
done
mkdir -p "$dst/ggml/src"
find "$src/ggml/src" -maxdepth 1 -type f -exec cp -a {} "$dst/ggml/src/" \;
cp -a "$src/ggml/src/ggml-cpu" "$src/ggml/src/ggml-cuda" "$dst/ggml/src/"
rm -rf "$dst/vendor/miniaudio"/* && echo '# trimmed: mtmd only' > "$dst/vendor/miniaudio/CMakeLists.txt"
# Only the two benchmark tools are configured.
cat > "$dst/tools/CMakeLists.txt" <<'CM'
# trimmed by deepinfer tools/peer/make_llama_src.sh: the two benchmark tools only
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(batched-bench)
add_subdirectory(llama-bench)
CM
echo "$commit" > "$dst/COMMIT"
mkdir -p "$repo/.peer"
grep -qx '/.peer/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.peer/' >> "$repo/.git/info/exclude"
tar -C "$work/trim" -cJf "$repo/.peer/llama-src.tar.xz" llama.cpp
ls -la "$repo/.peer/llama-src.tar.xz"
