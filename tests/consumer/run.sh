#!/usr/bin/env bash
# Installs an einstage build into a scratch prefix, then configures, builds and runs tests/consumer/ against it: a
# program and an out-of-tree extension module (einstage_add_module from the package; one of its families runs a
# contraction through the public kernel API), which the program loads together with the installed einsum and
# tropical modules.
#
# Proof that consumers need no LLVM headers (llvm-19-dev), only the LLVM runtime library: no installed header
# includes one; the package config does not mention LLVM; the consumer is configured with find_package(LLVM)
# disabled, so nothing can bring LLVM's include directory in; and after the build, the compile commands name no
# LLVM directory and the headers each object was compiled from (the compiler's own dependency list, `ninja -t
# deps`) include no LLVM header. Also: every installed library exports einstage symbols only, every installed module
# einstage_module_entry only; the size of each module is printed.
# Usage: tests/consumer/run.sh <einstage build dir> <scratch dir> [cmake command] [generator] [extra compile+link flags]
# [compiler]
# (registered with ctest as the test "install"; the extra flags carry -fsanitize=... in a sanitizer build, whose compiler
# the consumer is built with too: clang's sanitizer runtimes are not gcc's)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
work="$2"
cmake="${3:-cmake}"
generator="${4:-Ninja}"
flags="${5:-}"
compiler="${6:-}"  # the compiler that built einstage: a sanitizer build's libraries need its runtime

rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"

# What a consumer needs is installed: the umbrella header, headers, a library per layer and family (linalg too), the
# package config, the command line.
installed=(include/einstage/einstage.h include/einstage/ir/Tensor.h include/einstage/ir/Npy.h
  include/einstage/ir/Error.h include/einstage/extensions/linalg/TraceLinalg.h
  include/einstage/extensions/api/Extension.h include/einstage/extensions/api/Kernels.h)
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
  [[ "$lib" == *_module.so ]] && continue
  foreign="$(nm -D --defined-only "$lib" | c++filt | grep -v 'einstage::' || true)"
  if [[ -n "$foreign" ]]; then
    printf 'install: %s exports symbols outside einstage (cmake/einstage.map):\n%s\n' "$lib" "$foreign" >&2
    exit 1
  fi
done
for name in ir compiler runtime einsum linalg; do  # the libraries einstage::einstage links (README.md lists them)
  if ! compgen -G "$work/prefix/lib*/libeinstage_$name.so" >/dev/null; then
    echo "install: libeinstage_$name.so is missing from the installed tree" >&2
    exit 1
  fi
done
installed_modules=()
for name in einsum tropical; do
  lib="$(find "$work/prefix" -name "libeinstage_${name}_module.so" | head -n 1)"
  [[ -n "$lib" ]] || { echo "install: libeinstage_${name}_module.so is missing from the installed tree" >&2; exit 1; }
  installed_modules+=("$lib")
done
module_exports() {  # module_exports <module>: fails unless its one dynamic export is the entry point
  local exports
  exports="$(nm -D --defined-only "$1" | awk '{print $3}')"
  if [[ "$exports" != einstage_module_entry ]]; then
    printf 'install: %s exports\n%s\nbut a module exports einstage_module_entry only (einstageModule.map)\n' \
      "$1" "$exports" >&2
    exit 1
  fi
}
for lib in "${installed_modules[@]}"; do
  module_exports "$lib"
  echo "install: the installed module $(basename "$lib") is $(stat -c %s "$lib") bytes"
done

"$cmake" -S "$here" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} \
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
  # LLVM's own headers (include/llvm/, include/llvm-c/), not clang's resource headers when clang builds the consumer.
  if grep -E '/include/llvm(-c)?/' <<<"$deps"; then
    echo "install: the consumer compiled the LLVM headers above" >&2
    exit 1
  fi
fi
module="$work/build/libconsumer_demo_module.so"
module_exports "$module"
echo "install: the out-of-tree module $(basename "$module") is $(stat -c %s "$module") bytes"
# The kernel API runs in the installed runtime, not in a copy inside the module: the module imports contract() and
# the installed libeinstage_runtime.so exports it.
contract_symbol='einstage::contract(einstage::ContractionProblem const&, einstage::ExecutionContext&, einstage::ThreadPool*)'
if ! nm -D --undefined-only "$module" | c++filt | grep -F "$contract_symbol" >/dev/null; then
  echo "install: $module does not import $contract_symbol from libeinstage_runtime.so" >&2
  exit 1
