"""einstage's Python API beyond the random einsums: paths (einsum_path, contract_path against a brute-force optimum,
explicit paths), contract_expression reuse, memory_limit slicing, zero copies, views, GIL release, no leak, and bad
input raising the right exception with its message pinned."""

import itertools
import resource
import threading
import time
import tracemalloc

import numpy as np
import pytest

import einstage
from einstage import _einstage

RNG = np.random.default_rng(36)


def rand(*shape):
    return RNG.standard_normal(shape)


# ---- paths ----

def brute_force_flops(terms, output, sizes):
    """The cheapest total of pairwise multiply-adds over every contraction order (the cost model of
    docs/planning.md: a step costs the product of the extents of the labels of both operands; a label is kept while
    the output or another operand still has it). Written independently of einstage's planner."""
    best = [float("inf")]

    def go(ops, cost):
        if cost >= best[0]:
            return
        if len(ops) == 1:
            best[0] = cost
            return
        for i, j in itertools.combinations(range(len(ops)), 2):
            rest = [o for k, o in enumerate(ops) if k not in (i, j)]
            union = ops[i] | ops[j]
            keep = set(output).union(*rest) if rest else set(output)
            step = float(np.prod([sizes[c] for c in union]))
            go(rest + [frozenset(c for c in union if c in keep)], cost + step)

    go([frozenset(t) for t in terms], 0.0)
    return best[0]


NETWORKS = [
    ("ab,bc,cd,de->ae", {"a": 2, "b": 30, "c": 3, "d": 40, "e": 5}),
    ("ab,bc,ca->", {"a": 7, "b": 8, "c": 9}),
    ("ea,fb,abcd,gc,hd->efgh", {"a": 4, "b": 5, "c": 6, "d": 7, "e": 3, "f": 2, "g": 8, "h": 3}),
    ("ij,jk,kl,lm,mi->", {"i": 3, "j": 10, "k": 2, "l": 9, "m": 4}),
    ("abc,cd,dbe,ef->af", {"a": 6, "b": 2, "c": 7, "d": 3, "e": 8, "f": 5}),
]


@pytest.mark.parametrize("eq,sizes", NETWORKS)
def test_contract_path_optimal_matches_brute_force(eq, sizes):
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    ops = [rand(*[sizes[c] for c in t]) for t in terms]
    path, info = einstage.contract_path(eq, *ops, optimize="optimal")
    assert info.opt_cost == pytest.approx(brute_force_flops(terms, out, sizes))
    assert len(path) == len(terms) - 1 and all(isinstance(p, tuple) and len(p) == 2 for p in path)
    # the path is a valid opt_einsum path: NumPy computes the same value along it
    np.testing.assert_allclose(einstage.contract(eq, *ops, optimize=path),
                               np.einsum(eq, *ops, optimize=["einsum_path", *path]), rtol=1e-10, atol=1e-10)
    assert info.largest_intermediate == max(s["result_size"] for s in info.steps)
    assert info.speedup == pytest.approx(info.naive_cost / info.opt_cost)
    assert info.size_dict == sizes


def test_einsum_path_has_numpys_format():
    a, b, c = rand(2, 30), rand(30, 3), rand(3, 40)
    path, text = einstage.einsum_path("ab,bc,cd->ad", a, b, c, optimize="optimal")
    assert path[0] == "einsum_path" and path[1:] == [(0, 1), (0, 1)]
    assert "ab,bc,cd->ad" in text and "tree: [(0,1),(3,2)]" in text
    # NumPy takes einstage's path back
    np.testing.assert_allclose(np.einsum("ab,bc,cd->ad", a, b, c, optimize=path),
                               einstage.einsum("ab,bc,cd->ad", a, b, c, optimize=path))


def test_optimize_spellings_give_numpys_values():
    ops = [rand(3, 4), rand(4, 5), rand(5, 6), rand(6, 3)]
    want = np.einsum("ab,bc,cd,da->", *ops, optimize=False)
    for optimize in (True, False, "greedy", "optimal", "dp", "auto", "auto-hq", "anneal(budget=0.05,seed=3)",
                     "left_to_right", [(0, 1), (0, 1), (0, 1)], ["einsum_path", (2, 3), (0, 2), (0, 1)],
                     [(0, 1, 2, 3)], [(1,), (0, 1, 2, 3)], ("greedy", 10**6)):
        got = einstage.einsum("ab,bc,cd,da->", *ops, optimize=optimize)
        assert got == pytest.approx(want, rel=1e-10), optimize


