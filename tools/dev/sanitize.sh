#!/usr/bin/env bash
# CI's sanitizer step (tools/dev/test.sh runs it when CI=true): builds the `fuzz` preset (clang-19, ASan + UBSan,
# libFuzzer; no benchmark programs, no Python package) in build-fuzz/, runs every ctest suite there under both
# sanitizers with leak detection on (EINSTAGE_SANITIZER_SCALE shrinks the slowest suites' problem sizes, see
# tests/README.md), then a short smoke run of each fuzz target from its committed seed corpus. Any sanitizer report
# fails the step. The Python suite is the one left out: Debian's python3 cannot load an ASan-built extension module
# without preloading the sanitizer runtime; its C++ underneath is what the other suites run.
# Usage: tools/dev/sanitize.sh [seconds per fuzz target, default 20]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-20}"
"$root/tools/dev/deps.sh" --sanitize
cd "$root"
if [[ ! -f build-fuzz/build.ninja ]]; then
  cmake --preset fuzz >&2
fi
fuzzers=(subscripts grouped plan_spec npy ir_text json)
cmake --build build-fuzz -j "$(nproc)" >&2
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
(cd build-fuzz && ctest --output-on-failure -j "$(nproc)" -LE python)
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for f in "${fuzzers[@]}"; do
  mkdir -p "$scratch/$f"
  cp -r "tests/fuzz/corpus/$f/." "$scratch/$f/"
  echo "sanitize.sh: fuzz_$f for ${seconds} s" >&2
  build-fuzz/tests/fuzz/"fuzz_$f" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$scratch/$f-" "$scratch/$f" 2> "$scratch/$f.log" || {
    tail -n 40 "$scratch/$f.log" >&2
    echo "sanitize.sh: fuzz_$f failed; its crashing input is printed above (libFuzzer's 'Test unit written to')" >&2
    exit 1
  }
  grep -E '^Done|stat::number_of_executed_units' "$scratch/$f.log" >&2 || true
done
echo "sanitize.sh: every suite but python and ${#fuzzers[@]} fuzz smoke runs clean" >&2
