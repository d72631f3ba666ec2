"""Seeded random einsums against numpy.einsum: values, result dtypes, scalar-ness and out=, over C-ordered,
Fortran-ordered, strided, negative-stride, transposed and broadcast (stride 0) operands, both calling forms,
ellipses, repeated labels, length-1 broadcasting, 0-size and scalar operands.

numpy.einsum(optimize=False) is the oracle (NumPy's C loop, independent of einstage). Every case is made from its own
generator seeded with EINSTAGE_TEST_SEED (default below) and its index, and a failure prints both plus the call, so
`EINSTAGE_TEST_SEED=... pytest -k 'case_123'` replays it.
"""

import os

import numpy as np
import pytest

import einstage

SEED = int(os.environ.get("EINSTAGE_TEST_SEED", "36036"))
CASES = 1200
LABELS = "abcdefgh"
DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int64]
OTHER_DTYPES = [np.int32, np.int16, np.int8, np.uint8, np.uint32, np.uint64, np.bool_]


def values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -50), min(info.max, 50)
        if rng.random() < 0.2 and dtype.itemsize < 8:  # large values: the products wrap, as NumPy's do
            lo, hi = info.min // 2, info.max // 2
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    a = rng.standard_normal(shape)
    if dtype.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def layout(rng, a):
    """The same values in another memory layout (the oracle gets the same array object)."""
    kind = rng.choice(["c", "f", "strided", "negative", "transposed", "broadcast"])
    if kind == "f":
        return np.asfortranarray(a), kind
    if kind == "strided" and a.ndim:
        big = np.zeros(tuple(2 * e + 1 for e in a.shape), dtype=a.dtype)
        view = big[tuple(slice(1, 2 * e + 1, 2) for e in a.shape)]
        view[...] = a
        return view, kind
    if kind == "negative" and a.ndim:
        flipped = np.ascontiguousarray(a[..., ::-1])
        return flipped[..., ::-1], kind
    if kind == "transposed" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T, kind
    if kind == "broadcast" and a.ndim and a.shape[0] > 0:
        row = a[:1]
        return np.broadcast_to(row, a.shape), kind  # every row equal, stride 0 along axis 0, read-only
    return np.ascontiguousarray(a), "c"


def make_case(rng):
    extents = {c: int(rng.integers(1, 5)) for c in LABELS}
    if rng.random() < 0.05:
        extents[rng.choice(list(LABELS))] = 0
    n = int(rng.integers(1, 5))
    use_ellipsis = rng.random() < 0.2
    batch = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))] if use_ellipsis else []
    terms, shapes = [], []
    for _ in range(n):
        rank = int(rng.integers(0, 4))
        term = "".join(rng.choice(list(LABELS[:6]), size=rank)) if rank else ""
        shape = [extents[c] for c in term]
        if shape and rng.random() < 0.1:  # a length-1 axis of a named label: NumPy stretches it
            k = int(rng.integers(0, len(shape)))
            if term.count(term[k]) == 1:
                shape[k] = 1
        if use_ellipsis and rng.random() < 0.7:
            nb = int(rng.integers(0, len(batch) + 1))
            bshape = [b if rng.random() < 0.8 else 1 for b in batch[len(batch) - nb:]]
            if rng.random() < 0.5:
                term, shape = "..." + term, bshape + shape
            else:
                cut = int(rng.integers(0, len(term) + 1))
                term = term[:cut] + "..." + term[cut:]
                shape = shape[:cut] + bshape + shape[cut:]
        terms.append(term)
        shapes.append(tuple(shape))
    present = sorted(set("".join(terms)) - {"."})
    explicit = rng.random() < 0.7
    subscripts = ",".join(terms)
    if explicit:
        out = [c for c in present if rng.random() < 0.6]
        rng.shuffle(out)
        out = "".join(out)
        if any("..." in t for t in terms) and rng.random() < 0.8:
            cut = int(rng.integers(0, len(out) + 1))
            out = out[:cut] + "..." + out[cut:]
        subscripts += "->" + out
    return subscripts, shapes


