"""NumPy's numbers for docs/examples/08_trg_step.cpp: one TRG step of the same tensor, written with NumPy's svd and
einsum in column-major (order="F") reshapes as einstage's are. Prints tr T' and |T'| to 13 digits; the C++
program pins these values, and tests/consumer/run.sh reruns this script when NumPy is importable.
Usage: /usr/bin/python3 docs/examples/08_trg_step.py"""
import numpy as np

d, chi = 3, 4
t = np.cos(0.4 + 0.73 * np.arange(d**4) ** 1.5).reshape((d, d, d, d), order="F")


def split(m):
    u, s, vh = np.linalg.svd(m)
    r = np.sqrt(s[:chi])
    return (u[:, :chi] * r).reshape((d, d, chi), order="F"), (vh[:chi].T * r).reshape((d, d, chi), order="F")


s1, s3 = split(t.reshape((d * d, d * d), order="F"))
s2, s4 = split(t.transpose(1, 2, 0, 3).reshape((d * d, d * d), order="F"))
tn = np.einsum("xwu,yxl,yzd,wzr->uldr", s2, s3, s4, s1)
print(f"{np.einsum('ijij->', tn):.13g} {np.linalg.norm(tn):.13g}")