def test_explicit_path_with_one_operand_steps_maps_to_pairwise_tree():
    assert einstage._paths.path_to_tree([(1,), (0, 1)], 2) == [(0, 1)]
    assert einstage._paths.path_to_tree([(0, 1, 2)], 3) == [(0, 1), (3, 2)]
    assert einstage._paths.path_to_tree([(2, 3), (0, 1), (0, 1)], 4) == [(2, 3), (0, 1), (4, 5)]


def test_contract_expression_reuses_its_plan():
    expr = einstage.contract_expression("ij,jk,kl->il", (8, 9), (9, 10), (10, 3))
    before = _einstage.cache_stats()
    for _ in range(3):
        ops = [rand(8, 9), rand(9, 10), rand(10, 3)]
        np.testing.assert_allclose(expr(*ops), np.einsum("ij,jk,kl->il", *ops), rtol=1e-12)
    after = _einstage.cache_stats()
    assert (after["hits"], after["misses"]) == (before["hits"], before["misses"])  # never the one-shot cache
    assert len(expr._plans) == 1
    ops32 = [rand(8, 9).astype(np.float32), rand(9, 10).astype(np.float32), rand(10, 3).astype(np.float32)]
    assert expr(*ops32).dtype == np.float32 and len(expr._plans) == 2
    out = np.empty((8, 3))
    assert expr(*[o.astype(np.float64) for o in ops32], out=out) is out
    assert expr.path == einstage.contract_path("ij,jk,kl->il", (8, 9), (9, 10), (10, 3), shapes=True)[0]


def test_memory_limit_slices_and_keeps_the_value():
    # a ring of three 8x3x8 tensors and a 3x3x3 core: every order makes an intermediate of 576 elements
    ops = [rand(8, 3, 8), rand(8, 3, 8), rand(8, 3, 8), rand(3, 3, 3)]
    eq = "aib,bjc,cka,ijk->"
    unsliced = einstage.contract_path(eq, *ops)[1]
    assert unsliced.largest_intermediate > 200 and not unsliced.sliced and unsliced.num_slices == 1
    path, info = einstage.contract_path(eq, *ops, memory_limit=200)
    assert info.sliced and info.num_slices > 1 and info.largest_intermediate <= 200
    want = np.einsum(eq, *ops)
    np.testing.assert_allclose(einstage.contract(eq, *ops, memory_limit=200), want, rtol=1e-10)
    expr = einstage.contract_expression(eq, *[o.shape for o in ops], memory_limit=200)
    np.testing.assert_allclose(expr(*ops), want, rtol=1e-10)
    np.testing.assert_allclose(einstage.einsum(eq, *ops, optimize=("greedy", 200)), want, rtol=1e-10)


# ---- zero copies, views, layouts ----

def test_operands_are_read_in_place():
    a = np.asfortranarray(rand(512, 512))  # 2 MiB
    c = np.ascontiguousarray(a)
    tracemalloc.start()
    try:
        for x in (a, a.T, c, a[::2, ::-3], np.broadcast_to(c[:1], (512, 512))):
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            einstage.einsum("ij,ij->i", x, x)
            # NumPy's allocations are traced: a copy of an operand would show here
            assert tracemalloc.get_traced_memory()[1] - before < 64 * 1024
    finally:
        tracemalloc.stop()


