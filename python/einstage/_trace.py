"""Traced programs from Python: trace / jit, grad, value_and_grad, jvp, vjp, hvp, and NumPy-named functions that
trace when given traced tensors.

A function is traced by calling it once on ``Traced`` tensors (parameters of a C++ TraceContext); what it does to
them is recorded as an einstage Program (docs/guide.md, "Trace a program"), which the C++ Runtime plans on first run
per shape and runs. The NumPy conventions are applied here, on top of einstage's own ops, and show in the printed
program:

* binary operators broadcast as NumPy does (an explicit ``broadcast_in_dim`` where shapes differ) and promote dtypes
  as NumPy does (a ``convert``); Python scalars stay scalars;
* ``reshape`` takes ``order='C'`` by default as NumPy's does: einstage's reshape is column-major, so a C-order
  reshape is a transpose, a reshape of the reversed shape and a transpose back;
* ``grad(f, argnums)`` follows JAX: ``f`` returns a real scalar; transformations compose (``grad(grad(f))``) at the
  program level (the C++ AD passes applied in turn), as in the C++ API.
"""

import builtins
import inspect
import threading

import numpy as np

from . import _einstage

_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.complex64): "c64",
          np.dtype(np.complex128): "c128", np.dtype(np.int64): "i64"}


def _ename(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _NAMES:
        raise TypeError(f"traced tensors have dtype float32, float64, complex64, complex128 or int64, not {dtype}")
    return _NAMES[dtype]


class Condition:
    """``a < b`` on traced tensors: only usable as the condition of ``einstage.where``."""

    def __init__(self, cmp, a, b):
        self.cmp, self.a, self.b = cmp, a, b

    def __bool__(self):
        raise TypeError("a comparison of traced tensors has no truth value while tracing; use einstage.where(cond, "
                        "x, y) to choose elementwise")


class Traced:
    """A tensor inside a trace: NumPy's operators and a few methods, recorded as einstage ops."""

    __array_priority__ = 1000

    def __init__(self, t):
        self._t = t

    shape = property(lambda self: self._t.shape)
    dtype = property(lambda self: self._t.dtype)
    ndim = property(lambda self: self._t.ndim)
    T = property(lambda self: transpose(self))
    real = property(lambda self: _unary("real", self))
    imag = property(lambda self: _unary("imag", self))

    def __repr__(self):
        return f"Traced(shape={self.shape}, dtype={self.dtype})"

    def __bool__(self):
        raise TypeError("a traced tensor has no value while tracing, so it cannot decide an if or a while; use "
                        "einstage.where for elementwise choices")

    def __array__(self, *args, **kwargs):
        raise TypeError("a traced tensor has no value while tracing; NumPy functions cannot read it (use the "
                        "einstage functions of the same name)")

    __add__ = lambda self, o: _binary("add", self, o)
    __radd__ = lambda self, o: _binary("add", o, self)
    __sub__ = lambda self, o: _binary("sub", self, o)
    __rsub__ = lambda self, o: _binary("sub", o, self)
    __mul__ = lambda self, o: _binary("mul", self, o)
    __rmul__ = lambda self, o: _binary("mul", o, self)
    __truediv__ = lambda self, o: _binary("div", self, o)
    __rtruediv__ = lambda self, o: _binary("div", o, self)
    __neg__ = lambda self: _unary("neg", self)
    __pos__ = lambda self: self
    __matmul__ = lambda self, o: matmul(self, o)
    __rmatmul__ = lambda self, o: matmul(o, self)
    __lt__ = lambda self, o: Condition("lt", self, o)
    __le__ = lambda self, o: Condition("le", self, o)
    __gt__ = lambda self, o: Condition("gt", self, o)
    __ge__ = lambda self, o: Condition("ge", self, o)

    def __pow__(self, p):
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            if p == 2:
                return self * self
            return Traced(_einstage.t_scalar("pow", self._t, float(p)))
        raise TypeError("a traced tensor can be raised to a constant Python number only")

    def sum(self, axis=None):
        return sum(self, axis)

    def max(self, axis=None):
        return max(self, axis)

    def conj(self):
        return _unary("conj", self)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return reshape(self, shape, order=order)

    def transpose(self, *axes):
        return transpose(self, axes if axes else None)

    def astype(self, dtype):
        return _convert(self, np.dtype(dtype))


# ---- helpers ----

_local = threading.local()  # per Python thread: the Tracers of the traces being recorded (innermost last)


def _traces():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _tracer():
    if not _traces():
        raise RuntimeError("no trace is being recorded")
    return _traces()[-1]


def _lift(x, like):
    """A traced operand for x: itself, or a constant of the trace for an array (Python scalars stay scalars)."""
    if isinstance(x, Traced):
        return x
    a = np.asarray(x)
    if a.dtype not in _NAMES:
        a = a.astype(np.result_type(a, like.dtype) if a.dtype.kind in "biuf" else np.complex128)
    return Traced(_tracer().constant(np.ascontiguousarray(a)))


def _convert(x, dtype):
    if x.dtype == dtype:
        return x
    return Traced(_einstage.t_convert(x._t, _ename(dtype)))


def _broadcast_to(x, shape):
    if tuple(x.shape) == tuple(shape):
        return x
    offset = len(shape) - x.ndim
    # length-1 axes that stretch are summed away first, then broadcast_in_dim puts the rest in place
    squeeze = [i for i, (d, s) in enumerate(zip(x.shape, shape[offset:])) if d == 1 and s != 1]
    if squeeze:
        kept = [d for i, d in enumerate(x.shape) if i not in squeeze]
        x = Traced(_einstage.t_reshape(x._t, kept))
        dims = [offset + i for i in range(len(x.shape) + len(squeeze)) if i not in squeeze]
    else:
        dims = [offset + i for i in range(x.ndim)]
    return Traced(_einstage.t_broadcast(x._t, dims, list(shape)))


def _broadcast_shape(a, b):
    n = builtins.max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for k, (x, y) in enumerate(zip(a, b)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"operands could not be broadcast together with shapes {a} {b} (axis {k}: {x} vs {y})")
    return tuple(out)


def _binary(op, a, b):
    scalar = (int, float)
    if isinstance(b, scalar) and not isinstance(b, bool) and isinstance(a, Traced):
        return Traced(_einstage.t_scalar(op, a._t, float(b), False))
    if isinstance(a, scalar) and not isinstance(a, bool) and isinstance(b, Traced):
        return Traced(_einstage.t_scalar(op, b._t, float(a), True))
    like = a if isinstance(a, Traced) else b
    a, b = _lift(a, like), _lift(b, like)
    dtype = np.result_type(a.dtype, b.dtype)
    if op == "div" and dtype.kind in "iu":
        dtype = np.dtype(np.float64)
    a, b = _convert(a, dtype), _convert(b, dtype)
    shape = _broadcast_shape(a.shape, b.shape)
    return Traced(_einstage.t_binary(op, _broadcast_to(a, shape)._t, _broadcast_to(b, shape)._t))


def _unary(op, x):
    return Traced(_einstage.t_unary(op, x._t))


def _axes(axis, ndim):
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for a traced tensor of rank {ndim}")
        out.append(a % ndim)
    return out


# ---- NumPy-named functions: traced on Traced arguments, NumPy's otherwise ----

def _dispatch(name, op):
    np_fn = getattr(np, name)

    def fn(x, *args, **kwargs):
        if isinstance(x, Traced):
            return _unary(op, x)
        return np_fn(x, *args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = f"numpy.{name}, or einstage's {op} on a traced tensor."
    return fn


exp, log, sqrt = _dispatch("exp", "exp"), _dispatch("log", "log"), _dispatch("sqrt", "sqrt")
sin, cos, tanh = _dispatch("sin", "sin"), _dispatch("cos", "cos"), _dispatch("tanh", "tanh")
sinh, cosh = _dispatch("sinh", "sinh"), _dispatch("cosh", "cosh")
abs, sign, conj = _dispatch("abs", "abs"), _dispatch("sign", "sign"), _dispatch("conj", "conj")
real, imag = _dispatch("real", "real"), _dispatch("imag", "imag")


def stop_gradient(x):
    """The value of x with no derivative flowing through it."""
    return _unary("stop_gradient", x) if isinstance(x, Traced) else x


def sum(x, axis=None):
    if not isinstance(x, Traced):
        return np.sum(x, axis=axis)
    return Traced(_einstage.t_reduce_sum(x._t, _axes(axis, x.ndim)))


def max(x, axis=None):
    if not isinstance(x, Traced):
        return np.max(x, axis=axis)
    return Traced(_einstage.t_reduce_max(x._t, _axes(axis, x.ndim)))


def transpose(x, axes=None):
    if not isinstance(x, Traced):
        return np.transpose(x, axes)
    perm = list(reversed(range(x.ndim))) if axes is None else _axes(list(axes), x.ndim)
    return Traced(_einstage.t_transpose(x._t, perm))


def reshape(x, shape, order="C"):
    """NumPy's reshape: C order by default (einstage's own reshape op is column-major, i.e. order='F')."""
    if not isinstance(x, Traced):
        return np.reshape(x, shape, order=order)
    shape = [shape] if isinstance(shape, int) else list(shape)
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        total = int(np.prod(x.shape))
        shape[shape.index(-1)] = total // known if known else 0
    if order == "F" or (x.ndim <= 1 and len(shape) <= 1):
        return Traced(_einstage.t_reshape(x._t, shape))
    if order != "C":
        raise ValueError(f"reshape: order must be 'C' or 'F', not {order!r}")
    rev = transpose(x) if x.ndim > 1 else x
    y = Traced(_einstage.t_reshape(rev._t, list(reversed(shape))))
    return transpose(y) if len(shape) > 1 else y


def where(condition, x, y):
    """NumPy's where(a <cmp> b, x, y) on traced tensors (the condition must be a comparison of them)."""
    if not isinstance(condition, Condition):
        if any(isinstance(v, Traced) for v in (x, y)):
            raise TypeError("einstage.where on traced tensors takes a comparison as the condition, e.g. "
                            "where(a > 0, a, 0.0)")
        return np.where(condition, x, y)
    like = condition.a if isinstance(condition.a, Traced) else condition.b
    a, b, x, y = (_lift(v, like) for v in (condition.a, condition.b, x, y))
    shape = _broadcast_shape(_broadcast_shape(a.shape, b.shape), _broadcast_shape(x.shape, y.shape))
    ct = np.result_type(a.dtype, b.dtype)
    vt = np.result_type(x.dtype, y.dtype)
    a, b = (_broadcast_to(_convert(v, ct), shape) for v in (a, b))
    x, y = (_broadcast_to(_convert(v, vt), shape) for v in (x, y))
    return Traced(_einstage.t_select(condition.cmp, a._t, b._t, x._t, y._t))


def matmul(a, b):
    if not isinstance(a, Traced) and not isinstance(b, Traced):
        return np.matmul(a, b)
    like = a if isinstance(a, Traced) else b
    a, b = _lift(a, like), _lift(b, like)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions (scalars are not allowed)")
    lhs = "...ij" if a.ndim >= 2 else "j"
    rhs = "...jk" if b.ndim >= 2 else "j"
    out = ("..." if builtins.max(a.ndim, b.ndim) > 2 else "") + ("i" if a.ndim >= 2 else "") + \
          ("k" if b.ndim >= 2 else "")
    if a.ndim <= 2 and b.ndim <= 2:
        lhs, rhs = lhs.replace("...", ""), rhs.replace("...", "")
    return traced_einsum(f"{lhs},{rhs}->{out}", [a, b])


def traced_einsum(subscripts, operands, plan="auto"):
    like = next(o for o in operands if isinstance(o, Traced))
    ops = [_lift(o, like) for o in operands]
    dtype = np.result_type(*[o.dtype for o in ops])
    ops = [_convert(o, dtype) for o in ops]
    return Traced(_einstage.t_einsum(subscripts, [o._t for o in ops], plan))


# ---- tracing, programs, transformations ----

class Spec:
    """A parameter's type for trace(): a shape whose entries are ints, names (symbolic dims) or None (a fresh
    symbol), and a dtype."""

    def __init__(self, shape, dtype=np.float64):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)


def spec(shape, dtype=np.float64):
    return Spec(shape, dtype)


def _spec_of(x, name):
    if isinstance(x, Spec):
        dims = [f"{name}_{k}" if d is None else d for k, d in enumerate(x.shape)]
        return dims, x.dtype
    a = np.asarray(x)
    dtype = a.dtype if a.dtype in _NAMES else np.result_type(a.dtype, np.float64)
    return list(a.shape), dtype


def _param_names(fn, n):
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params][:n]
    except (TypeError, ValueError):
        names = []
    names += [f"x{k}" for k in range(len(names), n)]
    return names


