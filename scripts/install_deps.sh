#!/usr/bin/env bash
# Installs the Debian 12 packages deepinfer builds and tests with (skips what is already there).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libpcre2-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev python3-dev python3-setuptools python3-wheel libxxhash-dev libcpp-httplib-dev python3-prometheus-client libicu-dev
  python3-jinja2 clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs the server tests; Debian's nodejs/npm unless the machine has a node already.
command -v node > /dev/null || missing+=(nodejs)
command -v npm > /dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The server tests drive `deepinfer serve` with the official openai npm client (version pinned in
# tests/serve/package-lock.json).
if [ ! -d tests/serve/node_modules/openai ]; then
  npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error
fi