def test_result_is_written_by_einstage_into_numpy_memory():
    a, b = rand(5, 6), rand(6, 7)
    c = einstage.einsum("ij,jk->ik", a, b)
    assert c.flags.owndata and c.flags.c_contiguous
    out = np.zeros((7, 10))[:, ::2].T  # a strided, transposed out
    assert einstage.einsum("ij,jk->ik", a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert einstage.einsum("ij,jk->ik", a, b, order="F").flags.f_contiguous


def test_one_operand_without_sums_is_a_view():
    a = np.arange(27.0)
    a.shape = (3, 3, 3)
    d = einstage.einsum("ii...->...i", a)
    assert d.base is a and d.flags.writeable
    d[0, 0] = -1
    assert a[0, 0, 0] == -1
    t = einstage.einsum("ijk->kji", a)
    assert np.shares_memory(t, a)
    s = einstage.einsum("ijk->k", a)  # a sum: a new array
    assert not np.shares_memory(s, a)


def test_scalars_come_back_as_numpy_does():
    x = einstage.einsum("i,i", np.arange(3.0), np.arange(3.0))
    assert isinstance(x, np.float64) and x == 5.0
    out = np.zeros(())
    assert einstage.einsum("i,i", np.arange(3.0), np.arange(3.0), out=out) is out and out[()] == 5.0
    assert einstage.einsum(",", 3, 4) == 12 and isinstance(einstage.einsum(",", 3, 4), np.int64)


def test_integer_results_wrap_as_numpys():
    a = np.full(10, 100, dtype=np.int8)
    got = einstage.einsum("i,i", a, a)
    assert got.dtype == np.int8 and got == np.einsum("i,i", a, a)
    u = np.array([2**63 + 5, 3], dtype=np.uint64)
    assert einstage.einsum("i,i->i", u, u).tolist() == np.einsum("i,i->i", u, u).tolist()


# ---- threads and resources ----

def test_gil_is_released_while_contracting():
    a = rand(700, 700)
    done = threading.Event()
    ticks = 0

    def work():
        for _ in range(4):
            einstage.einsum("ij,jk,kl->il", a, a, a, optimize=False)
        done.set()

    t = threading.Thread(target=work)
    start = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0)
    t.join()
    elapsed = time.perf_counter() - start
    # With the GIL held for the whole contraction the loop would barely run; released, it spins all along.
    assert elapsed > 0.02 and ticks > 100, (elapsed, ticks)


def test_no_leak_over_many_calls():
    a, b = rand(4, 4), rand(4, 4)
    out = np.empty((4, 4))

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    for _ in range(20000):
        einstage.einsum("ij,jk->ik", a, b)
    before = rss_kib()
    for _ in range(100000):
        einstage.einsum("ij,jk->ik", a, b)
        einstage.einsum("ij,jk->ik", a, b, out=out)
    assert rss_kib() - before < 4096


# ---- bad input: the exception and its message ----

def error_of(f):
    with pytest.raises(Exception) as info:
        f()
    return type(info.value), str(info.value)


