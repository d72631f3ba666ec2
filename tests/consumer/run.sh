#!/usr/bin/env bash
# Installs an einstage build into a scratch prefix, then configures, builds and runs tests/consumer/ against it.
# Usage: tests/consumer/run.sh <einstage build dir> <scratch dir> [cmake command] [generator] [extra compile+link flags]
# (registered with ctest as the test "install"; the extra flags carry -fsanitize=... in a sanitizer build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
work="$2"
cmake="${3:-cmake}"
generator="${4:-Ninja}"
flags="${5:-}"

rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"

# What a consumer needs is installed: headers, a library per layer, the package config, the command line.
installed=(include/einstage/ir/Tensor.h include/einstage/ir/Npy.h include/einstage/ir/Error.h)
if [[ -e "$build/tools/einstage" ]]; then installed+=(bin/einstage); fi
for f in "${installed[@]}"; do
  [[ -e "$work/prefix/$f" ]] || { echo "install: $f is missing from the installed tree" >&2; exit 1; }
done
config="$(find "$work/prefix" -name einstageConfig.cmake | head -n 1)"
[[ -n "$config" ]] || { echo "install: einstageConfig.cmake is missing" >&2; exit 1; }
if grep -qi doctest "$(dirname "$config")"/*.cmake; then
  echo "install: the package config mentions doctest, which consumers must not need" >&2
  exit 1
fi
if [[ -e "$work/prefix/bin/einstage" ]]; then "$work/prefix/bin/einstage" --help >/dev/null; fi

"$cmake" -S "$here" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/configure.log"
"$cmake" --build "$work/build" >"$work/build.log"

expected=$'f64[2,3]\n[[0, 1, 2],\n [3, 4, 5]]'
actual="$("$work/build/einstage_consumer")"
if [[ "$actual" != "$expected" ]]; then
  printf 'install: the consumer printed\n%s\nbut expected\n%s\n' "$actual" "$expected" >&2
  exit 1
fi
echo "install: consumer built against $work/prefix and printed the expected tensor"
