#!/usr/bin/env bash
# Installs the Debian packages einstage needs to build and test, skipping the apt work when all are present.
# Usage: tools/dev/deps.sh [--bench]   (--bench adds the peers the benchmarks compare against)
set -euo pipefail
# python3-numpy: the guide's command-line example (docs/examples/06_cli.sh) checks .npy interchange with NumPy.
pkgs=(build-essential cmake ninja-build llvm-19-dev libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev libzstd-dev python3
      python3-numpy)
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=(libopenblas-dev python3-torch)
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "einstage: installing ${missing[*]}" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