def test_messages_are_pinned():
    a = np.ones((2, 3))
    assert error_of(lambda: einstage.einsum("ij,jk->ik", a, np.ones((4, 5)))) == (
        ValueError, "einsum \"ij,jk->ik\": label 'j' has extent 3 in operand 0 (axis 1) but 4 in operand 1 (axis 0); "
                    "the extents of a label must agree (or one of them be 1 with broadcasting allowed)\n"
                    "  ij,jk->ik\n   ^ ^")
    assert error_of(lambda: einstage.einsum("ij,jk->ix", a, a.T)) == (
        ValueError, "einsum \"ij,jk->ix\": output label 'x' appears in no input term; add it to an input term or "
                    "remove it from the output\n  ij,jk->ix\n          ^")
    assert error_of(lambda: einstage.einsum("i", np.ones(3, np.float16) * 2, np.ones(3))) == (
        ValueError, "einsum \"i\": 2 operands given but the subscripts have 1 input terms")
    assert error_of(lambda: einstage.einsum("i,i", np.ones(3, np.float16), np.ones(3, np.float16))) == (
        TypeError, "einsum: dtype float16 (<f2) is not supported: einstage computes in float32, float64, complex64, "
                   "complex128 and int64 (bool and the other integer types through int64); convert the operands "
                   "first, e.g. a.astype(numpy.float64)")
    assert error_of(lambda: einstage.einsum("i%", a)) == (
        ValueError, "einsum 'i%': invalid subscript '%'; subscripts must be letters (NumPy's rule; ',', '->', '...', "
                    "spaces and einstage's parentheses for the contraction order are the only other characters)")
    assert error_of(lambda: einstage.einsum("ij->jij", a)) == (
        ValueError, "einsum 'ij->jij': output subscript 'j' appears more than once; NumPy allows each output label "
                    "once")
    assert error_of(lambda: einstage.einsum("...ij->ij", np.ones((2, 2, 2)))) == (
        ValueError, "einsum '...ij->ij': the '...' of operand 0 covers 1 axes but the output has no '...'; NumPy does "
                    "not sum ellipsis axes implicitly: add '...' to the output or name those axes")
    assert error_of(lambda: einstage.einsum("ij->ji", a, out=np.ones((2, 3)))) == (
        ValueError, "einsum: the output tensor is f64[2,3] but the result is f64[3,2]")
    ro = np.ones((3, 2))
    ro.flags.writeable = False
    assert error_of(lambda: einstage.einsum("ij->ji", a, out=ro)) == (
        ValueError, "einsum: out is read-only; pass a writeable array")
    assert error_of(lambda: einstage.einsum("ij->ji", a, out="test")) == (
        TypeError, "einsum: out must be a numpy.ndarray, not str")
    assert error_of(lambda: einstage.einsum("ij,jk", a, a.T, dtype=np.float32)) == (
        TypeError, "einsum: cannot cast operand 0 from dtype('float64') to dtype('float32') according to the rule "
                   "'safe'")
    assert error_of(lambda: einstage.einsum("ij,jk", a, a.T, optimize="bogus")) == (
        ValueError, "plan spec \"bogus\" at column 1: unknown plan kind 'bogus'; expected auto, greedy, optimal, "
                    "anneal, left_to_right, path[...] or tree[...]")
    assert error_of(lambda: einstage.einsum("ij,jk,kl", a, a.T, a, optimize=[(0, 1)])) == (
        RuntimeError, "invalid contraction path [(0, 1)]: it leaves 2 operands uncontracted; a path must reduce the "
                      "3 operands to one")
    assert error_of(lambda: einstage.einsum(a, [0, 52])) == (
        ValueError, "einsum: subscript 52 is not within the valid range [0, 52)")
    assert error_of(lambda: einstage.einsum(a, 5)) == (
        TypeError, "einsum: the sublist of operand 0 must be a list of integer subscripts, not int; the interleaved "
                   "form is einsum(a, [0, 1], b, [1, 2], [0, 2])")
    assert error_of(lambda: einstage.einsum("ij->i", np.ones((2, 3), dtype=object))) == (
        TypeError, "einsum: dtype object (|O) is not supported: einstage computes in float32, float64, complex64, "
                   "complex128 and int64 (bool and the other integer types through int64); convert the operands "
                   "first, e.g. a.astype(numpy.float64)")
    big = np.broadcast_to(np.ones(1), (2**30,))
    assert error_of(lambda: einstage.einsum("i,j,k->ijk", big, big, big)) == (
        MemoryError, "einsum \"i,j,k->ijk\": step 0: the result of shape [1073741824,1073741824] needs more bytes "
                     "than fit in 64 bits (1152921504606846976 elements of 8 bytes)")
    expr = einstage.contract_expression("ij,jk", (2, 3), (3, 4))
    assert error_of(lambda: expr(a, np.ones((4, 5)))) == (
        ValueError, "einsum: operand 1 is f64[4,5] but the plan was prepared for f64[3,4]; prepare a plan for these "
                    "operands")
    assert error_of(lambda: einstage.contract("ab,bc->ac", a, a.T, memory_limit=0)) == (
        ValueError, "memory_limit must be at least 1 element (the largest intermediate of one slice), not 0")
    assert error_of(lambda: _einstage.einsum("ij", [a.astype(np.float16)])) == (
        TypeError, "operand 0 has dtype float16, which einstage does not compute in; pass float32, float64, "
                   "complex64, complex128 or int64 (einstage.einsum converts other dtypes itself)")
    assert error_of(lambda: _einstage.einsum("ij", [[1.0]])) == (TypeError, "operand 0 is a list, not a numpy.ndarray")


