"""NumPy's einsum rules on top of einstage's C++ einsum: argument forms, result dtypes, out=, order=, views.

Everything that computes is the compiled module (_einstage: the einsum library's cached plan and executor); this
file only decides what NumPy would return and hands einstage arrays it can read in place:

* the interleaved form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` becomes a subscript string (labels 0-25 are 'A'-'Z',
  26-51 are 'a'-'z', as NumPy's C einsum maps them, so an implicit output lists labels in increasing order);
* the result dtype is NumPy's (``numpy.result_type`` of the operands, or ``dtype=`` checked with ``casting=``);
  einstage computes in float32, float64, complex64, complex128 and int64 and computes bool and the other integer
  types through int64, which gives NumPy's wrapped integer results bit for bit (sums of products modulo 2**k are the
  same whether reduced at the end or at every step); other dtypes (float16, longdouble, object, ...) are refused with
  a TypeError naming them;
* operands of the computing dtype are read in place whatever their strides (C, Fortran, slices, negative strides);
  others are converted once, as NumPy converts them;
* ``out=`` of the computing dtype that does not overlap an operand is written directly; any other ``out=`` gets the
  result through ``numpy.copyto`` under the casting rule;
* a one-operand einsum that sums nothing returns a view of the operand, as NumPy's does (writeable when it is).
"""

import numpy as np

from . import _einstage

_NATIVE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128, np.int64))
_INT64 = np.dtype(np.int64)
_ORDERS = {"C": "C", "F": "F", "A": "A", "K": "K"}
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SUBSCRIPT_CHARS = frozenset(_LETTERS + ",.-> ()")


def _label(s):
    if s is Ellipsis:
        return "..."
    try:
        k = int(s) if isinstance(s, (int, np.integer)) and not isinstance(s, bool) else None
    except (TypeError, ValueError):
        k = None
    if k is None:
        raise TypeError(f"einsum: subscript {s!r} in a sublist is not an integer or Ellipsis; the interleaved form "
                        f"takes integers in [0, 52) and Ellipsis")
    if not 0 <= k < 52:
        raise ValueError(f"einsum: subscript {k} is not within the valid range [0, 52)")
    return _LETTERS[k]


def _sublist(sub, what):
    if isinstance(sub, (str, bytes)) or not hasattr(sub, "__iter__"):
        raise TypeError(f"einsum: {what} must be a list of integer subscripts, not {type(sub).__name__}; the "
                        f"interleaved form is einsum(a, [0, 1], b, [1, 2], [0, 2])")
    return "".join(_label(s) for s in sub)


def parse_arguments(args):
    """(subscripts string, operand list) from NumPy's two calling forms."""
    if not args:
        raise ValueError("einsum: no subscripts and no operands given; call einsum('ij,jk->ik', a, b) or "
                         "einsum(a, [0, 1], b, [1, 2])")
    if isinstance(args[0], str):
        subscripts, operands = args[0], list(args[1:])
        if not operands:
            raise ValueError(f"einsum {subscripts!r}: no operands given; pass one array per term")
        check_subscripts(subscripts)
        return subscripts, operands
    operands, terms = [], []
    n = len(args) // 2
    for k in range(n):
        operands.append(args[2 * k])
        terms.append(_sublist(args[2 * k + 1], f"the sublist of operand {k}"))
    subscripts = ",".join(terms)
    if len(args) % 2 == 1:
        if n == 0:
            raise ValueError("einsum: the interleaved form needs an operand and its sublist, e.g. einsum(a, [0, 0])")
        subscripts += "->" + _sublist(args[-1], "the output sublist")
    return subscripts, operands


_CHECKED = set()  # subscript strings that passed check_subscripts (bounded below)


def check_subscripts(subscripts):
    """NumPy's rules that einstage's notation is more generous about: letters only, each output label once."""
    if subscripts in _CHECKED:
        return
    bad = set(subscripts) - _SUBSCRIPT_CHARS
    if bad:
        c = min(bad)
        raise ValueError(f"einsum {subscripts!r}: invalid subscript {c!r}; subscripts must be letters (NumPy's rule; "
                         f"',', '->', '...', spaces and einstage's parentheses for the contraction order are the "
                         f"only other characters)")
    if "->" in subscripts:
        out = subscripts.split("->", 1)[1].replace("...", "")
        seen = set()
        for c in out:
            if c in _LETTERS and c in seen:
                raise ValueError(f"einsum {subscripts!r}: output subscript {c!r} appears more than once; NumPy "
                                 f"allows each output label once")
            seen.add(c)
    if len(_CHECKED) > 4096:
        _CHECKED.clear()
    _CHECKED.add(subscripts)


