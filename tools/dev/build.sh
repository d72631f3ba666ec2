#!/usr/bin/env bash
# Configures (once) and builds einstage incrementally in build/ (Release). Extra arguments name targets.
# Usage: tools/dev/build.sh [target ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${EINSTAGE_BUILD_DIR:-$root/build}"
"$root/tools/dev/deps.sh" ${EINSTAGE_DEPS_FLAGS:-}
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}" >&2