fi
runtime_lib=("$work/prefix"/lib*/libeinstage_runtime.so)
if ! nm -D --defined-only "${runtime_lib[0]}" | c++filt | grep -F "$contract_symbol" >/dev/null; then
  echo "install: the installed libeinstage_runtime.so does not export $contract_symbol (cmake/einstage.map)" >&2
  exit 1
fi

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
# Without modules: the tensor, then the linalg check of the umbrella header and target (an svd and an einsum traced,
# differentiated and run; main.cpp checks the numbers).
linalg_line='linalg: sum(svd(x).s) + einsum("ij,ij->", x, x) = sqrt(54) + 1 + 55; its gradient matches central'
check_output "$tensor"$'\n'"$linalg_line differences" "$work/build/einstage_consumer"
# The module's families: the doubled tensor (then an einsum of it by the linked API) and X·Xᵀ through the kernel API;
# then the installed einsum module's X·Xᵀ (both checked bitwise against the linked einsum API by the program) and
# max_k (X[i,k] + X[j,k]) by the installed tropical module.
gram_text=$'f64[2,2]\n[[ 5, 14],\n [14, 50]]'
expected="$tensor"$'\nconsumer.twice.v1: f64[2,3]\n[[ 0,  2,  4],\n [ 6,  8, 10]]\nf64[2,2]\n[[ 10,  28],\n [ 28, 100]]'
expected+=$'\nconsumer.gram.v1: '"$gram_text"$'\neinstage.einsum.v1: '"$gram_text"
expected+=$'\neinstage.einsum_ad.v1: loaded (no demo program)\neinstage.tropical.v1: f64[2,2]\n[[ 4,  7],\n [ 7, 10]]'
check_output "$expected" "$work/build/einstage_consumer" "$module" "${installed_modules[@]}"
# The guide's TRG step, built from docs/examples/08_trg_step.cpp against the installed tree: its own checks (values
# against NumPy's, the second run's bits, the gradient against central differences) decide its exit status; NumPy's
# numbers are recomputed here when NumPy is importable, and must be the ones the program printed.
trg_out="$(EINSTAGE_CACHE_DIR="$work/kernel-cache" "$work/build/einstage_trg_step")" || {
  printf 'install: the TRG step failed its checks:\n%s\n' "$trg_out" >&2
  exit 1
}
python=/usr/bin/python3
if [[ -x "$python" ]] && "$python" -c 'import numpy' 2>/dev/null; then
  read -r numpy_trace numpy_norm < <("$python" "$here/../../docs/examples/08_trg_step.py")
  for want in "ok tr T': $numpy_trace " "ok |T'|: $numpy_norm "; do
    grep -qF "$want" <<<"$trg_out" || {
      printf 'install: NumPy gives %s %s but the TRG step printed\n%s\n' "$numpy_trace" "$numpy_norm" "$trg_out" >&2
      exit 1
    }
  done
fi
if [[ "$generator" == Ninja ]]; then  # how long its one translation unit took to compile (ninja's log, in ms)
  awk '$4 ~ /08_trg_step.cpp.o$/ {printf "install: the TRG step (08_trg_step.cpp) compiled in %.1f s\n", ($2 - $1) / 1000}' \
    "$work/build/.ninja_log"
fi
debug_dir="$(find "$work/prefix" -type d -name debug -path '*/lib*/debug' | head -n 1)"
echo "install: the installed tree is $(du -sb --exclude=debug "$work/prefix" | cut -f1) bytes" \
  "(libeinstage_runtime.so $(stat -c %s "$(readlink -f "${runtime_lib[0]}")") bytes)," \
  "plus $(if [[ -n "$debug_dir" ]]; then du -sb "$debug_dir" | cut -f1; else echo 0; fi) bytes of symbols under lib/debug/"
echo "install: consumer and modules built against $work/prefix without LLVM headers; the modules loaded and ran"
