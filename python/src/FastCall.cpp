// einstage.einsum and ContractExpression.__call__ as CPython vectorcall functions (FastCall.h).
#include "python/src/FastCall.h"

#include "extensions/einsum/exec/Einsum.h"
#include "python/src/Context.h"
#include "runtime/Context.h"

#include <array>
#include <span>
#include <string_view>
#include <vector>

namespace einstage::python {
namespace {

using einsum::EinsumPlan;
using npy = py::detail::npy_api;

constexpr size_t kMaxOperands = 16;  // calls with more operands take the general path
constexpr int kMaxRank = 32;         // NumPy's NPY_MAXDIMS

// A call's operands, viewed in place (the caller's argument array keeps the arrays alive for the call).
struct Views {
  std::array<Tensor, kMaxOperands> tensors;
  size_t n = 0;
  DType dtype = DType::f64;
  char order = 'C';  // NumPy's order='K' result layout: F when every operand of rank >= 2 is F- but not C-ordered
};

// Py_None (borrowed) means "this call does not qualify: take the general path"; einsum never returns None.
PyObject* not_applicable() { return Py_None; }

// The operands when they qualify (FastCall.h), else false.
bool view_operands(PyObject* const* args, size_t n, Views& v) {
  if (n < 2 || n > kMaxOperands) return false;
  const npy& api = npy::get();
  bool all_f = true, some_not_c = false;
  for (size_t k = 0; k < n; ++k) {
    PyObject* o = args[k];
    if (Py_TYPE(o) != api.PyArray_Type_) return false;
    const auto* a = py::detail::array_proxy(o);
    const std::optional<DType> dt = dtype_of(py::reinterpret_borrow<py::dtype>(a->descr));
    if (!dt || (k > 0 && *dt != v.dtype) || !(a->flags & npy::NPY_ARRAY_ALIGNED_)) return false;
    v.dtype = *dt;
    const auto es = static_cast<Py_intptr_t>(size_of(*dt));
    Strides strides(static_cast<size_t>(a->nd));
    for (int i = 0; i < a->nd; ++i) {
      if (a->strides[i] % es != 0) return false;
      strides[static_cast<size_t>(i)] = a->strides[i] / es;
    }
    if (a->nd >= 2) {
      all_f = all_f && (a->flags & npy::NPY_ARRAY_F_CONTIGUOUS_);
      some_not_c = some_not_c || !(a->flags & npy::NPY_ARRAY_C_CONTIGUOUS_);
    }
    v.tensors[k] = Tensor::view_of(*dt, Shape(a->dimensions, a->dimensions + a->nd), std::move(strides), a->data);
  }
  v.n = n;
  v.order = all_f && some_not_c ? 'F' : 'C';
  return true;
}

// The product of every label's extent: an upper bound of the multiply-adds, for kHoldGilBelow.
double naive_work(const EinsumPlan& plan) {
  double work = 1;
  for (const auto& [label, extent] : plan.extents()) work *= static_cast<double>(extent);
  return work;
}

// Runs `plan` into a fresh array in v.order; a 0-d result comes back as a NumPy scalar, as numpy.einsum's does.
PyObject* run(const EinsumPlan& plan, const Views& v, bool release_gil) {
  const Shape& shape = plan.output_shape();
  if (shape.size() > static_cast<size_t>(kMaxRank)) return not_applicable();
  const npy& api = npy::get();
  std::array<Py_intptr_t, kMaxRank> dims{};
  std::copy(shape.begin(), shape.end(), dims.begin());
  py::object array = py::reinterpret_steal<py::object>(api.PyArray_NewFromDescr_(
      api.PyArray_Type_, numpy_dtype(plan.dtype()).release().ptr(), static_cast<int>(shape.size()), dims.data(),
      nullptr, nullptr, v.order == 'F' ? npy::NPY_ARRAY_F_CONTIGUOUS_ : 0, nullptr));
  if (!array) throw py::error_already_set();
  const auto* a = py::detail::array_proxy(array.ptr());
  const auto es = static_cast<Py_intptr_t>(size_of(plan.dtype()));
  Strides strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) strides[i] = a->strides[i] / es;
  Tensor out = Tensor::view_of(plan.dtype(), shape, std::move(strides), a->data);
  const std::span<const Tensor> operands(v.tensors.data(), v.n);
  ExecutionContext& context = *current().context;
  if (release_gil) {
    const EinsumPlan keep = plan;  // the caller's table entry may be replaced while the GIL is released
    py::gil_scoped_release release;
    keep.execute_into(operands, out, context, &context.pool());
  } else {
    plan.execute_into(operands, out, context, &context.pool());
  }
  if (shape.empty()) return PyObject_GetItem(array.ptr(), py::tuple().ptr());
  return array.release().ptr();
}

// Keyword arguments that leave the call at its defaults: out=None, dtype=None, order='K', and (einsum)
// optimize=True. Anything else (casting= included) goes to the general path, which checks it.
bool default_keywords(PyObject* const* values, PyObject* names, bool einsum) {
  if (!names) return true;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* name = PyTuple_GET_ITEM(names, i);
    PyObject* value = values[i];
    if (PyUnicode_CompareWithASCIIString(name, "out") == 0 || PyUnicode_CompareWithASCIIString(name, "dtype") == 0) {
      if (value != Py_None) return false;
    } else if (PyUnicode_CompareWithASCIIString(name, "order") == 0) {
      if (!PyUnicode_Check(value) || PyUnicode_CompareWithASCIIString(value, "K") != 0) return false;
    } else if (!(einsum && PyUnicode_CompareWithASCIIString(name, "optimize") == 0 && value == Py_True)) {
      return false;
    }
  }
  return true;
}

