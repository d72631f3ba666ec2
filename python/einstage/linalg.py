"""einstage.linalg: svd, qr and eigh with NumPy's conventions, traced as einstage.linalg.v1 ops (LAPACK, with AD
rules; docs/linalg.md) when given traced tensors, numpy.linalg's otherwise.

einstage's decompositions batch along the axes on the right ([M, N, B...], column-major style); NumPy's along the
left ([..., M, N]). The traced calls move the batch axes to the right before the op and back after it (two
transposes, visible in the printed program), so the factors come back in NumPy's layout.
"""

import numpy as np

from . import _einstage
from ._trace import Traced, transpose


def _to_right(a):
    """[..., M, N] -> [M, N, ...]: einstage's batch layout."""
    b = a.ndim - 2
    return a if b == 0 else transpose(a, [b, b + 1, *range(b)])


def _to_left(x, core):
    """einstage's [core..., B...] -> NumPy's [B..., core...]."""
    b = x.ndim - core
    return x if b == 0 else transpose(x, [*range(core, core + b), *range(core)])


def _check(a, name):
    if a.ndim < 2:
        raise ValueError(f"{name}: {a.ndim}-dimensional array given; the array must be at least two-dimensional")


def svd(a, full_matrices=True, compute_uv=True, keep=None):
    """numpy.linalg.svd: (u, s, vh) with s descending; ``keep=k`` (einstage only, traced) gives the k leading
    triplets with cheap derivatives."""
    if not isinstance(a, Traced):
        if keep is not None:
            raise TypeError("svd: keep= is for traced tensors (einstage's truncated svd)")
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    _check(a, "svd")
    u, s, vh = (Traced(t) for t in _einstage.t_svd(_to_right(a)._t, bool(full_matrices and keep is None),
                                                      int(keep or 0)))
    s = _to_left(s, 1)
    if not compute_uv:
        return s
    return _to_left(u, 2), s, _to_left(vh, 2)


def qr(a, mode="reduced"):
    """numpy.linalg.qr in its default 'reduced' mode: (q, r)."""
    if not isinstance(a, Traced):
        return np.linalg.qr(a, mode=mode)
    if mode != "reduced":
        raise ValueError(f"qr: traced tensors take mode='reduced' only, not {mode!r}")
    _check(a, "qr")
    q, r = (Traced(t) for t in _einstage.t_qr(_to_right(a)._t))
    return _to_left(q, 2), _to_left(r, 2)


def eigh(a, UPLO="L"):
    """numpy.linalg.eigh: (w, v), eigenvalues ascending, from the lower triangle."""
    if not isinstance(a, Traced):
        return np.linalg.eigh(a, UPLO=UPLO)
    if UPLO != "L":
        raise ValueError("eigh: traced tensors read the lower triangle only (UPLO='L')")
    _check(a, "eigh")
    w, v = (Traced(t) for t in _einstage.t_eigh(_to_right(a)._t))
    return _to_left(w, 1), _to_left(v, 2)
