#!/usr/bin/env bash
# The ThreadSanitizer check of the threaded suites, one command: builds the `tsan` preset (clang-19, build-tsan/) and
# runs the runtime, jit, einsum, linalg and ad suites under ThreadSanitizer (their threaded cases run at 2 threads;
# EINSTAGE_NUM_THREADS=2 makes every default context two-threaded too). Any report fails. Not part of CI's run (a
# third full build does not fit its time); run it before landing changes to threads, the JIT or the specialiser.
# Usage: tools/dev/tsan.sh [ctest arguments, e.g. -R '^jit$']
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/tools/dev/deps.sh" --sanitize
cd "$root"
if [[ ! -f build-tsan/build.ninja ]]; then
  cmake --preset tsan >&2
fi
suites=(runtime jit einsum linalg ad)
targets=()
for s in "${suites[@]}"; do targets+=(--target "einstage_test_$s"); done
cmake --build build-tsan -j "$(nproc)" "${targets[@]}" --target einstage_linalg_module >&2
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tools/dev/tsan.supp}"
export EINSTAGE_NUM_THREADS="${EINSTAGE_NUM_THREADS:-2}"
pattern="^($(IFS='|'; echo "${suites[*]}"))\$"
(cd build-tsan && ctest --output-on-failure -R "$pattern" "$@")
echo "tsan.sh: suites ${suites[*]} clean under ThreadSanitizer" >&2
