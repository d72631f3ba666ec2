"""einstage from Python: NumPy's einsum and opt_einsum's planning API on einstage's C++ einsum.

    import einstage
    c = einstage.einsum("ij,jk->ik", a, b)           # numpy.einsum's semantics, einstage's planner and kernels
    path, info = einstage.contract_path("ij,jk,kl->il", a, b, c)
    expr = einstage.contract_expression("ij,jk->ik", (64, 32), (32, 16))
    expr(a, b)                                         # reuses the prepared plan

The compiled core is ``einstage._einstage``; docs/python.md is the tutorial.
"""

from . import _einstage, linalg
from ._einsum import _CHECKED, parse_arguments as _parse_arguments, run as _run
from ._paths import (ContractExpression, PathInfo, contract, contract_expression, contract_path, einsum_path,
                     plan_spec as _plan_spec)
from ._trace import (Program, Spec, Traced, abs, conj, cos, cosh, exp, grad, hvp, imag, jit, jvp, log, matmul, max,
                     real, reshape, sign, sin, sinh, spec, sqrt, stop_gradient, sum, tanh, trace, transpose,
                     value_and_grad, vjp, where, traced_einsum as _traced_einsum)

__all__ = ["einsum", "einsum_path", "contract", "contract_path", "contract_expression", "ContractExpression",
           "PathInfo", "threads", "set_num_threads", "linalg", "trace", "jit", "grad", "value_and_grad", "jvp", "vjp", "hvp", "Program", "Traced",
           "spec", "Spec", "exp", "log", "sqrt", "sin", "cos", "tanh", "sinh", "cosh", "abs", "sign", "conj", "real",
           "imag", "sum", "max", "transpose", "reshape", "where", "matmul", "stop_gradient"]


def _einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=True):
    """einsum's general path: every call the compiled entry (einsum below) does not handle itself."""
    subscripts, ops = _parse_arguments(operands)
    plan, limit = _plan_spec(optimize, len(ops))
    if any(isinstance(o, Traced) for o in ops):  # inside a trace: one einstage.einsum.v1 op
        if out is not None or dtype is not None or limit is not None:
            raise TypeError("einsum on traced tensors takes no out=, dtype= or memory limit")
        return _traced_einsum(subscripts, ops, plan)
    return _run(subscripts, ops, out, dtype, order, casting, plan, limit)


# einstage.einsum is compiled (python/src/FastCall.h): two or more arrays of one einstage dtype, subscripts checked
# before and without '...', default arguments: one C call on a cached plan; anything else goes to _einsum.
_einstage.set_einsum_fallback(_einsum, _CHECKED)
einsum = _einstage.einsum_entry


def threads():
    """Threads the contractions run on: set_num_threads(n), else EINSTAGE_NUM_THREADS, else every CPU."""
    return _einstage.threads()


def set_num_threads(n):
    """Runs the calls that start from now on n threads (0: every CPU this process may use). Results are bitwise the
    same at every count; plans are prepared again on the new threads' context."""
    _einstage.set_num_threads(int(n))
