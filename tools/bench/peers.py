#!/usr/bin/python3
"""Peer timings for einstage_bench_contract: NumPy einsum (plain and optimize=True) and torch.einsum.

Reads a JSON list of rows on stdin: {"name", "spec", "shapes": [[..], [..]], "dtype", "flops", "min_time",
"threads"}.
Operands are created in Fortran (column-major) order so that they hold exactly the bytes einstage's column-major
tensors hold for the same shapes: every system computes the same einsum on the same memory layout.
Writes one JSON object to stdout: {"corename": ..., "numpy": ..., "torch": ..., "rows": [{"name", "numpy_einsum",
"numpy_einsum_opt", "torch_einsum"} (best seconds per call)]}. Run with /usr/bin/python3 (Debian's numpy/torch).
The caller sets OPENBLAS_CORETYPE (or not) and OPENBLAS_NUM_THREADS in the environment.
"""
import ctypes
import json
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # torch is optional: its column is then null
    torch = None

DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def best_time(fn, min_time):
    t0 = time.perf_counter()
    fn()  # warm-up (and first-call costs)
    first = time.perf_counter() - t0
    if first > min_time:  # a slow call: once more is enough
        t0 = time.perf_counter()
        fn()
        return min(first, time.perf_counter() - t0)
    best = float("inf")
    total = 0.0
    reps = 0
    while total < min_time or reps < 3:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        total += dt
        reps += 1
    return best


def corename():
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
        except (OSError, AttributeError):
            continue
    return None


def main():
    rows = json.load(sys.stdin)
    rng = np.random.default_rng(1234)
    out = {"corename": corename(), "numpy": np.__version__, "torch": torch.__version__ if torch else None, "rows": []}
    if torch and rows:
        torch.set_num_threads(int(rows[0].get("threads", 1)))
    for row in rows:
        dt = DTYPES[row["dtype"]]
        ops = []
        for shape in row["shapes"]:
            x = rng.standard_normal(shape)
            if np.issubdtype(dt, np.complexfloating):
                x = x + 1j * rng.standard_normal(shape)
            ops.append(np.asfortranarray(x.astype(dt)))
        spec, min_time = row["spec"], float(row.get("min_time", 0.3))
        result = {"name": row["name"]}
        # Plain np.einsum (no optimize) runs its own C loop nest; beyond ~2 GFLOP it takes minutes: skipped there.
        if float(row.get("flops", 0)) <= 2e9:
            result["numpy_einsum"] = best_time(lambda: np.einsum(spec, *ops), min_time)
        else:
            result["numpy_einsum"] = None
        result["numpy_einsum_opt"] = best_time(lambda: np.einsum(spec, *ops, optimize=True), min_time)
        if torch:
            tops = [torch.from_numpy(o) for o in ops]
            result["torch_einsum"] = best_time(lambda: torch.einsum(spec, *tops), min_time)
        else:
            result["torch_einsum"] = None
        out["rows"].append(result)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
