#!/usr/bin/python3
"""Peer timings for einstage_bench_linalg: np.linalg and torch.linalg svd (thin), qr (reduced) and eigh.

Reads one JSON object on stdin: {"min_time": S, "threads": N, "rows": [{"name", "op": "svd"|"qr"|"eigh", "m", "n",
"batch", "input"}]}. Each row is a batch of `batch` f64 matrices m x n (batch 1: a single matrix): the very matrices
einstage decomposes, read from the .npy file `input` (einstage's column-major [m, n, batch], written by
einstage_bench_linalg) and handed to NumPy and torch as an ordinary C-contiguous array [batch, m, n]. Writes one JSON
object to stdout: {"numpy": version, "torch": version or null, "torch_threads", "rows": [{"name", "numpy_s",
"numpy_cpu_per_wall", "torch_s", "torch_cpu_per_wall"}]} with the best seconds per call (after a warm-up, at least
five calls and min_time seconds) and the process's CPU seconds per wall second over those calls (at most about 1
when the peer really runs on one thread). Run with /usr/bin/python3 (Debian's numpy and torch); OPENBLAS_CORETYPE and
OPENBLAS_NUM_THREADS are left as the caller's (einstage_bench_linalg sets both), torch gets
torch.set_num_threads(threads) when given.
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
    """(best seconds per call, CPU seconds per wall second over the timed calls)."""
    fn()
    best, total, reps = float("inf"), 0.0, 0
    cpu0 = time.process_time()
    while total < min_time or reps < 5:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, total, reps = min(best, dt), total + dt, reps + 1
    return best, (time.process_time() - cpu0) / total


def matrices(row):
    a = np.load(row["input"])  # [m, n] or [m, n, batch], the batch axis last as einstage holds it
    if a.ndim == 3:
        a = np.moveaxis(a, -1, 0)
    return np.ascontiguousarray(a)


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
        r = {"name": row["name"], "torch_s": None, "torch_cpu_per_wall": None}
        r["numpy_s"], r["numpy_cpu_per_wall"] = best_time(lambda: numpy_fn(a), cfg["min_time"])
        if torch is not None:
            t = torch.from_numpy(a)
            r["torch_s"], r["torch_cpu_per_wall"] = best_time(lambda: torch_fn(t), cfg["min_time"])
        out["rows"].append(r)
    print(json.dumps(out))


main()
