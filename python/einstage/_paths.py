"""Contraction orders the NumPy and opt_einsum way: ``optimize=`` values, explicit paths, einsum_path,
contract_path with a PathInfo, and contract_expression.

The planner is einstage's (extensions/einsum/planner, the same one ``einstage plan`` reports from); this file maps
the Python spellings onto its plan specs (docs/planning.md) and presents its answer:

* ``True``/``'auto'`` -> ``auto``; ``'greedy'`` -> ``greedy``; ``'optimal'`` and ``'dp'`` -> ``optimal`` (exact);
  ``'auto-hq'`` -> ``auto(quality=high)``; ``False``/``None`` -> ``left_to_right`` (NumPy then contracts every operand
  in one loop nest; einstage always contracts pairwise); any other string is an einstage plan spec
  (``'anneal(budget=2,seed=1)'``, ``'tree[(0,1),(3,2)]'``);
* an explicit path (``[(1, 2), (0, 1)]``, with or without NumPy's leading ``'einsum_path'``; steps naming one
  operand or more than two are allowed as in NumPy) becomes the equivalent ``tree[...]`` of pairwise steps;
* NumPy's ``(strategy, memory_limit)`` tuple and opt_einsum's ``memory_limit=`` (elements, or ``'max_input'``) become
  einstage slicing: every intermediate of one slice fits the limit (SlicedEinsumPlan), the result is the same.
"""

import numpy as np

from . import _einstage
from . import _einsum

_NAMED = {"auto": "auto", "greedy": "greedy", "optimal": "optimal", "dp": "optimal", "auto-hq": "auto(quality=high)"}


def path_to_tree(path, num_operands):
    """einstage tree steps (ids: inputs 0..n-1, step k's result n+k) for an opt_einsum / NumPy positional path."""
    ids = list(range(num_operands))
    next_id = num_operands
    steps = []
    for k, step in enumerate(path):
        try:
            positions = sorted(int(p) for p in step)
        except TypeError:
            raise TypeError(f"contraction path step {k} is {step!r}, not a tuple of operand positions") from None
        if not positions or len(set(positions)) != len(positions) or positions[0] < 0 or positions[-1] >= len(ids):
            raise ValueError(f"contraction path step {k} {tuple(step)!r} must name distinct positions among the "
                             f"{len(ids)} operands left at that step (0 to {len(ids) - 1})")
        taken = [ids[p] for p in positions]
        for p in reversed(positions):
            del ids[p]
        current = taken[0]
        for other in taken[1:]:
            steps.append((current, other))
            current = next_id
            next_id += 1
        ids.append(current)
    if len(ids) != 1:
        raise RuntimeError(f"invalid contraction path {list(map(tuple, path))!r}: it leaves {len(ids)} operands "
                           f"uncontracted; a path must reduce the {num_operands} operands to one")
    return steps


def _explicit(path):
    path = list(path)
    if path and path[0] == "einsum_path":
        path = path[1:]
    return path


def plan_spec(optimize, num_operands):
    """(einstage plan spec text, memory limit in elements or None) for an ``optimize=`` value."""
    limit = None
    if isinstance(optimize, tuple) and len(optimize) == 2 and isinstance(optimize[0], (str, bool)) \
            and not isinstance(optimize[1], (tuple, list)):
        optimize, limit = optimize
    if optimize is True:
        return "auto", limit
    if optimize is False or optimize is None:
        return "left_to_right", limit
    if isinstance(optimize, str):
        if optimize in _NAMED:
            return _NAMED[optimize], limit
        return _einstage.normalize_plan(optimize), limit
    if isinstance(optimize, (list, tuple)):
        steps = path_to_tree(_explicit(optimize), num_operands)
        return "tree[" + ",".join(f"({a},{b})" for a, b in steps) + "]", limit
    raise TypeError(f"optimize must be True, False, a strategy name, an einstage plan spec or a contraction path, "
                    f"not {optimize!r}")


