// The `_einstage` extension module: the NumPy-facing entry points of the einsum library, nothing more.
//
// Stage: Python binding (python/). The two hot calls, einstage.einsum and ContractExpression.__call__, are compiled
// separately (FastCall.h) and come here for everything but their common case. Every function converts its arguments
// (Convert.h: arrays are viewed in place, never copied), releases the GIL, and calls the C++ API the command line
// calls too: the cached one-shot plan of Einsum.h (cached_plan + EinsumPlan::execute_into, so the result is written
// straight into a NumPy array), a SlicedEinsumPlan under a memory limit, and bind_einsum + plan_contraction + evaluate
// for path reports. The NumPy rules that sit on top (the interleaved form, result dtypes, out= casting, views for one
// operand) are in the pure-Python package (einstage/_einsum.py). Depends on pybind11, Convert.h and extensions/einsum.
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/exec/SlicedEinsum.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "extensions/einsum/planner/Report.h"
#include "python/src/Context.h"
#include "python/src/Convert.h"
#include "python/src/FastCall.h"
#include "python/src/Tracing.h"
#include "runtime/Context.h"

#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <unordered_map>

namespace einstage::python {
namespace {

using einsum::EinsumOptions;
using einsum::EinsumPlan;
using einsum::PlanSpec;
using einsum::SlicedEinsumPlan;
using einsum::TensorMeta;

// Plan specs arrive as text on every call; parsing the same few strings again is the only per-call work a cached
// einsum would otherwise add, so the parsed specs are kept (bounded: a program uses a handful).
PlanSpec parse_spec(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, PlanSpec> parsed;
  {
    std::lock_guard lock(mutex);
    if (auto it = parsed.find(text); it != parsed.end()) return it->second;
  }
  PlanSpec spec = PlanSpec::parse(text);
  std::lock_guard lock(mutex);
  if (parsed.size() > 256) parsed.clear();
  parsed.emplace(text, spec);
  return spec;
}

// Operands as tensors viewing the arrays (which the caller's list keeps alive for the call).
struct Operands {
  std::vector<py::array> arrays;
  std::vector<Tensor> tensors;
  std::vector<TensorMeta> metas;
};

Operands view_operands(const py::sequence& operands) {
  Operands ops;
  const size_t n = py::len(operands);
  ops.arrays.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    py::object o = operands[k];
    if (!py::isinstance<py::array>(o))
      throw py::type_error(fmt::format("operand {} is a {}, not a numpy.ndarray", k,
                                       std::string(py::str(o.get_type().attr("__name__")))));
    ops.arrays.push_back(py::reinterpret_borrow<py::array>(o));
    ops.tensors.push_back(view_array(ops.arrays.back(), "operand", static_cast<int64_t>(k)));
    ops.metas.push_back(TensorMeta::of(ops.tensors.back()));
  }
  return ops;
}

char order_char(const std::string& order) {
  if (order == "C" || order == "F") return order[0];
  throw py::value_error(fmt::format("order must be 'C' or 'F', not '{}'", order));
}

EinsumOptions options_for(const std::string& plan, ExecutionContext* context = nullptr) {
  EinsumOptions options;
  options.plan = parse_spec(plan);
  options.allow_broadcast = true;  // NumPy stretches length-1 axes of named labels too
  options.context = context;       // its plan cache (prepare() itself ignores the context)
  return options;
}

// The result array: `out` when given (any strides), else a fresh array in `order`.
py::array result_array(const py::object& out, DType dtype, const Shape& shape, char order) {
  if (out.is_none()) return new_array(dtype, shape, order);
  if (!py::isinstance<py::array>(out)) throw py::type_error("out must be a numpy.ndarray");
  return py::reinterpret_borrow<py::array>(out);
}

// A sliced contraction returns a fresh tensor; it is copied into the result array (one pass over the output).
py::array run_sliced(const SlicedEinsumPlan& plan, const Operands& ops, const py::object& out, char order) {
  Tensor result;
  {
    py::gil_scoped_release release;
    ExecutionContext& context = *current().context;
    result = plan.execute(ops.tensors, context, &context.pool());
  }
  py::array array = result_array(out, plan.dtype(), plan.output_shape(), order);
  Tensor view = view_array(array, "out", -1, true);
  if (view.shape() != result.shape())
    throw py::value_error(fmt::format("out has shape {} but the einsum's result has shape {}",
                                      shape_to_string(view.shape()), shape_to_string(result.shape())));
  if (view.dtype() != result.dtype())
    throw py::type_error(fmt::format("out has dtype {} but the einsum's result has dtype {}", name(view.dtype()),
                                     name(result.dtype())));
  py::gil_scoped_release release;
  view.copy_from(result);
  return array;
}

py::array run_plan(const EinsumPlan& plan, const Operands& ops, const py::object& out, char order) {
  py::array array = result_array(out, plan.dtype(), plan.output_shape(), order);
  Tensor view = view_array(array, "out", -1, true);
  py::gil_scoped_release release;
  ExecutionContext& context = *current().context;
  plan.execute_into(ops.tensors, view, context, &context.pool());
  return array;
}

py::array einsum_call(const std::string& subscripts, const py::sequence& operands, const py::object& out,
                      const std::string& order, const std::string& plan, int64_t max_memory) {
  const char o = order_char(order);
  Operands ops = view_operands(operands);
  EinsumOptions options = options_for(plan, current().context);
  if (max_memory > 0) {
    std::optional<SlicedEinsumPlan> sliced;
    {
      py::gil_scoped_release release;
      sliced.emplace(SlicedEinsumPlan::prepare(subscripts, ops.metas, max_memory, options));
    }
    return run_sliced(*sliced, ops, out, o);
  }
  std::optional<EinsumPlan> prepared;
  {
    py::gil_scoped_release release;
    prepared.emplace(einsum::cached_plan(subscripts, ops.metas, options));
  }
  return run_plan(*prepared, ops, out, o);
}

// NumPy returns a view for one operand when nothing is summed (a transpose, a diagonal): the output's strides are
// sums of the operand's. None when the einsum sums something or repeats an output label.
py::object single_view(const std::string& subscripts, const py::array& a) {
  const einsum::Notation notation = einsum::parse_notation(subscripts, 1);
  const std::vector<Shape> shapes = {shape_of(a)};
  const einsum::BoundEinsum bound = einsum::bind_einsum(notation, shapes, true);
  const auto& in = bound.subs.inputs.at(0);
  const auto& outl = bound.subs.output;
  for (size_t i = 0; i < outl.size(); ++i)
    for (size_t j = i + 1; j < outl.size(); ++j)
      if (outl[i] == outl[j]) return py::none();
  for (einsum::Label l : in)
    if (std::find(outl.begin(), outl.end(), l) == outl.end()) return py::none();
  std::vector<py::ssize_t> shape, strides;
  for (einsum::Label l : outl) {
    py::ssize_t stride = 0;
    for (size_t ax = 0; ax < in.size(); ++ax)
      if (in[ax] == l) stride += a.strides()[ax];
    shape.push_back(static_cast<py::ssize_t>(bound.extents.at(l)));
    strides.push_back(stride);
  }
  return py::array(a.dtype(), std::move(shape), std::move(strides), a.data(), a);
}

std::vector<std::string> names_of(const einsum::Subscripts& subs, const std::vector<einsum::Label>& labels) {
  std::vector<std::string> names;
  for (einsum::Label l : labels) names.push_back(einsum::label_name(subs, l));
  return names;
}

py::list steps_of(const einsum::Subscripts& subs, const einsum::TreeCost& cost) {
  py::list steps;
  for (const einsum::StepCost& s : cost.steps) {
    py::dict d;
    d["left"] = s.left;
    d["right"] = s.right;
    d["result"] = s.result;
    d["left_labels"] = names_of(subs, s.left_labels);
    d["right_labels"] = names_of(subs, s.right_labels);
    d["result_labels"] = names_of(subs, s.result_labels);
    d["summed"] = names_of(subs, s.summed);
    d["flops"] = s.flops;
    d["left_size"] = s.left_size;
    d["right_size"] = s.right_size;
    d["result_size"] = s.result_size;
    steps.append(std::move(d));
  }
  return steps;
}

void put_totals(py::dict& d, const einsum::TreeCost& cost) {
  d["flops"] = cost.flops;
  d["tc"] = cost.tc;
  d["sc"] = cost.sc;
  d["rw"] = cost.rw;
  d["max_intermediate"] = cost.max_intermediate;
  d["peak_memory"] = cost.peak_memory;
  d["naive_flops"] = cost.naive_flops;
}

std::vector<std::pair<int, int>> positional(const einsum::ContractionTree& tree) { return tree.to_positional_path(); }

// The planner's answer for these shapes, as the command line's `einstage plan` reports it, plus the numbers a
// PathInfo needs. `element_bytes` turns max_memory (bytes) into elements for slicing.
py::dict plan_info(const std::string& subscripts, const std::vector<Shape>& shapes, const std::string& plan,
                   int64_t max_memory, int element_bytes) {
  const einsum::Notation notation = einsum::parse_notation(subscripts, shapes.size());
  PlanSpec spec = parse_spec(plan);
  if (!notation.order.empty() && spec == PlanSpec{}) spec = PlanSpec::tree_plan(notation.order);
  py::dict d;
  std::optional<einsum::BoundEinsum> bound;
  std::optional<einsum::PlanResult> result;
  std::optional<einsum::SlicedPlan> sliced;
  std::optional<einsum::TreeCost> cost;
  {
    py::gil_scoped_release release;
    bound.emplace(einsum::bind_einsum(notation, shapes, true));
    if (max_memory > 0) {
      const einsum::SliceLimit limit{static_cast<double>(max_memory / std::max(element_bytes, 1)), element_bytes};
      sliced.emplace(einsum::plan_sliced(spec, bound->subs, bound->extents, limit));
    } else {
      result.emplace(einsum::plan_contraction(spec, bound->subs, bound->extents));
      cost.emplace(einsum::evaluate(bound->subs, bound->extents, result->tree));
    }
  }
  const einsum::Subscripts& subs = bound->subs;
  py::list inputs;
  for (const auto& term : subs.inputs) inputs.append(names_of(subs, term));
  d["inputs"] = inputs;
  d["output"] = names_of(subs, subs.output);
  d["canonical"] = einsum::to_string(subs);
  py::dict extents;
  for (const auto& [label, extent] : bound->extents) extents[py::str(einsum::label_name(subs, label))] = extent;
  d["extents"] = extents;
  if (sliced) {
    d["method"] = sliced->method;
    d["tree"] = sliced->tree.steps();
    d["path"] = positional(sliced->tree);
    d["steps"] = steps_of(subs, sliced->slice_cost);
    put_totals(d, sliced->slice_cost);
    d["sliced"] = names_of(subs, sliced->sliced);
    d["num_slices"] = sliced->num_slices;
    d["total_flops"] = sliced->total_flops;
    d["unsliced_flops"] = sliced->unsliced_cost.flops;
    d["overhead"] = sliced->overhead;
    d["report"] = einsum::sliced_report_text(subs, *sliced);
  } else {
    d["method"] = result->method;
    d["tree"] = result->tree.steps();
    d["path"] = positional(result->tree);
    d["steps"] = steps_of(subs, *cost);
    put_totals(d, *cost);
    d["sliced"] = std::vector<std::string>{};
    d["num_slices"] = 1.0;
    d["total_flops"] = cost->flops;
    d["unsliced_flops"] = cost->flops;
    d["overhead"] = 1.0;
    d["report"] = einsum::report_text(subs, result->tree, *cost, result->method);
  }
  return d;
}

// A plan prepared once for given shapes and dtypes (contract_expression): calls skip parsing, binding, planning and
// the cache lookup.
class Plan {
 public:
  Plan(const std::string& subscripts, const std::vector<Shape>& shapes, const std::vector<std::string>& dtypes,
       const std::string& plan, int64_t max_memory) {
    if (dtypes.size() != shapes.size())
      throw py::value_error(fmt::format("{} dtypes given for {} shapes", dtypes.size(), shapes.size()));
    std::vector<TensorMeta> metas;
    for (size_t k = 0; k < shapes.size(); ++k) {
      const std::optional<DType> dt = parse_dtype(dtypes[k]);
      if (!dt) throw py::type_error(fmt::format("dtype '{}' of operand {} is not an einstage dtype", dtypes[k], k));
      metas.push_back(TensorMeta{*dt, shapes[k]});
    }
    EinsumOptions options = options_for(plan);
    py::gil_scoped_release release;
    if (max_memory > 0) sliced_.emplace(SlicedEinsumPlan::prepare(subscripts, metas, max_memory, options));
    else plan_.emplace(EinsumPlan::prepare(subscripts, metas, options));
  }
  /// The plan a compiled call (FastCall.h) runs for operands of `dtype`: nullptr for another dtype or a sliced plan.
  const EinsumPlan* einsum_plan(DType dtype) const { return plan_ && plan_->dtype() == dtype ? &*plan_ : nullptr; }
  py::array call(const py::sequence& operands, const py::object& out, const std::string& order) const {
    const char o = order_char(order);
    Operands ops = view_operands(operands);
    return sliced_ ? run_sliced(*sliced_, ops, out, o) : run_plan(*plan_, ops, out, o);
  }
  DType dtype() const { return sliced_ ? sliced_->dtype() : plan_->dtype(); }
  Shape output_shape() const { return sliced_ ? sliced_->output_shape() : plan_->output_shape(); }
  std::string text() const { return sliced_ ? sliced_->to_string() : plan_->to_string(); }

