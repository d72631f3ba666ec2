#!/usr/bin/python3
"""Writes the .npy fixtures that tests/ir/test_npy.cpp and tests/tools/ read; the outputs are committed.

Run with Debian's python3-numpy:  /usr/bin/python3 tests/data/make_npy_fixtures.py
Every value is a formula of the element's index, so the C++ tests check them without NumPy:
  real dtypes:    a[i, j, k] = 12*i + 4*j + k            (np.arange(24).reshape(2, 3, 4), i.e. C-order arange)
  complex dtypes: real part as above, imaginary part 0.5*real - 3
The same logical array is written once with fortran_order False (<name>_c.npy) and once True (<name>_f.npy).
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f32": "<f4", "f64": "<f8", "c64": "<c8", "c128": "<c16", "i64": "<i8"}


def logical(dtype, shape):
    v = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * (0.5 * v - 3.0)
    return v.astype(dtype)


def save(name, array, version=None):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)
    back = np.load(path)
    assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array), name


for short, descr in DTYPES.items():
    a = logical(descr, (2, 3, 4))
    save(f"{short}_c.npy", np.ascontiguousarray(a))
    save(f"{short}_f.npy", np.asfortranarray(a))

# The reference layout example: 0..5 as rows [[0,1,2],[3,4,5]], in both orders.
m = np.arange(6.0).reshape(2, 3)
save("matrix_c.npy", np.ascontiguousarray(m))
save("matrix_f.npy", np.asfortranarray(m))

# Header versions 2.0 and 3.0 (NumPy picks them itself only for huge or non-latin-1 headers).
save("f64_v2_f.npy", np.asfortranarray(logical("<f8", (3, 2))), version=(2, 0))
save("f64_v3_c.npy", np.ascontiguousarray(logical("<f8", (3, 2))), version=(3, 0))

# Rank 0, rank 1 and a zero-size extent.
save("f64_scalar.npy", np.array(2.5))
save("i64_vector.npy", np.arange(5, dtype="<i8"))
save("f64_empty.npy", np.zeros((2, 0, 3)))

# Files einstage must refuse with a clear error.
save("f64_big_endian.npy", logical(">f8", (2, 3)))
save("i32.npy", logical("<i4", (2, 3)))
save("bool.npy", np.array([True, False, True]))