def memory_elements(memory_limit, shapes):
    if memory_limit is None:
        return None
    if memory_limit == "max_input":
        return max((int(np.prod(s, dtype=np.int64)) for s in shapes), default=1)
    limit = int(memory_limit)
    if limit < 1:
        raise ValueError(f"memory_limit must be at least 1 element (the largest intermediate of one slice), not "
                         f"{memory_limit!r}")
    return limit


class PathInfo:
    """What einstage's planner chose for one contraction (opt_einsum's PathInfo, with einstage's numbers).

    Flop counts are multiply-adds: a pairwise step costs the product of the extents of the labels of both operands
    (docs/planning.md, "cost model"); opt_einsum counts each multiply and add, so its opt_cost is up to twice this.
    """

    def __init__(self, eq, shapes, info, plan):
        self.eq = eq
        self.shapes = [tuple(s) for s in shapes]
        self.plan = plan
        self.method = info["method"]
        self.path = [tuple(p) for p in info["path"]]
        self.tree = [tuple(s) for s in info["tree"]]
        self.input_subscripts = ",".join("".join(t) for t in info["inputs"])
        self.output_subscript = "".join(info["output"])
        self.size_dict = dict(info["extents"])
        self.opt_cost = info["total_flops"]
        self.naive_cost = info["naive_flops"]
        self.speedup = self.naive_cost / self.opt_cost if self.opt_cost else 1.0
        self.largest_intermediate = info["max_intermediate"]
        self.peak_memory = info["peak_memory"]
        self.tc, self.sc = info["tc"], info["sc"]
        self.sliced = list(info["sliced"])
        self.num_slices = info["num_slices"]
        self.overhead = info["overhead"]
        self.steps = info["steps"]
        self.report = info["report"]
        # opt_einsum's per-step table: (positions, summed labels, "lhs,rhs->result", scaling)
        self.contraction_list = []
        for pos, s in zip(self.path, self.steps):
            eq_step = f"{''.join(s['left_labels'])},{''.join(s['right_labels'])}->{''.join(s['result_labels'])}"
            scaling = len(set(s["left_labels"]) | set(s["right_labels"]))
            self.contraction_list.append((pos, frozenset(s["summed"]), eq_step, scaling, s["flops"]))
        self.scale_list = [c[3] for c in self.contraction_list]

    def __str__(self):
        return self.report

    def __repr__(self):
        return (f"PathInfo({self.eq!r}, path={self.path}, opt_cost={self.opt_cost:.6g}, "
                f"largest_intermediate={self.largest_intermediate:.6g}, method={self.method!r})")


def _shapes_of(operands, shapes):
    if shapes:
        return [tuple(int(e) for e in s) for s in operands]
    return [np.shape(a) for a in operands]


def _itemsize(operands, shapes, dtype=None):
    if dtype is not None:
        return np.dtype(dtype).itemsize
    if shapes:
        return 8
    return _einsum.compute_dtype(np.result_type(*[np.asanyarray(a) for a in operands])).itemsize


def contract_path(*operands, optimize="auto", memory_limit=None, shapes=False):
    """(path, PathInfo) of einstage's plan; ``shapes=True`` takes shapes instead of arrays."""
    subscripts, ops = _einsum.parse_arguments(operands)
    shape_list = _shapes_of(ops, shapes)
    spec, limit = plan_spec(optimize, len(ops))
    limit = memory_elements(memory_limit if memory_limit is not None else limit, shape_list)
    itemsize = _itemsize(ops, shapes)
    info = _einstage.plan_info(subscripts, shape_list, spec, 0 if limit is None else limit * itemsize, itemsize)
    pi = PathInfo(subscripts, shape_list, info, spec)
    return pi.path, pi


def einsum_path(*operands, optimize="greedy", einsum_call=False):
    """NumPy's einsum_path: (['einsum_path', (i, j), ...], the printed report)."""
    path, info = contract_path(*operands, optimize=optimize)
    return ["einsum_path", *path], str(info)


