// The two calls a Python loop makes most, compiled end to end: `einstage.einsum(subscripts, a, b, ...)` and
// `ContractExpression.__call__(a, b, ...)` with default arguments on NumPy arrays einstage reads in place.
//
// Stage: Python binding (python/). pybind11's dispatcher, the Python frame of a `def` and a malloc per shape vector
// are each a sizeable part of a microsecond, which is what a 16x16 contraction costs in total, so these entries are
// plain CPython vectorcall functions (METH_FASTCALL | METH_KEYWORDS). A call qualifies when it passes no keyword
// other than a default (optimize=True, out=None, dtype=None, order='K'), its operands are two or more exact
// numpy.ndarrays of one einstage dtype, aligned, with strides in whole elements, and (einsum) its subscripts were
// checked against NumPy's rules before and hold no '...'. Such a call looks its prepared plan up in a small
// GIL-protected table keyed by (subscripts, dtype, shapes) -- strides are the call's, not part of the key -- (a
// miss prepares it through the one-shot cache of Einsum.h with the GIL released), lets NumPy allocate the result in
// order='K''s layout, views everything in place and runs EinsumPlan::execute_into. The GIL is released for the
// execution only when the contraction is large enough for another thread to gain from it (kHoldGilBelow). Any
// other call goes unchanged to the Python implementation (einstage._einsum / ContractExpression._call), so there is
// one set of NumPy rules and this file only recognises the case where they reduce to the identity. Depends on
// Convert.h, Context.h and extensions/einsum (Einsum.h).
#pragma once

#include "extensions/einsum/exec/Executor.h"
#include "python/src/Convert.h"

namespace einstage::python {

/// A contraction whose naive work (the product of every label's extent) is below this runs with the GIL held:
/// releasing and taking it back costs more than another Python thread could do meanwhile.
inline constexpr double kHoldGilBelow = 32768.0;

/// The EinsumPlan a prepared-plan object (a value of ContractExpression._plans) runs for operands of `dtype`, or
/// nullptr when it does not (another dtype, or a sliced plan: those take the general path).
using PlanOf = const einsum::EinsumPlan* (*)(PyObject* plan_object, DType dtype);

/// Adds `einsum_entry` (einstage.einsum), `set_einsum_fallback` and `expression_call` (the descriptor the package
/// installs as ContractExpression.__call__) to the module.
void register_fast_calls(py::module_& m, PlanOf plan_of);

}  // namespace einstage::python