def test_non_array_operands_are_named():
    a = np.ones((2, 3))
    assert error_of(lambda: einstage.einsum("ij,jk->ik", a, "text")) == (
        TypeError, "einsum: operand 1 is a str, not an array of numbers (numpy.asarray makes it dtype <U4); pass a "
                   "numpy.ndarray, a torch tensor or anything with __array__ of a numeric dtype")
    assert error_of(lambda: einstage.contract("ij,jk->ik", {"a": 1}, a.T)) == (
        TypeError, "einsum: operand 0 is a dict, not an array of numbers (numpy.asarray makes it dtype object); pass "
                   "a numpy.ndarray, a torch tensor or anything with __array__ of a numeric dtype")
    expr = einstage.contract_expression("ij,jk", (2, 3), (3, 4))
    assert error_of(lambda: expr(a, None)) == (
        TypeError, "einsum: operand 1 is a NoneType, not an array of numbers (numpy.asarray makes it dtype object); "
                   "pass a numpy.ndarray, a torch tensor or anything with __array__ of a numeric dtype")
    assert einstage.einsum("i,i", [1, 2], (3, 4)) == 11  # sequences of numbers are arrays, as in NumPy


def test_out_overlapping_an_operand_gets_numpys_value():
    for make_out in (lambda x, y: x, lambda x, y: y, lambda x, y: y.T, lambda x, y: x[:, ::-1]):
        x, y = np.arange(9.0).reshape(3, 3), np.arange(9.0, 18.0).reshape(3, 3)
        want = np.einsum("ij,jk->ik", x, y)
        out = make_out(x, y)
        assert einstage.einsum("ij,jk->ik", x, y, out=out) is out
        np.testing.assert_array_equal(out, want)


def test_the_compiled_calls_leave_everything_but_the_common_case_to_python():
    """einstage.einsum and ContractExpression.__call__ are compiled (python/src/FastCall.h); every argument they do
    not handle must give what the Python path gives."""
    import inspect
    assert str(inspect.signature(einstage.einsum)) == \
        "(*operands, out=None, dtype=None, order='K', casting='safe', optimize=True)"
    assert einstage.einsum.__name__ == "einsum" and "numpy.einsum on einstage" in einstage.einsum.__doc__
    f, g = np.asfortranarray(rand(4, 5)), np.asfortranarray(rand(5, 6))
    for kwargs in ({}, {"order": "C"}, {"order": "K"}, {"optimize": True}, {"optimize": "greedy"},
                   {"casting": "same_kind"}, {"dtype": np.float64}, {"out": None}):
        got, want = einstage.einsum("ij,jk->ik", f, g, **kwargs), np.einsum("ij,jk->ik", f, g, **kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-13)
        assert (got.flags.c_contiguous, got.flags.f_contiguous) == (want.flags.c_contiguous, want.flags.f_contiguous)
    # Two C-ordered operands whose result is contiguous along the second's label run as C^T = B^T A^T (the
    # executor's step orientation, extensions/einsum/exec/StepOrientation.h): the values and layout are the call's.
    c, d = rand(3, 5), rand(5, 7)
    for eq in ("ij,jk->ik", "ij,jk->ki", "ij,kj->ik", "ji,jk->ik"):
        x, y = (c, d) if eq != "ij,kj->ik" else (c, d.T.copy())
        x = x if eq != "ji,jk->ik" else c.T.copy()
        got, want = einstage.einsum(eq, x, y), np.einsum(eq, x, y)
        np.testing.assert_allclose(got, want, rtol=1e-13)
        assert got.flags.c_contiguous and np.array_equal(got, einstage.einsum(eq, x, y))
    mixed = einstage.einsum("ij,jk->ik", f.astype(np.float32), g)
    assert mixed.dtype == np.float64
    scalar = einstage.einsum("i,i", np.ones(3), np.ones(3))
    assert type(scalar) is np.float64 and scalar == 3.0
    expr = einstage.contract_expression("ij,jk", (4, 5), (5, 6))
    assert str(inspect.signature(expr.__call__)) == "(*arrays, out=None, dtype=None, order='K', casting='safe')"
    np.testing.assert_allclose(expr(f, g), f @ g, rtol=1e-13)
    assert expr(f, g).flags.f_contiguous and expr(f, g, order="C").flags.c_contiguous
    assert error_of(lambda: expr(f)) == (ValueError, "contract_expression 'ij,jk': 1 arrays given for 2 operands")
    assert error_of(lambda: expr(f, g, casting="bogus")) == (
        ValueError, "einsum: casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe', not 'bogus'")
    assert error_of(lambda: expr(f, g, bogus=1)) == (
        TypeError, "ContractExpression._call() got an unexpected keyword argument 'bogus'")


