#!/usr/bin/python3
"""Peer timings for einstage_bench_linalg: np.linalg and torch.linalg svd (thin), qr (reduced) and eigh.

Reads one JSON object on stdin: {"min_time": S, "threads": N, "rows": [{"name", "op": "svd"|"qr"|"eigh", "m", "n", "batch"}]}.
Each row is a batch of `batch` f64 matrices m x n (batch 1: a single matrix), seeded normal values; eigh gets the
symmetric part. Writes one JSON object to stdout: {"numpy": version, "torch": version or null, "torch_threads",
"rows": [{"name", "numpy_s", "torch_s"}]} with the best seconds per call (after a warm-up, at least five calls and
min_time seconds). Run with /usr/bin/python3 (Debian's numpy and torch); OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS
are left as the caller's (einstage_bench_linalg sets both), torch gets torch.set_num_threads(threads) when given.
"""
import json
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # torch is optional: its column is then null
    torch = None


def best_time(fn, min_time):
    fn()
    best, total, reps = float("inf"), 0.0, 0
    while total < min_time or reps < 5:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, total, reps = min(best, dt), total + dt, reps + 1
    return best


def matrices(row):
    rng = np.random.default_rng(7)
    shape = (row["m"], row["n"]) if row["batch"] == 1 else (row["batch"], row["m"], row["n"])
    a = rng.standard_normal(shape)
    if row["op"] == "eigh":
        a = (a + np.swapaxes(a, -1, -2)) / 2
    return a


# (NumPy call, torch call) per op; torch.linalg is only touched when torch imported.
CALLS = {
    "svd": (lambda a: np.linalg.svd(a, full_matrices=False), lambda t: torch.linalg.svd(t, full_matrices=False)),
    "qr": (lambda a: np.linalg.qr(a, mode="reduced"), lambda t: torch.linalg.qr(t, mode="reduced")),
    "eigh": (np.linalg.eigh, lambda t: torch.linalg.eigh(t)),
}


def main():
    cfg = json.load(sys.stdin)
    if torch is not None and cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    out = {"numpy": np.__version__, "torch": torch.__version__ if torch else None,
           "torch_threads": torch.get_num_threads() if torch else None, "rows": []}
    for row in cfg["rows"]:
        a = matrices(row)
        numpy_fn, torch_fn = CALLS[row["op"]]
        r = {"name": row["name"], "numpy_s": best_time(lambda: numpy_fn(a), cfg["min_time"]), "torch_s": None}
        if torch is not None:
            t = torch.from_numpy(a)
            r["torch_s"] = best_time(lambda: torch_fn(t), cfg["min_time"])
        out["rows"].append(r)
    print(json.dumps(out))


main()
