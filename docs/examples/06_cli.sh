#!/bin/sh
# Guide story (a, c, d) from the command line: `einstage einsum`, `plan`, `grad` and `lower` on .npy files made by
# NumPy, each result checked against NumPy. Usage: 06_cli.sh EINSTAGE PYTHON WORKDIR (ctest passes all three).
set -eu
EINSTAGE=$1 PYTHON=$2 WORK=$3
einstage() { "$EINSTAGE" "$@"; }
python3() { "$PYTHON" "$@"; }
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

# [cli]
python3 -c 'import numpy as np; np.save("a.npy", np.arange(6.0).reshape(2, 3)); np.save("b.npy", np.ones((3, 4)))'
einstage einsum 'ij,jk->ik' a.npy b.npy -o c.npy            # c = a @ b, written in Fortran order
einstage plan 'ij,jk,kl->il' --shapes 10x20,20x30,30x5      # the contraction tree and its cost
einstage grad 'ij,jk->ik' a.npy b.npy --wrt 0,1 -o grad_    # grad_0.npy, grad_1.npy: d sum(a @ b)
einstage lower 'bij,bjk->bik' --shapes 6x2x3,6x3x4          # the standard-op program (--format json|dot)
# [cli]

python3 - <<'PY'
import numpy as np
a, b = np.load("a.npy"), np.load("b.npy")
ok = np.allclose(np.load("c.npy"), a @ b)
ok &= np.allclose(np.load("grad_0.npy"), np.ones((2, 4)) @ b.T)
ok &= np.allclose(np.load("grad_1.npy"), a.T @ np.ones((2, 4)))
print("06_cli:", "ok" if ok else "MISMATCH")
raise SystemExit(0 if ok else 1)
PY
einstage lower 'bij,bjk->bik' --shapes 6x2x3,6x3x4 | grep -q "dot_general"
