"""Traced programs from Python: values against NumPy, gradients against central finite differences (and
torch.autograd when torch is installed), grad(grad(f)), jvp/vjp adjointness, hvp, printing, lowering, saving,
symbolic dims, and the errors a traced function can make."""

import json

import numpy as np
import pytest

import einstage as es

RNG = np.random.default_rng(3636)


def rand(*shape):
    return RNG.standard_normal(shape)


def finite_difference(f, args, k, h=1e-6):
    """d f / d args[k] by central differences, element by element (f returns a float)."""
    x = np.array(args[k], dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += h
        minus[idx] -= h
        a = list(args)
        a[k] = plus
        fp = f(*a)
        a[k] = minus
        g[idx] = (fp - f(*a)) / (2 * h)
    return g


# (traced function, the same function in NumPy, argument shapes)
FUNCTIONS = [
    (lambda x, w: es.sum(es.einsum("ij,jk->ik", x, w) ** 2),
     lambda x, w: np.sum((x @ w) ** 2), [(3, 4), (4, 2)]),
    (lambda a, b, c: es.sum(es.tanh(es.einsum("ij,jk,kl->il", a, b, c))),
     lambda a, b, c: np.sum(np.tanh(a @ b @ c)), [(2, 3), (3, 4), (4, 2)]),
    (lambda x, v: es.sum(es.exp(x) * v + es.sin(x) / (2.0 + es.cos(v))),  # v broadcasts along axis 0
     lambda x, v: np.sum(np.exp(x) * v + np.sin(x) / (2.0 + np.cos(v))), [(3, 4), (4,)]),
    (lambda x: es.sum(es.reshape(x, (4, 3)) * np.arange(12.0).reshape(4, 3)),  # C-order reshape, a constant
     lambda x: np.sum(x.reshape(4, 3) * np.arange(12.0).reshape(4, 3)), [(3, 4)]),
    (lambda x, y: es.sum(x @ y.T) + es.sum(es.where(x > 0.0, x, 0.0)),
     lambda x, y: np.sum(x @ y.T) + np.sum(np.where(x > 0.0, x, 0.0)), [(3, 4), (2, 4)]),
    (lambda x: es.sum(es.log(1.0 + x * x)) - es.max(x) + es.sum(es.sqrt(x * x + 1.0), axis=0).sum(),
     lambda x: np.sum(np.log(1.0 + x * x)) - np.max(x) + np.sum(np.sqrt(x * x + 1.0)), [(5,)]),
]


@pytest.mark.parametrize("k", range(len(FUNCTIONS)))
def test_values_and_gradients(k):
    f, ref, shapes = FUNCTIONS[k]
    args = [rand(*s) for s in shapes]
    value = es.jit(f)(*args)
    assert value == pytest.approx(ref(*args), rel=1e-12, abs=1e-12)
    grads = es.grad(f, argnums=tuple(range(len(args))))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, finite_difference(ref, args, i), rtol=1e-5, atol=1e-6,
                                   err_msg=f"function {k}, argument {i}")
    v, g0 = es.value_and_grad(f)(*args)
    assert v == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(g0, grads[0], rtol=1e-12, atol=1e-14)


