"""einstage from Python against its peers in the same run: call overhead, a large matmul, two contraction networks
and their value-and-gradient, in one table with the CPU (issue 36's targets).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/python_vs_peers.py [--quick]

Peers: NumPy (numpy.einsum with optimize=True, and a @ b for the matmul) and, when installed, PyTorch
(torch.einsum, and torch autograd for the gradients). For the networks torch contracts pairwise along einstage's own
path, so the comparison is of kernels, not of planners. Every row reports the best wall time per call over repeats
after a warm-up; all libraries use every CPU (torch.set_num_threads(os.cpu_count()), einstage's default). The 2048^2
matmul also reports the peak resident set of a fresh process doing only that call, for einstage and for NumPy, and
how far above the peak after the imports it went (the operands, the result and any copy).
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import einstage as es

try:
    import torch
except ImportError:  # the table then has no torch column
    torch = None


def best(fn, min_time):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > 20 * min_time:  # a peer this slow is timed by its warm-up call alone
        return first
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 3:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def per_call(fn, calls):
    fn()
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t.append((time.perf_counter() - t0) / calls)
    return min(t)


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


def torch_along(path_info, tensors):
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


# The high-water mark of a fresh process's resident set (VmHWM: ru_maxrss would carry the parent's over the fork)
# and what it was after the imports, so the matmul's own memory is the difference.
HWM = ("int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))")


def peak_rss_kib(imports, call):
    code = (f"import numpy as np; {imports}; base = {HWM}; a = np.ones(({N}, {N})); b = np.ones(({N}, {N})); "
            f"{call}; print(base, {HWM})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = map(int, out.stdout.split())
    return peak, peak - base


N = 2048  # the large matmul's size (1024 with --quick)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (for a smoke test)")
    args = parser.parse_args()
    min_time = 0.05 if args.quick else 0.5
    calls = 2000 if args.quick else 20000
    if torch is not None:
        torch.set_num_threads(os.cpu_count())
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
    print(f"cpu: {model}; {os.cpu_count()} CPUs; einstage threads {es.threads()}; numpy {np.__version__}; "
          f"torch {torch.__version__ if torch is not None else 'not installed'}")
    rows = []
    rng = np.random.default_rng(0)

    a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    expr = es.contract_expression("ij,jk->ik", a.shape, b.shape)
    ta, tb = (torch.from_numpy(x) for x in (a, b)) if torch is not None else (None, None)
    rows.append(("16x16 matmul einsum call", per_call(lambda: es.einsum("ij,jk->ik", a, b), calls),
                 per_call(lambda: np.einsum("ij,jk->ik", a, b), calls),
                 per_call(lambda: torch.einsum("ij,jk->ik", ta, tb), calls) if torch is not None else None))
    rows.append(("16x16 contract_expression call", per_call(lambda: expr(a, b), calls), None, None))

    global N
    n = N = 1024 if args.quick else 2048
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ta, tb = (torch.from_numpy(x) for x in (a, b)) if torch is not None else (None, None)
    rows.append((f"{n}^2 f64 matmul (numpy: a @ b)", best(lambda: es.einsum("ij,jk->ik", a, b), min_time),
                 best(lambda: a @ b, min_time), best(lambda: ta @ tb, min_time) if torch is not None else None))
    rss = (peak_rss_kib("import einstage", "einstage.einsum('ij,jk->ik', a, b)"), peak_rss_kib("pass", "a @ b"))

    for name, (eq, shapes) in (("chain7 n=256", chain7()), ("grid4x4 bond 8", grid4x4())):
        ops = [rng.standard_normal(s) / np.sqrt(s[0]) for s in shapes]
        path, info = es.contract_path(eq, *ops)
        tops = [torch.from_numpy(o) for o in ops] if torch is not None else None
        rows.append((f"{name} contract", best(lambda: es.contract(eq, *ops), min_time),
                     best(lambda: np.einsum(eq, *ops, optimize=True), min_time),
                     best(lambda: torch_along(info, tops), min_time) if torch is not None else None))
        loss = lambda *xs: es.sum(es.einsum(eq, *xs))  # noqa: E731
        vg = es.value_and_grad(loss, argnums=tuple(range(len(ops))))

        def torch_vg():
            ts = [t.detach().requires_grad_(True) for t in tops]
            value = torch_along(info, ts).sum()
            value.backward()
            return value, [t.grad for t in ts]

        rows.append((f"{name} value_and_grad", best(lambda: vg(*ops), min_time), None,
                     best(torch_vg, min_time) if torch is not None else None))

    def fmt(t):
        return "-" if t is None else (f"{t * 1e6:9.2f} us" if t < 1e-3 else f"{t * 1e3:9.3f} ms")

    print(f"{'workload':34} {'einstage':>12} {'numpy':>12} {'torch':>12} {'numpy/es':>9} {'torch/es':>9}")
    for name, e, npy, tch in rows:
        ratio = lambda p: "-" if p is None else f"{p / e:8.2f}x"  # noqa: E731
        print(f"{name:34} {fmt(e):>12} {fmt(npy):>12} {fmt(tch):>12} {ratio(npy):>9} {ratio(tch):>9}")
    print(f"{n}^2 matmul in a fresh process, peak RSS: einstage {rss[0][0] / 1024:.1f} MiB, numpy a @ b "
          f"{rss[1][0] / 1024:.1f} MiB; above the peak after the imports (operands, result, copies): einstage "
          f"{rss[0][1] / 1024:.1f} MiB, numpy {rss[1][1] / 1024:.1f} MiB ({rss[0][1] / rss[1][1]:.3f}x)")


if __name__ == "__main__":
    main()
