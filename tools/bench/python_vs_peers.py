#!/usr/bin/python3
"""einstage from Python against its peers in the same run: call overhead, a large matmul, two contraction networks
and their value-and-gradient, in one table with the CPU and the OpenBLAS core (issue 36's targets).

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/python_vs_peers.py [--quick] [--json FILE]

Peers: NumPy (numpy.einsum with optimize=True, and a @ b for the matmul) and, when installed, PyTorch
(torch.einsum, and torch autograd for the gradients). For the networks torch contracts pairwise along einstage's own
path, so the comparison is of kernels, not of planners. All libraries use every CPU (torch.set_num_threads(
os.cpu_count()), einstage's default). Timings alternate between the libraries round by round, so a load from other
processes falls on all of them alike: the call overheads are timeit loops of --calls calls (100000), best of
--rounds rounds; the rest are the best single call over rounds lasting --min-time seconds per library after a
warm-up (a library whose warm-up alone takes 20x --min-time is timed by it). In the 2048^2 matmul's rounds each call
starts after a pause of SETTLE_S, so that no library's idle threads still poll while the next one runs (OpenBLAS's
keep calling sched_yield for 2^28 TSC ticks after each call, 0.13 s on the Zen 5 guest: einstage right after NumPy or
torch lost 5-10% to them). The 2048^2 matmul also reports the
median call of each library over the same rounds, the same call with each library alone in a fresh process of
its own (processes alternating, 3 calls after a warm-up each, 5 rounds), and the peak
resident set of a fresh process doing only that call, for einstage and for NumPy, and how far above the peak after
the imports it went (the operands, the result and any copy).

OpenBLAS (NumPy's, torch's, and einstage's LAPACK) runs as tools/bench/Machine.h decides for peers: the script
re-executes itself without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (reported when the caller set them), forcing
OPENBLAS_CORETYPE=SkylakeX only on an AVX-512 CPU that OpenBLAS's own pick leaves without AVX-512 kernels.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

from cli_vs_numpy import openblas_own_core  # the one probe of OpenBLAS's own core (Machine.h's rule)

_PEER_MARK = "EINSTAGE_BENCH_PEER_ENV"  # set in the re-executed process: what the caller's environment had


def _cpu():
    with open("/proc/cpuinfo") as f:
        lines = f.read().splitlines()
    model = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("model name")), "unknown")
    flags = next((l for l in lines if l.startswith("flags")), "").split()
    avx512 = all(x in flags for x in ("avx512f", "avx512vl", "avx512bw", "avx512dq"))
    isa = ", ".join(n for n, f in (("AVX-512", avx512), ("AVX2", "avx2" in flags), ("FMA", "fma" in flags)) if f)
    return model, isa or "SSE only", avx512


def _reexec_as_peer():
    """Runs this script again with OpenBLAS's variables as Machine.h gives them to peers (once)."""
    if _PEER_MARK in os.environ:
        return
    _, _, avx512 = _cpu()
    own = openblas_own_core()
    forced = "SkylakeX" if avx512 and own is not None and own not in ("SkylakeX", "Cooperlake", "SapphireRapids") else ""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if forced:
        env["OPENBLAS_CORETYPE"] = forced
    env[_PEER_MARK] = json.dumps({"own": own, "forced": forced,
                                  "caller_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                                  "caller_l2_size": os.environ.get("OPENBLAS_L2_SIZE", "")})
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def _openblas_text(blas):
    core = blas["forced"] or blas["own"] or "no OpenBLAS"
    text = f"OpenBLAS core {core} for every library" + (" (forced: OpenBLAS's own pick " + str(blas["own"]) +
                                                        " has no AVX-512 kernels)" if blas["forced"] else
                                                        " (its own pick)")
    caller = [f"{k}={v}" for k, v in (("OPENBLAS_CORETYPE", blas["caller_coretype"]),
                                       ("OPENBLAS_L2_SIZE", blas["caller_l2_size"])) if v]
    return text + ("; the caller's " + " ".join(caller) + " not used" if caller else "")


def chain7(n=256):
    return "ij,jk,kl,lm,mn,no,o->i", [(n, n)] * 6 + [(n,)]


def grid4x4(bond=8):
    letters = "abcdefghijklmnopqrstuvwx"
    h = lambda r, c: letters[r * 3 + c]  # noqa: E731
    v = lambda r, c: letters[12 + r * 4 + c]  # noqa: E731
    terms = []
    for r in range(4):
        for c in range(4):
            t = (h(r, c - 1) if c > 0 else "") + (h(r, c) if c < 3 else "") + (v(r - 1, c) if r > 0 else "") + \
                (v(r, c) if r < 3 else "")
            terms.append(t)
    return ",".join(terms) + "->", [(bond,) * len(t) for t in terms]


def torch_along(torch, path_info, tensors):
    """torch.einsum pairwise along einstage's path (positions as opt_einsum gives them)."""
    ops = list(tensors)
    for (i, j), (_, _, eq, _, _) in zip(path_info.path, path_info.contraction_list):
        lhs_rhs, out = eq.split("->")
        a, b = ops[i], ops[j]
        for k in sorted((i, j), reverse=True):
            del ops[k]
        ops.append(torch.einsum(f"{lhs_rhs}->{out}", a, b))
    out = ops[0]
    final = path_info.output_subscript
    have = path_info.contraction_list[-1][2].split("->")[1]
    return torch.einsum(f"{have}->{final}", out) if have != final else out


def per_call(fns, calls, rounds):
    """Best seconds per call of each function (None stays None): timeit loops, the functions alternating."""
    best = {k: None for k in fns}
    for f in fns.values():
        if f is not None:
            f()
    for _ in range(rounds):
        for k, f in fns.items():
            if f is not None:
                t = timeit.timeit(f, number=calls) / calls
                best[k] = t if best[k] is None else min(best[k], t)
    return best


# Seconds between one library's large call and the next one's in the matmul row: longer than OpenBLAS 0.3.21's idle
# threads poll after a call (2^28 TSC ticks unless OPENBLAS_THREAD_TIMEOUT says less: 0.13 s at 2.1 GHz) and
# einstage's (200 us), so each call finds the other libraries' threads asleep and pays only its own pool's wake-up.
SETTLE_S = 0.3


def alternate(fns, min_time, settle=0.0):
    """Best and median seconds of one call of each function, the functions alternating round by round (the warm-up
    call counts only for a function it times alone); `settle` seconds of sleep before each timed call."""
    best, total, samples = {}, {}, {}
    for k, f in fns.items():
        if f is None:
            best[k] = None
            continue
        t0 = time.perf_counter()
        f()
        best[k] = time.perf_counter() - t0
        total[k], samples[k] = 0.0, [best[k]]
    slow = {k for k, t in best.items() if t is not None and t > 20 * min_time}  # timed by the warm-up alone
    rounds = 0
    while rounds < 3 or any(total[k] < min_time for k in total if k not in slow):
        for k in total:
            if k in slow:
                continue
            time.sleep(settle)
            t0 = time.perf_counter()
            fns[k]()
            t = time.perf_counter() - t0
            best[k], total[k] = min(best[k], t), total[k] + t
            samples[k] = samples[k][1:] if rounds == 0 else samples[k]  # the warm-up out once rounds have run
            samples[k].append(t)
        rounds += 1
    median = {k: (statistics.median(samples[k]) if k in samples else None) for k in best}
    return best, median


# The high-water mark of a fresh process's resident set (VmHWM: ru_maxrss would carry the parent's over the fork)
# and what it was after the imports, so the matmul's own memory is the difference.
HWM = ("int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))")


def peak_rss_kib(n, imports, call):
    code = (f"import numpy as np; {imports}; base = {HWM}; a = np.ones(({n}, {n})); b = np.ones(({n}, {n})); "
            f"{call}; print(base, {HWM})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = map(int, out.stdout.split())
    return peak, peak - base


# One library's n x n matmul timed in a fresh process of its own, so that no other library's threads share the CPUs
# (OpenBLAS's idle threads poll for a while after each call; on a 2-core machine that slows whoever runs next in the
# same process). The operands are the same arrays as in the shared-process row (seed 0 after the 16x16 pair).
ALONE = """
import sys, time, numpy as np
n, lib, calls = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(0); rng.standard_normal((16, 16)); rng.standard_normal((16, 16))
a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
if lib == "es":
    import einstage as es
    f = lambda: es.einsum("ij,jk->ik", a, b)
else:
    f = lambda: a @ b
f()
ts = []
for _ in range(calls):
    t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
print(" ".join(map(repr, ts)))
"""


def alone(n, rounds, calls=3):
    """Best and median seconds of one n x n matmul call of einstage and NumPy, each in a fresh process of its own,
    the processes alternating round by round."""
    samples = {"es": [], "np": []}
    for _ in range(rounds):
        for lib in samples:
            out = subprocess.run([sys.executable, "-c", ALONE, str(n), lib, str(calls)], capture_output=True, text=True,
                                 check=True)
            samples[lib] += [float(x) for x in out.stdout.split()]
    return ({k: min(v) for k, v in samples.items()}, {k: statistics.median(v) for k, v in samples.items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs and a 1024^2 matmul (a smoke test)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows and the machine as JSON")
    parser.add_argument("--calls", type=int, default=100000, help="calls per timeit loop for the call overheads")
    parser.add_argument("--rounds", type=int, default=5, help="timeit loops per library for the call overheads")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per library for the other rows")
    args = parser.parse_args()
    _reexec_as_peer()
    import numpy as np
    import einstage as es
    try:
        import torch
    except ImportError:  # the table then has no torch column
        torch = None

    min_time, calls, rounds = args.min_time, args.calls, args.rounds
    if args.quick:
        min_time, calls, rounds = min(min_time, 0.05), min(calls, 2000), min(rounds, 2)
    if torch is not None:
        torch.set_num_threads(os.cpu_count())
    model, isa, _ = _cpu()
    blas = json.loads(os.environ[_PEER_MARK])
    machine = {"cpu_model": model, "isa": isa, "cpus": os.cpu_count(), "einstage_threads": es.threads(),
               "torch_threads": torch.get_num_threads() if torch is not None else None,
               "numpy": np.__version__, "torch": torch.__version__ if torch is not None else None,
               "openblas_own_core": blas["own"], "openblas_core": blas["forced"] or blas["own"],
               "openblas_forced": bool(blas["forced"]), "environment_openblas_coretype": blas["caller_coretype"],
               "environment_openblas_l2_size": blas["caller_l2_size"]}
    print(f"cpu: {model}; ISA {isa}; {os.cpu_count()} CPUs; threads: einstage {es.threads()}, torch "
          f"{machine['torch_threads'] or '-'}; numpy {np.__version__}; torch {machine['torch'] or 'not installed'}")
    print(_openblas_text(blas))
    rows = []  # (workload, einstage, numpy, torch) in seconds
    rng = np.random.default_rng(0)

    a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    expr = es.contract_expression("ij,jk->ik", a.shape, b.shape)
    ta, tb = (torch.from_numpy(x) for x in (a, b)) if torch is not None else (None, None)
    t = per_call({"es": lambda: es.einsum("ij,jk->ik", a, b), "np": lambda: np.einsum("ij,jk->ik", a, b),
                  "torch": (lambda: torch.einsum("ij,jk->ik", ta, tb)) if torch is not None else None,
                  "expr": lambda: expr(a, b), "matmul": lambda: a @ b,
                  "torch_matmul": (lambda: ta @ tb) if torch is not None else None}, calls, rounds)
    rows.append(("16x16 matmul: einsum call", t["es"], t["np"], t["torch"]))
    rows.append(("16x16 matmul: contract_expression", t["expr"], None, None))
    rows.append(("16x16 matmul: a @ b", None, t["matmul"], t["torch_matmul"]))

    n = 1024 if args.quick else 2048
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ta, tb = (torch.from_numpy(x) for x in (a, b)) if torch is not None else (None, None)
    t, matmul_median = alternate({"es": lambda: es.einsum("ij,jk->ik", a, b), "np": lambda: a @ b,
                                  "torch": (lambda: ta @ tb) if torch is not None else None}, min_time, SETTLE_S)
    rows.append((f"{n}^2 f64 matmul (numpy: a @ b)", t["es"], t["np"], t["torch"]))
    alone_best, alone_median = alone(n, 2 if args.quick else 5)
    rss = (peak_rss_kib(n, "import einstage", "einstage.einsum('ij,jk->ik', a, b)"), peak_rss_kib(n, "pass", "a @ b"))

    for name, (eq, shapes) in (("chain7 n=256", chain7()), ("grid4x4 bond 8", grid4x4())):
        ops = [rng.standard_normal(s) / np.sqrt(s[0]) for s in shapes]
        path, info = es.contract_path(eq, *ops)
        tops = [torch.from_numpy(o) for o in ops] if torch is not None else None
        t, _ = alternate({"es": lambda: es.contract(eq, *ops), "np": lambda: np.einsum(eq, *ops, optimize=True),
                       "torch": (lambda: torch_along(torch, info, tops)) if torch is not None else None}, min_time)
        rows.append((f"{name} contract", t["es"], t["np"], t["torch"]))
        loss = lambda *xs: es.sum(es.einsum(eq, *xs))  # noqa: E731
        vg = es.value_and_grad(loss, argnums=tuple(range(len(ops))))

        def torch_vg():
            ts = [x.detach().requires_grad_(True) for x in tops]
            value = torch_along(torch, info, ts).sum()
            value.backward()
            return value, [x.grad for x in ts]

        t, _ = alternate({"es": lambda: vg(*ops), "torch": torch_vg if torch is not None else None}, min_time)
        rows.append((f"{name} value_and_grad", t["es"], None, t["torch"]))

    def fmt(t):
        return "-" if t is None else (f"{t * 1e6:9.3f} us" if t < 1e-3 else f"{t * 1e3:9.3f} ms")

    def ratio(p, e):
        return "-" if p is None or e is None else f"{p / e:8.2f}x"

    print(f"{'workload':34} {'einstage':>12} {'numpy':>12} {'torch':>12} {'numpy/es':>9} {'torch/es':>9}")
    for name, e, npy, tch in rows:
        print(f"{name:34} {fmt(e):>12} {fmt(npy):>12} {fmt(tch):>12} {ratio(npy, e):>9} {ratio(tch, e):>9}")
    m = matmul_median
    print(f"{n}^2 matmul, median call: einstage {fmt(m['es'])}, numpy {fmt(m['np'])}, torch {fmt(m['torch'])}; "
          f"numpy/es {ratio(m['np'], m['es'])}, torch/es {ratio(m['torch'], m['es'])}")
    a_b, a_m = alone_best, alone_median
    print(f"{n}^2 matmul, each library alone in its own process: best einstage {fmt(a_b['es'])}, numpy "
          f"{fmt(a_b['np'])} (numpy/es {ratio(a_b['np'], a_b['es'])}); median einstage {fmt(a_m['es'])}, numpy "
          f"{fmt(a_m['np'])} (numpy/es {ratio(a_m['np'], a_m['es'])})")
    print(f"{n}^2 matmul in a fresh process, peak RSS: einstage {rss[0][0] / 1024:.1f} MiB, numpy a @ b "
          f"{rss[1][0] / 1024:.1f} MiB; above the peak after the imports (operands, result, copies): einstage "
          f"{rss[0][1] / 1024:.1f} MiB, numpy {rss[1][1] / 1024:.1f} MiB ({rss[0][1] / rss[1][1]:.3f}x)")
    if args.json:
        report = {"machine": machine, "command": " ".join(sys.argv),
                  "rows": [{"workload": name, "einstage_s": e, "numpy_s": npy, "torch_s": tch}
                           for name, e, npy, tch in rows],
                  "matmul_median_s": matmul_median,
                  "matmul_alone_best_s": alone_best, "matmul_alone_median_s": alone_median,
                  "matmul_peak_rss_kib": {"einstage": rss[0][0], "numpy": rss[1][0]},
                  "matmul_above_imports_kib": {"einstage": rss[0][1], "numpy": rss[1][1]}}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