def test_gradients_match_torch_autograd():
    torch = pytest.importorskip("torch")
    a, b, c = rand(3, 5), rand(5, 4), rand(4, 3)
    got = es.grad(lambda a, b, c: es.sum(es.tanh(es.einsum("ij,jk,kl->il", a, b, c)) ** 2), argnums=(0, 1, 2))(
        a, b, c)
    ta, tb, tc = (torch.tensor(x, requires_grad=True) for x in (a, b, c))
    (torch.tanh(torch.einsum("ij,jk,kl->il", ta, tb, tc)) ** 2).sum().backward()
    for g, t in zip(got, (ta, tb, tc)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_grad_of_grad():
    cube = lambda s: s * s * s  # noqa: E731
    assert es.grad(es.grad(cube))(np.float64(1.5)) == pytest.approx(9.0)
    assert es.grad(es.grad(es.grad(cube)))(np.float64(1.5)) == pytest.approx(6.0)


def test_jvp_and_vjp_are_adjoint_and_hvp_matches_differences():
    f = lambda x, w: es.tanh(es.einsum("ij,jk->ik", x, w))  # noqa: E731
    x, w, tx, tw, c = rand(3, 4), rand(4, 2), rand(3, 4), rand(4, 2), rand(3, 2)
    out, tangent = es.jvp(f, (x, w), (tx, tw))
    np.testing.assert_allclose(out, np.tanh(x @ w), rtol=1e-12)
    value, pull = es.vjp(f, x, w)
    cx, cw = pull(c)
    assert np.sum(c * tangent) == pytest.approx(np.sum(cx * tx) + np.sum(cw * tw), rel=1e-10)
    loss = lambda x: es.sum(es.sin(x) * x)  # noqa: E731
    v = rand(3, 4)
    grad_np = lambda x: np.cos(x) * x + np.sin(x)  # noqa: E731
    h = 1e-6
    np.testing.assert_allclose(es.hvp(loss, (x,), (v,)), (grad_np(x + h * v) - grad_np(x - h * v)) / (2 * h),
                               rtol=1e-5, atol=1e-7)


def test_numpy_conventions_at_the_boundary():
    a = np.arange(24.0).reshape(2, 3, 4)
    assert np.array_equal(es.jit(lambda a: es.reshape(a, (4, 6)))(a), a.reshape(4, 6))        # C order
    assert np.array_equal(es.jit(lambda a: es.reshape(a, (4, 6), order="F"))(a), a.reshape(4, 6, order="F"))
    assert np.array_equal(es.jit(lambda a: a.reshape(-1))(a), a.reshape(-1))
    assert np.array_equal(es.jit(lambda a: es.transpose(a, (2, 0, 1)))(a), a.transpose(2, 0, 1))
    assert np.array_equal(es.jit(lambda a: a.T)(a), a.T)
    assert np.array_equal(es.jit(lambda a: es.sum(a, axis=(0, 2)))(a), a.sum(axis=(0, 2)))
    assert np.array_equal(es.jit(lambda a, b: a - b)(a, np.ones((3, 1))), a - np.ones((3, 1)))   # broadcasting
    assert es.jit(lambda a: a * 2)(np.arange(3)).dtype == np.int64
    assert es.jit(lambda a, b: a + b)(np.ones(3, np.float32), np.ones(3)).dtype == np.float64   # promotion
    assert np.array_equal(es.jit(lambda a: 1.0 / a)(np.array([1.0, 2.0])), [1.0, 0.5])
    text = str(es.trace(lambda a: es.reshape(a, (4, 6)), a))
    assert "transpose" in text and "reshape" in text  # the C-order reshape is visible in the program


def test_symbolic_dims_serve_many_shapes():
    p = es.trace(lambda x, w: es.einsum("ij,jk->ik", x, w), es.spec((None, 3)), es.spec((3, "k")))
    assert p.params == [("x", "f64", ("x_0", 3)), ("w", "f64", (3, "k"))]
    for n, k in ((2, 4), (5, 1), (0, 3)):
        x, w = rand(n, 3), rand(3, k)
        np.testing.assert_allclose(p(x, w), x @ w, rtol=1e-12)


def test_print_lower_json_dot_save_load(tmp_path):
    f = lambda x, w: es.sum(es.einsum("ij,jk->ik", x, w))  # noqa: E731
    x, w = rand(2, 3), rand(3, 4)
    p = es.trace(f, x, w)
    text = str(p)
    assert text.startswith("program @<lambda>") or text.startswith("program @lambda")
    assert 'einstage.einsum.v1(%x, %w)' in text and 'subscripts = "ij,jk->ik"' in text
    lowered = p.lower()
    assert "dot_general" in str(lowered) and "einsum" not in str(lowered)
    assert lowered(x, w) == pytest.approx(p(x, w), rel=1e-12)
    doc = json.loads(p.json())
    assert [q["name"] for q in doc["params"]] == ["x", "w"] and len(doc["instructions"]) == 2
    assert p.dot().startswith("digraph")
    for name in ("f.ir", "f.json"):
        p.save(tmp_path / name)
        q = es.Program.load(tmp_path / name)
        assert str(q) == text
        assert q(x, w) == pytest.approx(p(x, w), rel=1e-15)
    g = p.grad((0, 1))
    gx, gw = g(x, w)
    np.testing.assert_allclose(gx, np.ones((2, 4)) @ w.T, rtol=1e-12)
    np.testing.assert_allclose(gw, x.T @ np.ones((2, 4)), rtol=1e-12)


def test_jit_traces_once_per_shape():
    calls = []

    def f(x):
        calls.append(x.shape)
        return es.exp(x)

    jf = es.jit(f)
    for shape in ((2,), (2,), (3,), (2,)):
        np.testing.assert_allclose(jf(np.ones(shape)), np.exp(np.ones(shape)))
    assert calls == [(2,), (3,)]


def test_errors_in_traced_functions():
    with pytest.raises(TypeError) as info:
        es.trace(lambda x: 3.0, np.ones(2))
    assert str(info.value) == ("the traced function '<lambda>' returned a float as output 0, not a traced tensor; "
                               "return values computed from its arguments")

    class Boom(Exception):
        pass

    boom = Boom("inside")

    def raises(x):
        raise boom

    with pytest.raises(Boom) as info:
        es.trace(raises, np.ones(2))
    assert info.value is boom  # unchanged
    assert es._trace._traces() == []  # no half-built trace left behind
    with pytest.raises(TypeError) as info:
        es.trace(lambda x: x if x > 0 else -x, np.ones(2))
    assert "einstage.where" in str(info.value)
    with pytest.raises(ValueError) as info:
        es.jit(lambda a, b: a + b)(np.ones(2), np.ones(3))
    assert str(info.value) == "operands could not be broadcast together with shapes (2,) (3,) (axis 0: 2 vs 3)"
    with pytest.raises(ValueError) as info:
        es.grad(lambda x: es.exp(x))(np.ones(2))  # not a scalar
    assert "scalar" in str(info.value)
    with pytest.raises(TypeError) as info:
        es.jit(lambda x: np.exp(x))(np.ones(2))
    assert "einstage functions of the same name" in str(info.value)


def test_linalg_in_traces_with_numpys_layout_and_gradients():
    b = rand(2, 5, 4, 3)  # NumPy's batch axes on the left
    u, s, vh = es.jit(lambda a: es.linalg.svd(a, full_matrices=False))(b)
    assert (u.shape, s.shape, vh.shape) == ((2, 5, 4, 3), (2, 5, 3), (2, 5, 3, 3))
    np.testing.assert_allclose(s, np.linalg.svd(b, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(np.einsum("...ik,...k,...kj->...ij", u, s, vh), b, atol=1e-12)
    q, r = es.jit(es.linalg.qr)(b)
    np.testing.assert_allclose(q @ r, b, atol=1e-12)
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(b)[1]), atol=1e-12)
    h = b[..., :3, :] + np.swapaxes(b[..., :3, :], -1, -2)
    w, v = es.jit(es.linalg.eigh)(h)
    np.testing.assert_allclose(w, np.linalg.eigh(h)[0], atol=1e-12)
    assert es.linalg.svd(b[0, 0], full_matrices=False)[1] == pytest.approx(np.linalg.svd(b[0, 0])[1])  # NumPy's

    a, c, d = rand(4, 3), rand(3, 3), rand(4, 3)
    nuclear = es.grad(lambda a: es.sum(es.linalg.svd(a, full_matrices=False)[1]))(a)
    un, _, vhn = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(nuclear, un @ vhn, atol=1e-12)  # d sum(s) / dA = U Vh
    qr_loss = lambda a: es.sum(es.linalg.qr(a)[1] * c) + es.sum(es.linalg.qr(a)[0] * d)  # noqa: E731
    qr_np = lambda a: np.sum(np.linalg.qr(a)[1] * c) + np.sum(np.linalg.qr(a)[0] * d)  # noqa: E731
    np.testing.assert_allclose(es.grad(qr_loss)(a), finite_difference(qr_np, [a], 0), rtol=1e-5, atol=1e-6)
    hs = a[:3] + a[:3].T
    eig_loss = lambda h: es.sum(es.linalg.eigh(h)[0] * np.arange(1.0, 4.0))  # noqa: E731
    eig_np = lambda h: np.sum(np.linalg.eigh(h)[0] * np.arange(1.0, 4.0))  # noqa: E731
    # LAPACK reads the lower triangle, so differences see a lower-triangular gradient D; einstage's is the symmetric
    # one (JAX's and torch's convention): the same derivative along every symmetric direction, (D + D^T) / 2.
    lower = finite_difference(eig_np, [hs], 0)
    np.testing.assert_allclose(es.grad(eig_loss)(hs), (lower + lower.T) / 2, rtol=1e-5, atol=1e-6)
    printed = str(es.trace(lambda a: es.linalg.svd(a, full_matrices=False), b))
    assert "einstage.linalg.v1" in printed and "op = svd" in printed and "transpose" in printed
    with pytest.raises(ValueError) as info:
        es.trace(lambda a: es.linalg.qr(a), np.ones(3))
    assert str(info.value) == ("qr: 1-dimensional array given; the array must be at least two-dimensional")


def test_transformed_functions_inside_a_trace():
    f = lambda x: es.sum(es.sin(x) * x)  # noqa: E731
    x = rand(4)
    df = lambda x: np.cos(x) * x + np.sin(x)  # noqa: E731
    np.testing.assert_allclose(es.jit(lambda x: es.grad(f)(x) * 2.0)(x), 2 * df(x), rtol=1e-12)
    # a gradient through an inlined gradient: the second derivative, elementwise
    np.testing.assert_allclose(es.grad(lambda x: es.sum(es.grad(f)(x)))(x), 2 * np.cos(x) - x * np.sin(x),
                               rtol=1e-12)
    v, (g,) = es.jit(lambda x: es.value_and_grad(f, argnums=(0,))(x))(x)
    assert v == pytest.approx(np.sum(np.sin(x) * x)) and np.allclose(g, df(x))
    p = es.trace(lambda x: es.grad(f)(x), es.spec((None,)))  # symbolic dims pass through the inlined program
    np.testing.assert_allclose(p(np.ones(7)), df(np.ones(7)), rtol=1e-12)
    assert "sin" in str(p) and "cos" in str(p)


def test_two_python_threads_trace_and_run_at_once():
    import threading

    results, errors = {}, []

    def work(k):
        try:
            x = rand(30, 30) * (k + 1)
            f = es.jit(lambda a: es.sum(es.tanh(a @ a)) * float(k))
            for _ in range(20):
                results[k] = (f(x), float(k) * np.sum(np.tanh(x @ x)))
        except Exception as e:  # reported below, with the thread's index
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, (got, want) in results.items():
        assert got == pytest.approx(want, rel=1e-12), k
