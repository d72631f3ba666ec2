#!/usr/bin/env bash
# Installs the Debian packages einstage needs to build and test, skipping the apt work when all are present.
# Usage: tools/dev/deps.sh [--bench] [--sanitize]
#   --bench adds the peers the benchmarks compare against; --sanitize adds clang-19 and its sanitizer and libFuzzer
#   runtimes (tools/dev/sanitize.sh, the `fuzz` and `tsan` presets)
set -euo pipefail
# python3-numpy: the guide's command-line example (docs/examples/06_cli.sh) checks .npy interchange with NumPy.
# libopenmpi-dev, openmpi-bin: `einstage einsum --mpi` and its mpirun tests (optional in CMake; installed so CI runs them).
# liblapacke-dev, libopenblas0: LAPACK for the linalg extension (extensions/linalg/; liblapack.so.3 resolves to
# OpenBLAS's LAPACK when libopenblas0 is installed).
# libeigen3-dev: the matrix-free GMRES of the fixed-point adjoint (compiler/ad/FixedPoint.cpp, header-only, private);
# liblbfgspp-dev: L-BFGS (LBFGSpp, header-only on Eigen) for the variational iPEPS example (issue 37).
# pybind11-dev, python3-dev, python3-pytest: the Python package `einstage` (python/) and its pytest suite under ctest.
pkgs=(build-essential cmake ninja-build llvm-19-dev libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev libzstd-dev python3
      python3-numpy libopenmpi-dev openmpi-bin liblapacke-dev libopenblas0 libeigen3-dev liblbfgspp-dev
      pybind11-dev python3-dev python3-pytest)
for flag in "$@"; do
  case "$flag" in
    --bench) pkgs+=(libopenblas-dev python3-torch) ;;
    --sanitize) pkgs+=(clang-19 libclang-rt-19-dev) ;;
    *) echo "deps.sh: unknown flag '$flag'; expected --bench or --sanitize" >&2; exit 2 ;;
  esac
done
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