def test_garbage_arguments_never_crash():
    rng = np.random.default_rng(7)
    junk = [None, 0, 1.5, "ij", "", "->", "...", [0, 1], [Ellipsis], object(), np.ones(2), np.ones((2, 2)),
            np.ones(0), np.array("x"), {"a": 1}, b"ij", [[0, 1]], -1, 2**70, [0.5], "ij,jk->ik", "a" * 300]
    for _ in range(3000):
        args = [junk[int(i)] for i in rng.integers(0, len(junk), size=int(rng.integers(0, 5)))]
        try:
            einstage.einsum(*args)
        except (ValueError, TypeError, MemoryError, RuntimeError, OverflowError):
            pass


def test_set_num_threads_keeps_the_bits():
    original = einstage.threads()
    ops = [rand(40, 50), rand(50, 60), rand(60, 30)]
    expr = einstage.contract_expression("ab,bc,cd->ad", *[o.shape for o in ops])
    program = einstage.jit(lambda a, b, c: einstage.einsum("ab,bc,cd->ad", a, b, c))
    results = []
    try:
        for n in (1, 2, 3):
            einstage.set_num_threads(n)
            assert einstage.threads() == n
            results.append((einstage.einsum("ab,bc,cd->ad", *ops), expr(*ops), program(*ops)))
    finally:
        einstage.set_num_threads(original)
    assert einstage.threads() == original
    for r in results[1:]:
        for got, first in zip(r, results[0]):
            assert np.array_equal(got, first)  # bitwise: results never depend on the thread count
    np.testing.assert_allclose(results[0][0], ops[0] @ ops[1] @ ops[2], rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError) as info:
        einstage.set_num_threads(-1)
    assert str(info.value) == "set_num_threads: -1 threads; pass 1 or more (0: every CPU)"


def test_torch_tensors_are_read_without_a_copy():
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(rand(256, 300))
    u = torch.from_numpy(rand(300, 128))
    tracemalloc.start()
    try:
        for x, y in ((t, u), (t.T.contiguous().T, u), (t[::2], u[:, ::3])):
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            got = einstage.einsum("ij,jk->ik", x, y)
            grown = tracemalloc.get_traced_memory()[1] - before
            assert grown < x.shape[0] * y.shape[1] * 8 + 64 * 1024  # the result only, no operand copied
            np.testing.assert_allclose(got, (x @ y).numpy(), rtol=1e-12, atol=1e-12)
    finally:
        tracemalloc.stop()
    with pytest.raises(RuntimeError) as info:
        einstage.einsum("i->", torch.ones(3, requires_grad=True))
    assert "detach" in str(info.value)


def test_the_compiled_module_refuses_junk_without_crashing():
    """The binding's own argument conversion, called directly with wrong types and values."""
    rng = np.random.default_rng(11)
    junk = [None, 0, -1, 2**70, 1.5, "", "ij", "ij,jk->ik", "\x00", "é,é", [], [np.ones(2)], (np.ones((2, 2)),) * 2,
            np.ones(2), np.ones((2, 2), np.float16), np.ones(3, dtype=object), object(), {"a": 1}, b"ij", "C", "Q",
            "auto", "tree[(0,1)]", "bogus(", np.float64(2.0)]
    calls = [_einstage.einsum, _einstage.einsum_entry, _einstage.single_view, _einstage.plan_info,
             _einstage.normalize_plan, _einstage.Plan, _einstage.dtype_name]
    for _ in range(4000):
        fn = calls[int(rng.integers(0, len(calls)))]
        args = [junk[int(i)] for i in rng.integers(0, len(junk), size=int(rng.integers(0, 6)))]
        try:
            fn(*args)
        except (ValueError, TypeError, MemoryError, RuntimeError, OverflowError, NotImplementedError):
            pass
