#!/usr/bin/python3
"""Whole-process einsums: `einstage einsum SUBSCRIPTS A.npy B.npy -o C.npy` against the NumPy script that loads
the same files and saves the same result, each a fresh process, interleaved (einstage, NumPy, einstage, ...) so both
see the same load on a shared machine. Not a test: it prints a table.

Usage: tools/bench/cli_vs_numpy.py build/tools/einstage [--case gemm|aebf|kac] [--n 2048] [--runs 7] [--dtype f64]

Cases (issue 14's whole-process targets): `gemm` is ij,jk->ik at n² against `np.load(A) @ np.load(B)`; `aebf` is
aebf,dfce->abcd with every extent 48 and `kac` is kac,bk->abc with k=16, a=4096, c=64, b=64 (A 16×4096×64, B 64×16),
both against `np.einsum(subscripts, A, B, optimize="greedy")`.

Rows: einstage at the default thread count and at --threads 1; NumPy with OpenBLAS's own threads and core pick,
and at OPENBLAS_NUM_THREADS=1; when tools/bench/Machine.h's rule applies (an AVX-512 CPU that OpenBLAS does not
recognise), NumPy also with OPENBLAS_CORETYPE=SkylakeX. Times are wall seconds per process (best and median of the
runs); peak RSS is /usr/bin/time's maximum resident set. Ratios are NumPy time / einstage time (> 1: einstage
faster), each against the einstage row with the same thread count.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def openblas_own_core():
    """The core OpenBLAS picks by itself: asked in a child process without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
    (this process's OpenBLAS, loaded by numpy, read whatever the caller's environment set)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    probe = ("import ctypes\nlib = ctypes.CDLL('libopenblas.so.0')\n"
             "lib.openblas_get_corename.restype = ctypes.c_char_p\nprint(lib.openblas_get_corename().decode())")
    p = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def has_avx512():
    with open("/proc/cpuinfo") as f:
        flags = next((l for l in f if l.startswith("flags")), "").split()
    return all(x in flags for x in ("avx512f", "avx512vl", "avx512bw", "avx512dq"))


def run(cmd, env):
    """Wall seconds and peak RSS (MiB) of one process; raises if it fails."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    return dt, int(p.stderr.strip().splitlines()[-1]) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("einstage")
    ap.add_argument("--case", default="gemm", choices=["gemm", "aebf", "kac"])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dtype", default="f64", choices=["f64", "f32"])
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "EINSTAGE_NUM_THREADS", "OMP_"))}
    own = openblas_own_core()
    forced = has_avx512() and own is not None and own not in ("SkylakeX", "Cooperlake", "SapphireRapids")
    with tempfile.TemporaryDirectory() as d:
        rng = np.random.default_rng(1)
        dt = np.float64 if args.dtype == "f64" else np.float32
        a_path, b_path = os.path.join(d, "A.npy"), os.path.join(d, "B.npy")
        subscripts, a_shape, b_shape = {"gemm": ("ij,jk->ik", (args.n, args.n), (args.n, args.n)),
                                        "aebf": ("aebf,dfce->abcd", (48,) * 4, (48,) * 4),
                                        "kac": ("kac,bk->abc", (16, 4096, 64), (64, 16))}[args.case]
        np.save(a_path, rng.standard_normal(a_shape).astype(dt))
        np.save(b_path, rng.standard_normal(b_shape).astype(dt))
        out_path = os.path.join(d, "C_np.npy")
        load = f"np.load({a_path!r}), np.load({b_path!r})"
        expr = (f"np.matmul({load})" if args.case == "gemm"
                else f"np.einsum({subscripts!r}, {load}, optimize='greedy')")
        script = f"import numpy as np; np.save({out_path!r}, {expr})"
        ours = [args.einstage, "einsum", subscripts, a_path, b_path, "-o", os.path.join(d, "C.npy")]
        numpy = ["/usr/bin/python3", "-c", script]
        rows = [("einstage (default threads)", ours, {}, "default"),
                ("einstage --threads 1", ours + ["--threads", "1"], {}, "1"),
                (f"numpy, OpenBLAS own pick ({own})", numpy, {}, "default"),
                (f"numpy, OpenBLAS own pick ({own}), 1 thread", numpy, {"OPENBLAS_NUM_THREADS": "1"}, "1")]
        if forced:
            rows += [("numpy, OPENBLAS_CORETYPE=SkylakeX", numpy, {"OPENBLAS_CORETYPE": "SkylakeX"}, "default"),
                     ("numpy, OPENBLAS_CORETYPE=SkylakeX, 1 thread", numpy,
                      {"OPENBLAS_CORETYPE": "SkylakeX", "OPENBLAS_NUM_THREADS": "1"}, "1")]
        times = {r[0]: [] for r in rows}
        rss = {r[0]: 0.0 for r in rows}
        for _ in range(args.runs + 1):  # the first round warms the page cache and the kernel cache
            for name, cmd, extra, _threads in rows:
                t, m = run(cmd, {**base, **extra})
                times[name].append(t)
                rss[name] = max(rss[name], m)
        got, want = np.load(os.path.join(d, "C.npy")), np.load(os.path.join(d, "C_np.npy"))
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
    what = f"{args.n}^2 GEMM" if args.case == "gemm" else f"{subscripts} {a_shape} x {b_shape}"
    print(f"cpu: {model}; {os.cpu_count()} CPUs; OpenBLAS own pick {own}; {what} {args.dtype}, "
          f"{args.runs} interleaved runs after one warm-up round; load average {os.getloadavg()[0]:.2f}")
    ref = {}
    print(f"{'process':<48} {'best s':>8} {'median s':>9} {'peak MiB':>9} {'x einstage':>11}")
    for name, _cmd, _extra, threads in rows:
        best, med = min(times[name][1:]), statistics.median(times[name][1:])
        if name.startswith("einstage"):
            ref[threads] = med
        ratio = "" if name.startswith("einstage") else f"{med / ref[threads]:.2f}"
        print(f"{name:<48} {best:>8.3f} {med:>9.3f} {rss[name]:>9.1f} {ratio:>11}")
    print(f"max relative difference einstage vs numpy: {err:.1e}; x einstage = numpy median / einstage median at the "
          "same thread count")


if __name__ == "__main__":
    sys.exit(main())
