#!/bin/sh
# Guide story (a, c, d) from the command line: `einstage einsum`, `plan`, `grad` and `lower` on .npy files made by
# NumPy, and `show-program`, `run` and `grad` on a saved program, each result checked against NumPy. Usage: 06_cli.sh EINSTAGE PYTHON WORKDIR (ctest passes all three).
set -eu
EINSTAGE=$1 PYTHON=$2 WORK=$3
einstage() { "$EINSTAGE" "$@"; }
python3() { "$PYTHON" "$@"; }
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

# A saved program for the program commands: loss(x, w) = sum_ij x[i,j] w[j] (the IR text form print_program writes).
cat > loss.ir <<'IR'
program @loss(%x: f64[2,3], %w: f64[3]) -> (f64[]) {
  %0 = einstage.einsum.v1(%x, %w) {broadcast = false, plan = auto, subscripts = "ij,j->"} : f64[]
  return %0
}
IR
python3 -c 'import numpy as np; np.save("x.npy", np.arange(6.0).reshape(2, 3) - 2); np.save("w.npy", np.array([1.0, -2.0, 0.5]))'

# [cli]
python3 -c 'import numpy as np; np.save("a.npy", np.arange(6.0).reshape(2, 3)); np.save("b.npy", np.ones((3, 4)))'
einstage einsum 'ij,jk->ik' a.npy b.npy -o c.npy            # c = a @ b, written in Fortran order
einstage plan 'ij,jk,kl->il' --shapes 10x20,20x30,30x5      # the contraction tree and its cost
einstage grad 'ij,jk->ik' a.npy b.npy --wrt 0,1 -o grad_    # grad_0.npy, grad_1.npy: d sum(a @ b)
einstage lower 'bij,bjk->bik' --shapes 6x2x3,6x3x4          # the standard-op program (--format json|dot)
einstage show-program loss.ir                               # a saved program as loaded, in the IR text form
einstage run loss.ir --input x=x.npy --input w=w.npy        # run it on .npy inputs (-o OUT.npy per output)
einstage grad loss.ir --input x=x.npy --input w=w.npy --wrt x,w -o g_   # g_x.npy, g_w.npy: d loss / d x, w
# [cli]

python3 - <<'PY'
import numpy as np
a, b = np.load("a.npy"), np.load("b.npy")
ok = np.allclose(np.load("c.npy"), a @ b)
ok &= np.allclose(np.load("grad_0.npy"), np.ones((2, 4)) @ b.T)
ok &= np.allclose(np.load("grad_1.npy"), a.T @ np.ones((2, 4)))
x, w = np.load("x.npy"), np.load("w.npy")
ok &= np.allclose(np.load("g_x.npy"), np.broadcast_to(w, (2, 3)))
ok &= np.allclose(np.load("g_w.npy"), x.sum(axis=0))
print("06_cli:", "ok" if ok else "MISMATCH")
raise SystemExit(0 if ok else 1)
PY
einstage lower 'bij,bjk->bik' --shapes 6x2x3,6x3x4 | grep -q "dot_general"
