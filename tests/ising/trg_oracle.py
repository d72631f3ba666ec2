#!/usr/bin/env python3
"""Independent NumPy oracle for the Ising TRG example (issue 17; examples/ising/Trg.h, docs/ising.md).

Levin-Nave TRG exactly as the issue states it, written again from the description (no einstage code), with
NumPy's LAPACK SVD and column-major (order="F") merges like einstage's:
  T[i,j,k,l] = sqrt(l_i l_j l_k l_l) / 2 for even i+j+k+l (l_0 = 2 cosh b, l_1 = 2 sinh b), index order (u,l,d,r);
  N times: m = max|T|, T /= m, lnZ/site += 2^-n ln m; Ma = T as (u,l)|(d,r), Mb = T as (l,d)|(u,r); full SVDs;
  D' = min(D^2, chi, #(Sa > 1e-15), #(Sb > 1e-15)); S1 = Ua sqrt(Sa), S3 = Va sqrt(Sa), S2 = Ub sqrt(Sb),
  S4 = Vb sqrt(Sb), each split to (D, D, D'); T = einsum("xwu,yxl,yzd,wzr->uldr", S2, S3, S4, S1);
  finally lnZ/site += 2^-N ln sum_xy T[x,y,x,y].
The derivatives are NOT automatic differentiation: energy = -d(lnZ/site)/db and specific heat = b^2 d2(lnZ/site)/db2
by central finite differences (five-point stencils at steps 1e-3, 5e-4 and 2.5e-4, Richardson-extrapolated in pairs),
which is independent of the AD under test. The two extrapolations' difference is printed as an error estimate.

The derivative is that of the algorithm with its truncation held: every stencil point keeps the bond dimensions D'
chosen at BETA itself (the schedule). Where the spectrum has exact zeros (a rank-deficient step, e.g. D' = 4 of 16
at beta = 0.5), the singular values past the rank are rounding noise near 1e-16, and whether one of them exceeds the
1e-15 threshold changes from one beta to the next (and between LAPACK builds). Such a mode changes lnZ/site by about
1e-15, but it would make the function a step function at that level, and a stencil that crosses a change would
divide the step by h. The points whose own schedule differs are counted in the output ("schedule_changes"). A
cut at chi through two nearly equal singular values is a real kink; the error estimate shows it.

usage: trg_oracle.py BETA CHI STEPS [--no-derivatives]   prints one JSON object
"""
import json
import sys

import numpy as np

THRESHOLD = 1e-15


def initial_tensor(beta):
    lam = np.array([2 * np.cosh(beta), 2 * np.sinh(beta)])
    t = np.zeros((2, 2, 2, 2))
    for i in range(2):
        for j in range(2):
            for k in range(2):
                for l in range(2):
                    if (i + j + k + l) % 2 == 0:
                        t[i, j, k, l] = np.sqrt(lam[i] * lam[j] * lam[k] * lam[l]) / 2
    return t


def lnz_per_site(beta, chi, steps, schedule=None):
    """ln Z / 2^steps and the bond dimension kept at each step (its own, even when `schedule` imposes D')."""
    t = initial_tensor(beta)
    lnz = 0.0
    own = []
    for n in range(steps):
        m = np.max(np.abs(t))
        t = t / m
        lnz += np.ldexp(np.log(m), -n)
        d = t.shape[0]
        ma = np.reshape(t, (d * d, d * d), order="F")
        mb = np.reshape(np.transpose(t, (1, 2, 0, 3)), (d * d, d * d), order="F")
        ua, sa, vha = np.linalg.svd(ma)
        ub, sb, vhb = np.linalg.svd(mb)
        dn = min(d * d, chi, int(np.sum(sa > THRESHOLD)), int(np.sum(sb > THRESHOLD)))
        own.append(dn)
        if schedule is not None:
            dn = schedule[n]
        ra, rb = np.sqrt(sa[:dn]), np.sqrt(sb[:dn])
        split = lambda x: np.reshape(x, (d, d, dn), order="F")
        s1 = split(ua[:, :dn] * ra)
        s3 = split(vha[:dn, :].T * ra)
        s2 = split(ub[:, :dn] * rb)
        s4 = split(vhb[:dn, :].T * rb)
        t = np.einsum("xwu,yxl,yzd,wzr->uldr", s2, s3, s4, s1, optimize="optimal")
    lnz += np.ldexp(np.log(np.einsum("xyxy->", t)), -steps)
    return lnz, own


# The smallest step; the stencils use 1, 2 and 4 times it, so every point is beta + j * H0 for j in +-{1, 2, 4, 8}.
H0 = 2.5e-4


def derivatives(values, m):
    """Five-point first and second differences at step m * H0 from values[j] = f(beta + j * H0)."""
    fm2, fm1, f0, fp1, fp2 = (values[k * m] for k in (-2, -1, 0, 1, 2))
    h = m * H0
    d1 = (fm2 - 8 * fm1 + 8 * fp1 - fp2) / (12 * h)
    d2 = (-fm2 + 16 * fm1 - 30 * f0 + 16 * fp1 - fp2) / (12 * h * h)
    return d1, d2


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    beta, chi, steps = float(argv[1]), int(argv[2]), int(argv[3])
    lnz, schedule = lnz_per_site(beta, chi, steps)
    out = {"beta": beta, "chi": chi, "steps": steps, "lnz": lnz, "schedule": schedule}
    if "--no-derivatives" not in argv:
        # Three step sizes; Richardson on neighbouring pairs removes the stencils' O(h^4) error, and the two
        # extrapolations' difference estimates what is left (with the rounding, ~1e-15 / h).
        values, changes = {0: lnz}, 0
        for j in (-8, -4, -2, -1, 1, 2, 4, 8):
            values[j], own = lnz_per_site(beta + j * H0, chi, steps, schedule)
            changes += own != schedule
        d1, d2 = zip(*(derivatives(values, m) for m in (4, 2, 1)))
        r1 = [(16 * d1[i + 1] - d1[i]) / 15 for i in range(2)]
        r2 = [(16 * d2[i + 1] - d2[i]) / 15 for i in range(2)]
        out.update({"energy": -r1[1], "specific_heat": beta * beta * r2[1],
                    "energy_error_estimate": abs(r1[1] - r1[0]),
                    "specific_heat_error_estimate": beta * beta * abs(r2[1] - r2[0]),
                    "schedule_changes": changes})
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