// The result, nullptr with a Python exception set, or not_applicable().
template <typename F>
PyObject* guarded(F&& f) {
  try {
    return f();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const Error& e) {
    set_python_error(e);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// ---- einstage.einsum ----

// Plans prepared for (subscripts, dtype, shapes), most recent calls first to be found. Read and written with the
// GIL held only; a miss prepares its plan with the GIL released and then takes the next entry round-robin.
struct Entry {
  std::string subscripts;
  DType dtype = DType::f64;
  std::vector<int64_t> dims;  // per operand: its rank, then its extents
  EinsumPlan plan;
  bool release_gil = false;
  bool used = false;
};
struct Table {
  std::array<Entry, 16> entries;
  size_t next = 0, last = 0;
  PyObject* fallback = nullptr;  // einstage's general einsum (Python)
  PyObject* checked = nullptr;   // the set of subscripts that passed NumPy's rules (einstage._einsum._CHECKED)
};
Table& table() {
  static Table* t = new Table();  // never destroyed: the interpreter may call in while exiting
  return *t;
}

bool matches(const Entry& e, std::string_view subscripts, const Views& v) {
  if (!e.used || e.dtype != v.dtype || e.subscripts != subscripts) return false;
  size_t i = 0;
  for (size_t k = 0; k < v.n; ++k) {
    const Shape& shape = v.tensors[k].shape();
    if (i + 1 + shape.size() > e.dims.size() || e.dims[i++] != static_cast<int64_t>(shape.size())) return false;
    for (int64_t extent : shape)
      if (e.dims[i++] != extent) return false;
  }
  return i == e.dims.size();
}

const Entry* prepare(PyObject* subscripts_object, std::string_view subscripts, const Views& v) {
  Table& t = table();
  if (!t.checked || subscripts.find("...") != std::string_view::npos) return nullptr;
  const int checked = PySet_Contains(t.checked, subscripts_object);
  if (checked != 1) {
    if (checked < 0) PyErr_Clear();
    return nullptr;  // the general path checks NumPy's rules first
  }
  std::vector<einsum::TensorMeta> metas;
  std::vector<int64_t> dims;
  for (size_t k = 0; k < v.n; ++k) {
    metas.push_back(einsum::TensorMeta::of(v.tensors[k]));
    dims.push_back(static_cast<int64_t>(v.tensors[k].rank()));
    dims.insert(dims.end(), v.tensors[k].shape().begin(), v.tensors[k].shape().end());
  }
  einsum::EinsumOptions options;
  options.allow_broadcast = true;  // NumPy stretches length-1 axes of named labels too
  options.context = current().context;
  EinsumPlan plan;
  {
    py::gil_scoped_release release;
    plan = einsum::cached_plan(subscripts, metas, options);
  }
  Entry& e = t.entries[t.next];
  t.last = t.next;
  t.next = (t.next + 1) % t.entries.size();
  e.subscripts.assign(subscripts);
  e.dtype = v.dtype;
  e.dims = std::move(dims);
  e.release_gil = naive_work(plan) >= kHoldGilBelow;
  e.plan = std::move(plan);
  e.used = true;
  return &e;
}

PyObject* try_einsum(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs < 3 || !PyUnicode_CheckExact(args[0]) || !default_keywords(args + nargs, kwnames, true))
    return not_applicable();
  Py_ssize_t length = 0;
  const char* text = PyUnicode_AsUTF8AndSize(args[0], &length);
  if (!text) {
    PyErr_Clear();
    return not_applicable();
  }
  const std::string_view subscripts(text, static_cast<size_t>(length));
  Views v;
  if (!view_operands(args + 1, static_cast<size_t>(nargs - 1), v)) return not_applicable();
  Table& t = table();
  const Entry* entry = matches(t.entries[t.last], subscripts, v) ? &t.entries[t.last] : nullptr;
  for (size_t i = 0; !entry && i < t.entries.size(); ++i)
    if (matches(t.entries[i], subscripts, v)) entry = &t.entries[t.last = i];
  if (!entry) entry = prepare(args[0], subscripts, v);
  if (!entry) return not_applicable();
  return run(entry->plan, v, entry->release_gil);
}

PyObject* einsum_entry(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* result = guarded([&] { return try_einsum(args, PyVectorcall_NARGS(nargsf), kwnames); });
  if (result != not_applicable()) return result;
  if (!table().fallback) {
    PyErr_SetString(PyExc_RuntimeError, "einstage.einsum: the package's Python part is not loaded; import einstage");
    return nullptr;
  }
  return PyObject_Vectorcall(table().fallback, args, nargsf, kwnames);
}

PyMethodDef einsum_def = {
    "einsum", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&einsum_entry)),
    METH_FASTCALL | METH_KEYWORDS,
    "einsum(*operands, out=None, dtype=None, order='K', casting='safe', optimize=True)\n--\n\n"
    "numpy.einsum on einstage: ``einsum('ij,jk->ik', a, b)`` or ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.\n\n"
    "Same arguments, result dtype and value as NumPy's (docs/python.md lists the differences). ``optimize`` also "
    "takes\n'greedy', 'optimal', 'dp', 'auto', an explicit path and einstage plan specs (docs/planning.md)."};

