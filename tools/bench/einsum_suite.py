"""Peer side of einstage_bench_einsum_suite: NumPy and PyTorch run einsum-benchmark instances along the same
opt_einsum-style path as einstage, timed on request so the C++ driver can interleave its own runs with ours.

Line protocol on stdin/stdout (one reply line per command):
  load JSON DATA   -> "ok" | "error MESSAGE"   (DATA: every operand's f64 bytes as einstage holds them: column-major
                                                with the instance's shapes_colmajor, i.e. row-major reversed)
  time LIB N [MAX] -> "t1 t2 ... tN"          (LIB numpy | torch | numpy_plain; seconds per full contraction, after
                                                one warm-up; stops early once MAX seconds are spent, and reports the
                                                warm-up run alone if it took longer than MAX)
  sum LIB          -> "SUM"                   (sum of the result, to check agreement with einstage)
  info             -> "numpy X torch Y openblas CORE"
  quit
Pairwise steps only: NumPy's and torch's einsum accept 52 letters, the instances use thousands of labels, so each
step is renamed to letters; NumPy runs each pair with optimize=True (tensordot/BLAS where it applies), torch with
torch.einsum. Both on the threads the driver asks for (`--threads N`, default 1: the driver also sets
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS to N; torch.set_num_threads(N)).
"""
import json
import sys
import time

import numpy as np

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1

try:
    import torch
    torch.set_num_threads(THREADS)
except Exception:  # torch missing: its rows say n/a
    torch = None

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def split(fmt):
    inputs, output = fmt.split("->")
    return inputs.split(","), output


def pair_plan(fmt, path):
    """Pairwise steps (i, j, lhs, rhs, result) in letters, as opt_einsum's contract_path would run them."""
    terms, output = split(fmt)
    terms = [list(t) for t in terms]
    steps = []
    for step in path:
        i, j = sorted(step)
        a, b = terms[i], terms[j]
        rest = [t for k, t in enumerate(terms) if k not in (i, j)]
        keep = set(output)
        for t in rest:
            keep.update(t)
        result = []
        for label in a + b:
            if label in keep and label not in result:
                result.append(label)
        names = {}
        for label in a + b:
            names.setdefault(label, LETTERS[len(names)] if len(names) < len(LETTERS) else None)
        if None in names.values():
            raise ValueError("a pairwise step has more than 52 labels")
        spec = "".join(names[l] for l in a) + "," + "".join(names[l] for l in b) + "->" + "".join(names[l] for l in result)
        steps.append((i, j, spec))
        terms = rest + [result]
    if len(terms) == 1 and terms[0] != list(output):  # final transpose to the requested output order
        names = {l: LETTERS[k] for k, l in enumerate(terms[0])}
        steps.append((None, None, "".join(names[l] for l in terms[0]) + "->" + "".join(names[l] for l in output)))
    return steps


def run(lib, operands, steps):
    if lib == "numpy_plain":  # the whole einsum in one np.einsum call (small instances with letter labels)
        return np.einsum(state_fmt[0], *operands)
    ops = list(operands)
    for i, j, spec in steps:
        if i is None:
            ops = [np.einsum(spec, ops[0]) if lib == "numpy" else torch.einsum(spec, ops[0])]
            continue
        a, b = ops[i], ops[j]
        del ops[j]
        del ops[i]
        ops.append(np.einsum(spec, a, b, optimize=True) if lib == "numpy" else torch.einsum(spec, a, b))
    return ops[0]


state_fmt = [""]


def main():
    state = {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "quit":
                break
            if words[0] == "info":
                core = "n/a"
                try:
                    import ctypes
                    import numpy.core._multiarray_umath as m
                    lib = ctypes.CDLL(m.__file__)
                    lib.openblas_get_corename.restype = ctypes.c_char_p
                    core = lib.openblas_get_corename().decode()
                except Exception:
                    pass
                reply = f"numpy {np.__version__} torch {torch.__version__ if torch else 'n/a'} openblas {core}"
            elif words[0] == "load":
                inst = json.load(open(words[1]))
                # The row-major view of einstage's column-major bytes: every term and shape of the column-major form
                # reversed (this is exact even where an instance's two forms disagree, e.g. the bin_* diagnostics,
                # whose format_string_colmajor is not reversed).
                inputs, output = inst["format_string_colmajor"].split("->")
                inst["format_string"] = ",".join(t[::-1] for t in inputs.split(",")) + "->" + output[::-1]
                inst["shapes"] = [list(reversed(s)) for s in inst["shapes_colmajor"]]
                raw = np.fromfile(words[2], dtype=np.float64)
                operands, offset = [], 0
                for shape in inst["shapes"]:
                    size = int(np.prod(shape)) if shape else 1
                    operands.append(raw[offset:offset + size].reshape(shape))
                    offset += size
                path = [tuple(p) for p in inst["paths"]["opt_flops"]["path"]]
                state_fmt[0] = inst["format_string"]
                state = {"numpy": operands, "numpy_plain": operands, "steps": pair_plan(inst["format_string"], path), "warm": set()}
                if torch is not None:
                    state["torch"] = [torch.from_numpy(o) for o in operands]
                reply = "ok"
            elif words[0] == "time":
                lib, n = words[1], int(words[2])
                limit = float(words[3]) if len(words) > 3 else float("inf")
                if lib == "torch" and torch is None:
                    raise RuntimeError("torch is not installed")
                times = []
                if lib not in state["warm"]:
                    t0 = time.perf_counter()
                    run(lib, state[lib], state["steps"])
                    state["warm"].add(lib)
                    warm = time.perf_counter() - t0
                    if warm > limit:  # too slow to repeat: report the warm-up run itself
                        times = [warm]
                for _ in range(0 if times else n):
                    t0 = time.perf_counter()
                    run(lib, state[lib], state["steps"])
                    times.append(time.perf_counter() - t0)
                    if sum(times) > limit:
                        break
                reply = " ".join(f"{t:.9g}" for t in times)
            elif words[0] == "sum":
                r = run(words[1], state[words[1]], state["steps"])
                reply = f"{float(r.sum()):.17g}"
            else:
                reply = "error unknown command"
        except Exception as e:  # reported to the driver, which prints it in the row
            reply = "error " + str(e).replace("\n", " ")[:200]
        print(reply, flush=True)


if __name__ == "__main__":
    main()