def contract(*operands, out=None, dtype=None, order="K", casting="safe", optimize="auto", memory_limit=None,
             backend=None):
    """opt_einsum's contract on einstage: einsum with a planned order (and slicing under ``memory_limit``)."""
    if backend not in (None, "numpy", "einstage"):
        raise ValueError(f"contract: backend {backend!r} is not available; einstage contracts with its own kernels")
    if type(optimize) is str and optimize == "auto" and memory_limit is None and out is None and dtype is None \
            and order == "K" and casting == "safe":
        return _einstage.einsum_entry(*operands)  # einsum with optimize=True: the same plan, the compiled call
    subscripts, ops = _einsum.parse_arguments(operands)
    spec, limit = plan_spec(optimize, len(ops))
    limit = memory_elements(memory_limit if memory_limit is not None else limit, [np.shape(a) for a in ops])
    return _einsum.run(subscripts, ops, out, dtype, order, casting, spec, limit)


class ContractExpression:
    """A contraction prepared for fixed shapes; each call reuses the plan (per computing dtype)."""

    def __init__(self, subscripts, shapes, optimize, memory_limit):
        _einsum.check_subscripts(subscripts)
        self.subscripts = subscripts
        self.shapes = [tuple(int(e) for e in s) for s in shapes]
        self.plan, limit = plan_spec(optimize, len(self.shapes))
        self.memory_limit = memory_elements(memory_limit if memory_limit is not None else limit, self.shapes)
        self._plans = {}
        # Planning now, as opt_einsum does, so that errors in the subscripts or shapes show here.
        self._info = _einstage.plan_info(subscripts, self.shapes, self.plan,
                                         0 if self.memory_limit is None else self.memory_limit * 8, 8)

    def _prepared(self, compute):
        plan = self._plans.get(compute)
        if plan is None:
            max_memory = 0 if self.memory_limit is None else self.memory_limit * compute.itemsize
            plan = _einstage.Plan(self.subscripts, self.shapes, [_einstage.dtype_name(compute)] * len(self.shapes),
                                  self.plan, max_memory)
            self._plans[compute] = plan
        return plan

    # __call__ is compiled (python/src/FastCall.h, installed below the class): arrays of a dtype prepared before
    # with the default arguments run the plan in one C call; every other call comes here.
    def _call(self, *arrays, out=None, dtype=None, order="K", casting="safe"):
        if len(arrays) != len(self.shapes):
            raise ValueError(f"contract_expression {self.subscripts!r}: {len(arrays)} arrays given for "
                             f"{len(self.shapes)} operands")
        order = _einsum.check_options(order, casting)
        if out is not None and not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray, not {type(out).__name__}")
        operands, arrays = arrays, [_einsum.as_array(a) for a in arrays]
        _einsum.check_numeric(operands, arrays)
        target = _einsum.result_dtype(arrays, dtype, casting)
        compute = _einsum.compute_dtype(target)
        ready = [_einsum._readable(a, target, compute) for a in arrays]
        plan = self._prepared(compute)
        if out is not None and out.dtype == compute == target and not any(np.may_share_memory(out, a) for a in arrays):
            plan(ready, out, "F")
            return out
        result = _einsum._finish(plan(ready, None, _einsum.output_order(order, arrays)), target, compute)
        if out is not None:
            if not np.can_cast(target, out.dtype, casting):
                raise TypeError(f"cannot cast the result from dtype({str(target)!r}) to out's "
                                f"dtype({str(out.dtype)!r}) according to the rule {casting!r}")
            if out.shape != result.shape:
                raise ValueError(f"out has shape {out.shape} but the result has shape {result.shape}")
            np.copyto(out, result, casting="unsafe")
            return out
        return result[()] if result.ndim == 0 else result

    @property
    def path(self):
        return [tuple(p) for p in self._info["path"]]

    def __str__(self):
        return self._info["report"]

    def __repr__(self):
        return f"ContractExpression({self.subscripts!r}, shapes={self.shapes}, plan={self.plan!r})"


ContractExpression.__call__ = _einstage.expression_call(ContractExpression)


def contract_expression(subscripts, *shapes, optimize="auto", memory_limit=None):
    """A ContractExpression for operands of these shapes (opt_einsum's contract_expression)."""
    if not isinstance(subscripts, str):
        raise TypeError("contract_expression takes the subscripts as a string, then one shape per operand")
    return ContractExpression(subscripts, shapes, optimize, memory_limit)