// ---- ContractExpression.__call__ ----

PlanOf plan_of = nullptr;

PyObject* try_expression(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!default_keywords(args + nargs, kwnames, false)) return not_applicable();
  Views v;
  if (!view_operands(args, static_cast<size_t>(nargs), v)) return not_applicable();
  static PyObject* const name = PyUnicode_InternFromString("_plans");  // never freed, as the module's strings
  py::object plans = py::reinterpret_steal<py::object>(PyObject_GetAttr(self, name));
  if (!plans || !PyDict_Check(plans.ptr())) {
    PyErr_Clear();
    return not_applicable();
  }
  const EinsumPlan* plan = nullptr;
  Py_ssize_t pos = 0;
  PyObject *key = nullptr, *value = nullptr;
  while (!plan && PyDict_Next(plans.ptr(), &pos, &key, &value)) plan = plan_of(value, v.dtype);
  if (!plan || plan->subscripts().inputs.size() != v.n) return not_applicable();
  return run(*plan, v, naive_work(*plan) >= kHoldGilBelow);
}

PyObject* expression_call(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* result = guarded([&] { return try_expression(self, args, nargs, kwnames); });
  if (result != not_applicable()) return result;
  // The general path, ContractExpression._call(self, *args, **kwargs).
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  std::vector<PyObject*> stack(static_cast<size_t>(1 + nargs + nkw));
  stack[0] = self;
  std::copy(args, args + nargs + nkw, stack.begin() + 1);
  static PyObject* const name = PyUnicode_InternFromString("_call");
  return PyObject_VectorcallMethod(name, stack.data(), static_cast<size_t>(1 + nargs), kwnames);
}

PyMethodDef expression_def = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&expression_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "__call__($self, *arrays, out=None, dtype=None, order='K', casting='safe')\n--\n\n"
    "Contracts arrays of the prepared shapes with the prepared plan (numpy.einsum's out=, dtype=, order=, "
    "casting=)."};

}  // namespace

void register_fast_calls(py::module_& m, PlanOf lookup) {
  using namespace pybind11::literals;
  plan_of = lookup;
  py::object einsum =
      py::reinterpret_steal<py::object>(PyCFunction_NewEx(&einsum_def, nullptr, py::str("einstage").ptr()));
  if (!einsum) throw py::error_already_set();
  m.attr("einsum_entry") = einsum;
  m.def("set_einsum_fallback", [](py::function fallback, py::set checked) {
    Table& t = table();
    Py_XDECREF(t.fallback);
    Py_XDECREF(t.checked);
    t.fallback = fallback.release().ptr();
    t.checked = checked.release().ptr();
  }, "fallback"_a, "checked"_a,
        "Gives einsum_entry the general einsum for calls it does not handle and the set of checked subscripts.");
  m.def("expression_call", [](py::type cls) {
    py::object d = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &expression_def));
    if (!d) throw py::error_already_set();
    return d;
  }, "cls"_a, "The compiled __call__ for ContractExpression (cls): prepared plans first, else cls._call.");
}

}  // namespace einstage::python
