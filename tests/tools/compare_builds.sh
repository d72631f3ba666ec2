#!/usr/bin/env bash
# Same bits from two builds of one checkout: runs the same `einstage` commands with this build's binary and with a
# reference build's (the `clang` preset points it at the gcc release tree's, build/tools/einstage) and compares every
# output byte for byte. The commands cover the JIT's pairwise kernels, the planner, the portable and standard-op
# kernels, LAPACK through linalg, and AD through svd, eigh and the fixed-point adjoint: an einsum and a gradient of
# test data, the Ising TRG differentiated twice (its JSON prints 17 significant digits) and a short iPEPS
# optimisation whose saved parameters are compared as .npy bytes.
#
# Usage: compare_builds.sh THIS_EINSTAGE REFERENCE_EINSTAGE SOURCE_DIR WORK_DIR
# Exits 77 (ctest's skip) when the reference binary is missing, 1 when any output differs.
set -euo pipefail
this="$1" reference="$2" src="$3" work="$4"
if [[ ! -x "$reference" ]]; then
  echo "compare_builds: no reference binary at $reference; build the other tree first (cmake --build build)"
  exit 77
fi
this="$(realpath "$this")" reference="$(realpath "$reference")" src="$(realpath "$src")"
data="$src/tests/data"
rm -rf "$work" && mkdir -p "$work"
# Each run gets its own kernel cache, so neither reads kernels the other compiled.
run_all() {  # $1 = binary, $2 = output folder
  local bin="$1" out="$2"
  mkdir -p "$out"
  export EINSTAGE_CACHE_DIR="$out/kernel-cache"
  (cd "$out"
   "$bin" einsum 'ijk,ilk->jl' "$data/f64_c.npy" "$data/f64_f.npy" -o einsum_f64.npy
   "$bin" einsum 'ijk,ijl->kl' "$data/c128_c.npy" "$data/c128_f.npy" -o einsum_c128.npy
   "$bin" einsum 'ijk,ijk->' "$data/f32_c.npy" "$data/f32_f.npy" -o einsum_f32.npy
   "$bin" grad 'ijk,ilk->jl' "$data/f64_c.npy" "$data/f64_f.npy" -o grad_ > /dev/null
   for threads in 1 2; do
     "$bin" example ising-trg --beta 0.44 --chi 8 --steps 8 --threads "$threads" --json > "ising_t$threads.json"
     "$bin" example heisenberg-ipeps --D 2 --chi 8 --seed 3 --max-iter 4 --threads "$threads" \
       --save "ipeps_t$threads.npy" > /dev/null 2>&1
   done
   "$bin" example heisenberg-ipeps --load ipeps_t1.npy --chi 12 --evaluate --threads 2 --json \
     | sed -e 's/"seconds":[^,}]*//' > ipeps_eval.json)
}
run_all "$this" "$work/this"
run_all "$reference" "$work/reference"
status=0 compared=0
for f in "$work/this"/*.npy "$work/this"/*.json; do
  name="$(basename "$f")"
  compared=$((compared + 1))
  if ! cmp -s "$f" "$work/reference/$name"; then
    echo "compare_builds: $name differs between $this and $reference"
    status=1
  fi
done
# Within each build, one thread and two give the same bits.
for side in this reference; do
  for f in ising_t1.json ipeps_t1.npy; do
    if ! cmp -s "$work/$side/$f" "$work/$side/${f/_t1/_t2}"; then
      echo "compare_builds: $side build: $f differs from ${f/_t1/_t2} (1 vs 2 threads)"
      status=1
    fi
  done
done
if [[ $compared -lt 10 ]]; then
  echo "compare_builds: only $compared outputs were written; expected at least 10"
  exit 1
fi
[[ $status == 0 ]] && echo "compare_builds: $compared outputs identical between $this and $reference"
exit $status
