#!/usr/bin/env bash
# Installs an einstage build into a scratch prefix, then configures, builds and runs tests/consumer/ against it: a
# program and an out-of-tree extension module (einstage_add_module from the package), which the program loads.
#
# Proof that consumers need no LLVM headers (llvm-19-dev), only the LLVM runtime library: no installed header
# includes one; the package config does not mention LLVM; the consumer is configured with find_package(LLVM)
# disabled, so nothing can bring LLVM's include directory in; and after the build, the compile commands name no
# LLVM directory and the headers each object was compiled from (the compiler's own dependency list, `ninja -t
# deps`) include no LLVM header. Also: every installed library exports einstage symbols only.
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
if grep -rlE '#[[:space:]]*include[[:space:]]*[<"]llvm(-c)?/' "$work/prefix/include"; then
  echo "install: the installed headers above include LLVM headers; consumers must not need llvm-19-dev" >&2
  exit 1
fi
if grep -i llvm "$(dirname "$config")"/*.cmake | grep -v ':[[:space:]]*#'; then
  echo "install: the package config lines above use LLVM; it must stay a private dependency" >&2
  exit 1
fi
for lib in "$work/prefix"/lib*/libeinstage_*.so; do
  foreign="$(nm -D --defined-only "$lib" | c++filt | grep -v 'einstage::' || true)"
  if [[ -n "$foreign" ]]; then
    printf 'install: %s exports symbols outside einstage (cmake/einstage.map):\n%s\n' "$lib" "$foreign" >&2
    exit 1
  fi
done

"$cmake" -S "$here" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCMAKE_MODULE_LINKER_FLAGS="$flags" -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON >"$work/configure.log"
"$cmake" --build "$work/build" >"$work/build.log"
if grep -i llvm "$work/build/compile_commands.json"; then
  echo "install: the consumer's compile commands above name LLVM" >&2
  exit 1
fi
if [[ "$generator" == Ninja ]]; then
  deps="$(cd "$work/build" && ninja -t deps)"
  grep -q 'einstage/ir/Tensor.h' <<<"$deps" || { echo "install: ninja -t deps lists no einstage header" >&2; exit 1; }
  if grep -i llvm <<<"$deps"; then
    echo "install: the consumer compiled the LLVM headers above" >&2
    exit 1
  fi
fi
module="$work/build/libconsumer_twice_module.so"
echo "install: the out-of-tree module $(basename "$module") is $(stat -c %s "$module") bytes"

tensor=$'f64[2,3]\n[[0, 1, 2],\n [3, 4, 5]]'
check_output() {  # check_output <expected> <command...>
  local expected="$1" actual
  shift
  actual="$("$@")" || true
  if [[ "$actual" != "$expected" ]]; then
    printf 'install: %s printed\n%s\nbut expected\n%s\n' "$*" "$actual" "$expected" >&2
    exit 1
  fi
}
check_output "$tensor" "$work/build/einstage_consumer"
check_output "$tensor"$'\nf64[2,3]\n[[ 0,  2,  4],\n [ 6,  8, 10]]\nf64[2,2]\n[[ 10,  28],\n [ 28, 100]]' \
  "$work/build/einstage_consumer" "$module"
echo "install: consumer and module built against $work/prefix without LLVM headers; the module loaded and ran"