def interleaved(subscripts, operands):
    """The same einsum in NumPy's interleaved form."""
    def sub(term):
        out, i = [], 0
        while i < len(term):
            if term.startswith("...", i):
                out.append(Ellipsis)
                i += 3
            else:
                out.append(LABELS.index(term[i]))
                i += 1
        return out
    lhs, _, rhs = subscripts.partition("->")
    args = []
    for op, term in zip(operands, lhs.split(",")):
        args += [op, sub(term)]
    if "->" in subscripts:
        args.append(sub(rhs))
    return args


def tolerance(dtype):
    return {"f": 1e-4 if np.dtype(dtype).itemsize <= 4 else 1e-10,
            "c": 1e-4 if np.dtype(dtype).itemsize <= 8 else 1e-10}.get(np.dtype(dtype).kind, 0)


@pytest.mark.parametrize("index", range(CASES), ids=lambda i: f"case_{i}")
def test_random_einsum(index):
    rng = np.random.default_rng([SEED, index])
    subscripts, shapes = make_case(rng)
    mixed = rng.random() < 0.15
    base = rng.choice(DTYPES + OTHER_DTYPES) if rng.random() < 0.85 else rng.choice(OTHER_DTYPES)
    operands, layouts = [], []
    for shape in shapes:
        dt = rng.choice(DTYPES) if mixed else base
        a, kind = layout(rng, values(rng, shape, dt))
        if a.ndim == 0 and rng.random() < 0.3:
            a = a[()]  # a NumPy scalar instead of a 0-d array
            kind = "scalar"
        operands.append(a)
        layouts.append(kind)
    form = "interleaved" if rng.random() < 0.3 else "string"
    args = interleaved(subscripts, operands) if form == "interleaved" else [subscripts, *operands]
    where = (f"seed {SEED} case {index}: einsum({subscripts!r}) on shapes {shapes}, dtypes "
             f"{[np.asarray(a).dtype.name for a in operands]}, layouts {layouts}, {form} form")
    try:
        expected = np.einsum(*args, optimize=False)
    except ValueError:
        with pytest.raises(ValueError):
            einstage.einsum(*args)
        return
    use_out = rng.random() < 0.15 and np.ndim(expected) > 0
    if use_out:
        out = np.full(np.shape(expected), 7, dtype=np.asarray(expected).dtype)
        if rng.random() < 0.5:
            out = np.asfortranarray(out)
        got = einstage.einsum(*args, out=out)
        assert got is out, where
    else:
        got = einstage.einsum(*args, optimize=[True, "greedy", "optimal", False][int(rng.integers(4))])
    check(got, expected, subscripts, operands, form, where)
    # the same call again with the default arguments: a string seen before takes einstage.einsum's fast path
    check(einstage.einsum(*args), expected, subscripts, operands, form, where + " (second call, defaults)")


def check(got, expected, subscripts, operands, form, where):
    assert isinstance(got, np.ndarray) == isinstance(expected, np.ndarray), \
        f"{where}: got {type(got).__name__}, numpy returns {type(expected).__name__}"
    got_a, exp_a = np.asarray(got), np.asarray(expected)
    assert got_a.dtype == exp_a.dtype, f"{where}: dtype {got_a.dtype}, numpy {exp_a.dtype}"
    assert got_a.shape == exp_a.shape, f"{where}: shape {got_a.shape}, numpy {exp_a.shape}"
    tol = tolerance(exp_a.dtype)
    if tol == 0:
        np.testing.assert_array_equal(got_a, exp_a, err_msg=where)
    else:
        absolute = [np.abs(np.asarray(a)).astype(np.float64) for a in operands]
        scale = np.einsum(*(interleaved(subscripts, absolute) if form == "interleaved" else [subscripts, *absolute]),
                          optimize=False)
        np.testing.assert_allclose(got_a, exp_a, rtol=tol, atol=tol * (1 + np.max(scale, initial=0)), err_msg=where)