 private:
  std::optional<EinsumPlan> plan_;
  std::optional<SlicedEinsumPlan> sliced_;
};

}  // namespace
}  // namespace einstage::python

PYBIND11_MODULE(_einstage, m) {
  using namespace einstage;
  using namespace einstage::python;
  using namespace pybind11::literals;
  m.doc() = "einstage's compiled core: the einsum library's NumPy entry points (use the einstage package)";
  register_error_translation();
  m.def("einsum", &einsum_call, "subscripts"_a, "operands"_a, "out"_a = py::none(), "order"_a = "F",
        "plan"_a = "auto", "max_memory"_a = 0,
        "Contracts einstage-dtype arrays (read in place) into a new array in `order`, or into `out`.");
  m.def("single_view", &single_view, "subscripts"_a, "operand"_a,
        "The view NumPy returns for a one-operand einsum that sums nothing, else None.");
  m.def("plan_info", &plan_info, "subscripts"_a, "shapes"_a, "plan"_a = "auto", "max_memory"_a = 0,
        "element_bytes"_a = 8, "The planner's tree, cost table and report for operands of these shapes.");
  m.def("normalize_plan", [](const std::string& text) { return parse_spec(text).to_string(); }, "plan"_a,
        "Parses a plan spec (docs/planning.md) and prints it back in its canonical form.");
  m.def("dtype_name", [](const py::dtype& dt) -> py::object {
    const std::optional<DType> d = einstage::python::dtype_of(dt);
    return d ? py::object(py::str(std::string(name(*d)))) : py::object(py::none());
  }, "dtype"_a, "einstage's name of a NumPy dtype ('f64', ...) or None.");
  m.def("threads", [] { return current().context->threads(); }, "Threads the calls run on.");
  m.def("set_num_threads", [](int n) { set_num_threads(n); }, "threads"_a,
        "Runs later calls on a new context of n threads (0: every CPU this process may use).");
  m.def("cache_stats", [] {
    const einsum::EinsumCacheStats s = einsum::einsum_cache_stats(*current().context);
    return py::dict("hits"_a = s.hits, "misses"_a = s.misses, "entries"_a = s.entries, "capacity"_a = s.capacity);
  }, "The one-shot einsum plan cache's counters.");
  py::class_<Plan>(m, "Plan")
      .def(py::init<const std::string&, const std::vector<Shape>&, const std::vector<std::string>&,
                    const std::string&, int64_t>(),
           "subscripts"_a, "shapes"_a, "dtypes"_a, "plan"_a = "auto", "max_memory"_a = 0)
      .def("__call__", &Plan::call, "operands"_a, "out"_a = py::none(), "order"_a = "F")
      .def_property_readonly("dtype", [](const Plan& p) { return numpy_dtype(p.dtype()); })
      .def_property_readonly("output_shape", [](const Plan& p) {
        const Shape s = p.output_shape();
        return py::tuple(py::cast(std::vector<int64_t>(s.begin(), s.end())));
      })
      .def("text", &Plan::text);
  // The compiled ContractExpression call finds its Plan by the exact type and reads the C++ object out of the
  // pybind11 instance directly (a caster's load would hash the type's name on every call).
  static PyTypeObject* plan_type = reinterpret_cast<PyTypeObject*>(m.attr("Plan").ptr());
  register_fast_calls(m, [](PyObject* object, DType dtype) -> const einsum::EinsumPlan* {
    if (Py_TYPE(object) != plan_type) return nullptr;
    auto* instance = reinterpret_cast<py::detail::instance*>(object);
    const auto* plan = static_cast<const Plan*>(instance->get_value_and_holder().value_ptr());
    return plan ? plan->einsum_plan(dtype) : nullptr;
  });
  register_tracing(m);
}