class Program:
    """An einstage Program traced from Python: print it, lower it, differentiate it, save it, run it."""

    def __init__(self, p):
        self._p = p
        self._structure = None  # the nesting of the traced function's outputs (None: as the program has them)

    def __str__(self):
        return str(self._p)

    def __repr__(self):
        return f"<einstage.Program {self._p.name} with {len(self._p.params)} parameters>"

    def json(self):
        return self._p.json()

    def dot(self):
        return self._p.dot()

    @property
    def params(self):
        """[(name, einstage dtype, shape)] of the parameters, in order."""
        return self._p.params

    def lower(self, **bindings):
        """The program with every extension op (einsum) expanded into standard ops; symbolic dims need values."""
        lowered = Program(self._p.lower(bindings))
        lowered._structure = self._structure
        return lowered

    def grad(self, argnums=0):
        return Program(self._p.transform("grad", _argnums_list(argnums)))

    def value_and_grad(self, argnums=0):
        return Program(self._p.transform("value_and_grad", _argnums_list(argnums)))

    def jvp(self, argnums=0):
        return Program(self._p.transform("jvp", _argnums_list(argnums)))

    def vjp(self, argnums=0):
        return Program(self._p.transform("vjp", _argnums_list(argnums)))

    def save(self, path):
        """Writes the program as JSON (``.json``) or IR text (anything else), the files ``einstage run`` reads."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.json() if str(path).endswith(".json") else str(self))

    @staticmethod
    def load(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return Program(_einstage.Program.from_json(text) if str(path).endswith(".json")
                       else _einstage.Program.parse(text))

    def __call__(self, *arrays):
        """Runs the program (planned at the first call per shape); one output comes back as an array, several as
        a tuple."""
        params = self._p.params
        if len(arrays) != len(params):
            raise TypeError(f"program {self._p.name} takes {len(params)} arrays, {len(arrays)} given")
        inputs = []
        for a, (name, dtype, _) in zip(arrays, params):
            want = next(d for d, n in _NAMES.items() if n == dtype)
            a = np.asarray(a)
            inputs.append(a if a.dtype == want else a.astype(want))
        outs = self._p.run(inputs)
        if self._structure is not None:
            return _unflatten(outs, self._structure)
        return outs[0] if len(outs) == 1 else tuple(outs)


def _argnums_list(argnums):
    return [argnums] if isinstance(argnums, int) else list(argnums)


def trace(fn, *specs, name=None):
    """The Program of fn on parameters of these types (arrays, or spec(shape, dtype) with symbolic dims)."""
    names = _param_names(fn, len(specs))
    tracer = _einstage.Tracer(name or getattr(fn, "__name__", "traced").strip("<>") or "traced")
    params = []
    for k, (s, pname) in enumerate(zip(specs, names)):
        dims, dtype = _spec_of(s, pname)
        params.append(Traced(tracer.parameter(pname, _ename(dtype), dims)))
    _traces().append(tracer)
    try:
        out = fn(*params)
    finally:
        _traces().pop()
    outs, structure = _flatten(out)
    for k, o in enumerate(outs):
        if not isinstance(o, Traced):
            raise TypeError(f"the traced function {getattr(fn, '__name__', fn)!r} returned a "
                            f"{type(o).__name__} as output {k}, not a traced tensor; return values computed from "
                            f"its arguments")
    program = Program(tracer.finish([o._t for o in outs]))
    program._structure = structure
    return program


def _flatten(out):
    """The leaves of nested tuples and lists, and how to rebuild them (None: one leaf, not wrapped)."""
    if not isinstance(out, (tuple, list)):
        return [out], None
    leaves, parts = [], []
    for item in out:
        sub, structure = _flatten(item)
        leaves += sub
        parts.append((len(sub), structure))
    return leaves, (type(out), parts)


def _unflatten(leaves, structure):
    if structure is None:
        return leaves[0]
    kind, parts = structure
    items, at = [], 0
    for n, sub in parts:
        items.append(_unflatten(leaves[at:at + n], sub))
        at += n
    return kind(items)


class _Function:
    """A Python function with program-level transformations applied in order (innermost first); traced and
    prepared once per argument shapes and dtypes."""

    def __init__(self, fn, transforms=()):
        self.fn = getattr(fn, "fn", fn)
        self.transforms = list(getattr(fn, "transforms", [])) + list(transforms)
        self._programs = {}
        self.__name__ = getattr(self.fn, "__name__", "f")

    def program(self, *args):
        key = tuple((np.shape(a), np.asarray(a).dtype.str) for a in args)
        p = self._programs.get(key)
        if p is None:
            p = trace(self.fn, *args)
            for how, argnums in self.transforms:
                p = getattr(p, how)(argnums)
            self._programs[key] = p
        return p

    def __call__(self, *args):
        if any(isinstance(a, Traced) for a in args):
            return self._inline(args)
        return self._pack(self.program(*args)(*args))

    def _pack(self, out):
        if self.transforms and self.transforms[-1][0] == "grad" and not isinstance(self.transforms[-1][1], int) \
                and not isinstance(out, tuple):
            out = (out,)  # argnums given as a sequence: a tuple of gradients, as JAX returns
        return out

    def _inline(self, args):
        """Called inside another trace: the transformed program of fn, traced on these arguments' types, is
        replayed into that trace (so jit(lambda x: grad(f)(x) * 2) works)."""
        if not self.transforms:
            return self.fn(*args)
        tracer = _tracer()
        traced = [a if isinstance(a, Traced) else _lift(a, next(t for t in args if isinstance(t, Traced)))
                  for a in args]
        p = trace(self.fn, *[Spec(a.shape, a.dtype) for a in traced])
        for how, argnums in self.transforms:
            p = getattr(p, how)(argnums)
        outs = [Traced(t) for t in tracer.inline(p._p, [a._t for a in traced])]
        return self._pack(outs[0] if len(outs) == 1 else tuple(outs))


def jit(fn):
    """fn traced at the first call per argument shapes and dtypes, then run as an einstage program."""
    return _Function(fn)


def grad(fn, argnums=0):
    """The gradient of a function returning a real scalar (JAX's grad); ``grad(grad(f))`` composes."""
    return _Function(fn, [("grad", argnums)])


def value_and_grad(fn, argnums=0):
    """(value, gradient) in one program; the gradient is a tuple when argnums is."""
    f = _Function(fn, [("value_and_grad", argnums)])

    def call(*args):
        out = f(*args)
        return (out[0], out[1]) if isinstance(argnums, int) else (out[0], tuple(out[1:]))

    call.program = f.program
    return call


def jvp(fn, primals, tangents):
    """(outputs, output tangents) of fn at primals along tangents (JAX's jvp)."""
    primals, tangents = tuple(primals), tuple(tangents)
    p = trace(fn, *primals).jvp(list(range(len(primals))))
    n_out = p._p.num_outputs // 2
    outs = p(*primals, *tangents)
    outs = outs if isinstance(outs, tuple) else (outs,)
    pick = (lambda xs: xs[0]) if n_out == 1 else tuple
    return pick(outs[:n_out]), pick(outs[n_out:])


def vjp(fn, *primals):
    """(outputs, vjp_fn) with vjp_fn(cotangent) -> one cotangent per primal (JAX's vjp)."""
    base = trace(fn, *primals)
    p = base.vjp(list(range(len(primals))))
    n_out = base._p.num_outputs
    value = base(*primals)

    def vjp_fn(*cotangents):
        outs = p(*primals, *cotangents)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(outs[n_out:])

    return value, vjp_fn


def hvp(fn, primals, tangents):
    """Hessian-vector product of a real scalar function: the jvp of its gradient."""
    primals, tangents = tuple(primals), tuple(tangents)
    g = trace(fn, *primals).grad(list(range(len(primals))))
    h = g.jvp(list(range(len(primals))))
    outs = h(*primals, *tangents)
    outs = outs if isinstance(outs, tuple) else (outs,)
    res = outs[len(primals):]
    return res[0] if len(res) == 1 else tuple(res)