def as_array(x):
    """An operand as a NumPy array without a copy where possible: arrays as they are, DLPack exporters (torch, JAX
    and CuPy tensors on the CPU) through numpy.from_dlpack, anything else through numpy.asanyarray (the buffer
    protocol, __array__, sequences, scalars)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__") and not isinstance(x, np.generic):
        try:
            return np.from_dlpack(x)
        except (TypeError, ValueError, RuntimeError, BufferError):
            pass  # e.g. a torch tensor that requires grad: asanyarray's error says what to do
    return np.asanyarray(x)


def check_numeric(operands, arrays):
    """An operand that is not an array and that NumPy turns into strings or objects is named, before the dtype
    rules would refuse the dtype without saying which argument it came from."""
    for k, (o, a) in enumerate(zip(operands, arrays)):
        if a.dtype.kind in "OUSV" and not isinstance(o, np.ndarray):
            raise TypeError(f"einsum: operand {k} is a {type(o).__name__}, not an array of numbers "
                            f"(numpy.asarray makes it dtype {a.dtype}); pass a numpy.ndarray, a torch tensor or "
                            f"anything with __array__ of a numeric dtype")


def check_ellipsis_output(subscripts, arrays):
    """NumPy refuses an explicit output without '...' when some operand's '...' covers axes (einstage would sum
    them)."""
    if "->" not in subscripts:
        return
    lhs, rhs = subscripts.split("->", 1)
    if "..." in rhs:
        return
    for k, (term, a) in enumerate(zip(lhs.split(","), arrays)):
        if "..." in term:
            named = sum(1 for c in term if c in _LETTERS)
            if a.ndim > named:
                raise ValueError(f"einsum {subscripts!r}: the '...' of operand {k} covers {a.ndim - named} axes but "
                                 f"the output has no '...'; NumPy does not sum ellipsis axes implicitly: add '...' "
                                 f"to the output or name those axes")


def compute_dtype(dtype):
    """The dtype einstage computes a result of NumPy dtype `dtype` in, or a TypeError naming it."""
    if dtype in _NATIVE:
        return dtype
    if dtype.kind == "b" or (dtype.kind in "iu" and dtype.itemsize <= 8):
        return _INT64
    raise TypeError(f"einsum: dtype {dtype} ({dtype.str}) is not supported: einstage computes in float32, float64, "
                    f"complex64, complex128 and int64 (bool and the other integer types through int64); convert "
                    f"the operands first, e.g. a.astype(numpy.float64)")


def _readable(a, target, compute):
    """`a` as an array einstage reads in place: the computing dtype, native byte order, aligned, strides in whole
    elements. Bool and integer results are computed through int64 after casting to the result dtype, as NumPy casts."""
    if a.dtype != compute:
        if target != compute and a.dtype != target:
            a = a.astype(target)
        return a.astype(compute)
    # Alignment is the element size for the real types; a complex array can be aligned to its real part only.
    if not a.flags.aligned or (a.dtype.kind == "c" and any(s % a.itemsize for s in a.strides)):
        return np.ascontiguousarray(a)
    return a


def result_dtype(operands, dtype, casting):
    if dtype is None:
        dtype = np.result_type(*operands)
        return dtype if dtype.isnative else dtype.newbyteorder("=")
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    for k, a in enumerate(operands):
        if not np.can_cast(a, dtype, casting):
            raise TypeError(f"einsum: cannot cast operand {k} from dtype({str(a.dtype)!r}) to "
                            f"dtype({str(dtype)!r}) according to the rule {casting!r}")
    return dtype


def check_options(order, casting):
    if not isinstance(order, str) or order.upper() not in _ORDERS:
        raise ValueError(f"einsum: order must be one of 'C', 'F', 'A' or 'K', not {order!r}")
    if casting not in _CASTINGS:
        raise ValueError(f"einsum: casting must be one of {', '.join(map(repr, _CASTINGS))}, not {casting!r}")
    return order.upper()


def output_order(order, operands):
    if order in ("C", "F"):
        return order
    some_f = False
    for a in operands:
        if a.ndim >= 2:
            flags = a.flags
            if not flags.f_contiguous:
                return "C"
            some_f = some_f or not flags.c_contiguous
    return "F" if some_f else "C"


def _finish(result, dtype, compute):
    """The result in NumPy's dtype: integer types wrap like NumPy's, bool is 'any product non-zero'."""
    if dtype == compute:
        return result
    if dtype.kind == "b":
        return result != 0
    return result.astype(dtype)


def run(subscripts, operands, out, dtype, order, casting, plan, max_memory_elements=None):
    """einsum after the arguments were parsed: `plan` is an einstage plan spec string."""
    order = check_options(order, casting)
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"einsum: out must be a numpy.ndarray, not {type(out).__name__}")
        if not out.flags.writeable:
            raise ValueError("einsum: out is read-only; pass a writeable array")
    arrays = [as_array(a) for a in operands]
    check_numeric(operands, arrays)
    if "..." in subscripts:
        check_ellipsis_output(subscripts, arrays)
    if len(arrays) == 1 and out is None and (dtype is None or np.dtype(dtype) == arrays[0].dtype):
        view = _einstage.single_view(subscripts, arrays[0])
        if view is not None:
            return view
    target = result_dtype(arrays, dtype, casting)
    compute = compute_dtype(target)
    ready = [_readable(a, target, compute) for a in arrays]
    max_memory = 0
    if max_memory_elements is not None:
        max_memory = int(max_memory_elements) * compute.itemsize
    if out is not None:
        direct = (out.dtype == compute and target == compute and out.flags.writeable and out.flags.aligned
                  and not any(s % out.itemsize for s in out.strides)
                  and not any(np.may_share_memory(out, a) for a in arrays))
        if direct:
            _einstage.einsum(subscripts, ready, out, "F", plan, max_memory)
            return out
        result = _finish(_einstage.einsum(subscripts, ready, None, "F", plan, max_memory), target, compute)
        if out.shape != result.shape:
            raise ValueError(f"einsum {subscripts!r}: out has shape {out.shape} but the result has shape "
                             f"{result.shape}")
        if not np.can_cast(target, out.dtype, casting):
            raise TypeError(f"einsum: cannot cast the result from dtype({str(target)!r}) to out's "
                            f"dtype({str(out.dtype)!r}) according to the rule {casting!r}")
        np.copyto(out, result, casting="unsafe")
        return out
    result = _einstage.einsum(subscripts, ready, None, output_order(order, arrays), plan, max_memory)
    result = _finish(result, target, compute)
    if result.ndim == 0:
        return result[()]
    return result
