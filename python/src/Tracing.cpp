// Traced programs from Python: a TraceContext with its traced tensors, the Program it finishes, the AD passes, the
// lowering, the IR printers and the Runtime that runs programs.
//
// Stage: Python binding (python/). Each function is one call into the C++ API of docs/guide.md sections 2-5
// (compiler/Trace.h's ops, einsum::einsum on traced tensors, ad::grad / value_and_grad / jvp / vjp,
// linalg::svd / qr / eigh, lower_to_standard_ops, print_program / program_to_json / print_dot, Runtime::prepare + Executable::run); NumPy's
// conventions for these (broadcasting, C-order reshape, argnums) are applied in einstage/_trace.py, which calls
// these with einstage's own (explicit broadcast_in_dim, column-major reshape). The current Runtime (Context.h, the
// einsum module linked in) prepares and runs every program; outputs come back as NumPy arrays that own the einstage
// tensor's storage (no copy). Depends on pybind11, Convert.h, compiler/, runtime/ and extensions/einsum.
#include "compiler/Lower.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "extensions/linalg/TraceLinalg.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "python/src/Context.h"
#include "python/src/Convert.h"
#include "python/src/Tracing.h"
#include "runtime/Runtime.h"

#include <pybind11/stl.h>

#include <map>
#include <mutex>

namespace einstage::python {
namespace {

Runtime& runtime() { return *current().runtime; }

struct Traced {
  std::shared_ptr<TraceContext> ctx;
  TracedTensor t;
};

const Traced& same_trace(const Traced& a, const Traced& b) {
  if (a.ctx != b.ctx)
    throw py::value_error("the two tensors belong to different traces; a traced tensor can only be combined with "
                          "tensors of the same trace (pass values in as arguments instead of capturing them)");
  return a;
}

Traced wrap(const Traced& like, TracedTensor t) { return Traced{like.ctx, std::move(t)}; }

// The Python-side handle of one trace; traced tensors share its context so it lives as long as any of them.
struct Tracer {
  std::shared_ptr<TraceContext> ctx;
};

DType parse_dtype_arg(const std::string& text) {
  const std::optional<DType> d = parse_dtype(text);
  if (!d) throw py::type_error(fmt::format("'{}' is not an einstage dtype; use f32, f64, c64, c128 or i64", text));
  return *d;
}

std::vector<Dim> dims_of(const py::sequence& dims) {
  std::vector<Dim> out;
  for (py::handle d : dims) {
    if (py::isinstance<py::str>(d)) out.push_back(Dim::symbol(d.cast<std::string>()));
    else out.push_back(Dim(d.cast<int64_t>()));
  }
  return out;
}

py::tuple shape_tuple(const std::vector<Dim>& dims) {
  py::tuple t(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_constant()) t[i] = py::int_(dims[i].constant());
    else t[i] = py::str(dims[i].to_string());
  }
  return t;
}

Traced binary(const std::string& op, const Traced& a, const Traced& b) {
  same_trace(a, b);
  if (op == "add") return wrap(a, a.t + b.t);
  if (op == "sub") return wrap(a, a.t - b.t);
  if (op == "mul") return wrap(a, a.t * b.t);
  if (op == "div") return wrap(a, a.t / b.t);
  throw py::value_error(fmt::format("unknown binary op '{}'", op));
}

Traced scalar_op(const std::string& op, const Traced& a, double s, bool reversed) {
  if (op == "add") return wrap(a, reversed ? s + a.t : a.t + s);
  if (op == "sub") return wrap(a, reversed ? s - a.t : a.t - s);
  if (op == "mul") return wrap(a, reversed ? s * a.t : a.t * s);
  if (op == "div") return wrap(a, reversed ? s / a.t : a.t / s);
  if (op == "pow" && !reversed) return wrap(a, pow(a.t, s));
  throw py::value_error(fmt::format("unknown scalar op '{}'", op));
}

Traced unary(const std::string& op, const Traced& a) {
  using Fn = TracedTensor (*)(const TracedTensor&);
#define EIN_PY_UNARY_(Struct, name) {#name, &name},
  static const std::map<std::string, Fn, std::less<>> ops = {  // every op of EIN_STD_UNARY_OPS, and two reductions
      EIN_STD_UNARY_OPS(EIN_PY_UNARY_){"sum", &sum}, {"max", &max}};
#undef EIN_PY_UNARY_
  auto it = ops.find(op);
  if (it == ops.end()) throw py::value_error(fmt::format("unknown unary op '{}'", op));
  return wrap(a, it->second(a.t));
}

Comparison comparison(const std::string& cmp) {
  static const std::map<std::string, Comparison, std::less<>> c = {{"lt", Comparison::lt}, {"le", Comparison::le},
                                                                   {"gt", Comparison::gt}, {"ge", Comparison::ge},
                                                                   {"eq", Comparison::eq}, {"ne", Comparison::ne}};
  auto it = c.find(cmp);
  if (it == c.end()) throw py::value_error(fmt::format("unknown comparison '{}'", cmp));
  return it->second;
}

// Outputs own their einstage storage; the NumPy array keeps a copy of the Tensor (a shared handle) alive.
py::array to_numpy(const Tensor& t) {
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  const int64_t es = static_cast<int64_t>(size_of(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * es);
  return py::array(numpy_dtype(t.dtype()), std::move(shape), std::move(strides), keep->raw_data(), owner);
}

// A program and, once it has run, its Executable (shared by copies: pybind11 copies the object it returns).
class PyProgram {
 public:
  explicit PyProgram(Program p) : program_(std::make_shared<const Program>(std::move(p))) {}
  const Program& program() const { return *program_; }

  py::list run(const py::sequence& inputs) const {
    std::vector<py::array> arrays;
    std::vector<Tensor> tensors;
    for (size_t k = 0; k < py::len(inputs); ++k) {
      py::object o = inputs[k];
      if (!py::isinstance<py::array>(o)) throw py::type_error(fmt::format("input {} is not a numpy.ndarray", k));
      arrays.push_back(py::reinterpret_borrow<py::array>(o));
      tensors.push_back(view_array(arrays.back(), fmt::format("input {} ({})", k,
                                                             k < program_->params.size() ? program_->params[k].name : "?")));
    }
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release release;
      outputs = executable().run(tensors);
    }
    py::list out;
    for (const Tensor& t : outputs) out.append(to_numpy(t));
    return out;
  }

 private:
  struct Prepared {
    std::mutex mutex;
    std::optional<Executable> exe;
    uint64_t generation = 0;
  };
  // Prepared on the current runtime, again after set_num_threads (an Executable runs on its runtime's threads).
  Executable executable() const {
    const CallContext now = current();
    std::lock_guard lock(prepared_->mutex);
    if (!prepared_->exe || prepared_->generation != now.generation) {
      prepared_->exe.emplace(now.runtime->prepare(*program_));
      prepared_->generation = now.generation;
    }
    return *prepared_->exe;
  }
  std::shared_ptr<const Program> program_;
  std::shared_ptr<Prepared> prepared_ = std::make_shared<Prepared>();
};

PyProgram transformed(const PyProgram& p, const std::string& how, const std::vector<int>& wrt) {
  const ExtensionRegistry* reg = &runtime().registry();
  py::gil_scoped_release release;
  if (how == "grad") return PyProgram(ad::grad(p.program(), wrt, reg));
  if (how == "value_and_grad") return PyProgram(ad::value_and_grad(p.program(), wrt, reg));
  if (how == "jvp") return PyProgram(ad::jvp(p.program(), wrt, reg));
  if (how == "vjp") return PyProgram(ad::vjp(p.program(), wrt, reg));
  throw Error(ErrorKind::invalid_argument, fmt::format("unknown transformation '{}'", how));
}

// Replays `p`'s instructions into the trace of `args` (a transformed function called inside another trace: grad(f)
// within a jitted function). Every op goes through the trace's Builder again, so its type rule checks it; the
// program's shape constraints become constraints of the trace.
py::list inline_program(const Tracer& tr, const PyProgram& prog, const std::vector<Traced>& args) {
  const Program& p = prog.program();
  if (args.size() != p.params.size())
    throw py::value_error(fmt::format("program @{} takes {} arguments, {} given", p.name, p.params.size(), args.size()));
  std::map<ValueId, TracedTensor> env;
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].ctx != tr.ctx) throw py::value_error("an argument belongs to another trace");
    if (args[k].t.type() != p.params[k].value.type)
      throw py::type_error(fmt::format("argument {} of @{} is {} but the program takes {}", k, p.name,
                                       args[k].t.type().to_string(), p.params[k].value.type.to_string()));
    env[p.params[k].value.id] = args[k].t;
  }
  for (const Instruction& ins : p.instructions) {
    std::vector<TracedTensor> operands;
    for (const Value& v : ins.operands) operands.push_back(env.at(v.id));
    std::vector<TracedTensor> results = tr.ctx->emit_results(ins.op, operands);
    for (size_t r = 0; r < results.size(); ++r) env[ins.results.at(r).id] = results[r];
  }
  for (const ShapeConstraint& c : p.constraints) tr.ctx->require_equal(c.lhs, c.rhs, c.what);
  py::list out;
  for (const Value& v : p.outputs) out.append(Traced{tr.ctx, env.at(v.id)});
  return out;
}

}  // namespace

void register_tracing(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<Traced>(m, "Traced")
      .def_property_readonly("dtype", [](const Traced& t) { return numpy_dtype(t.t.dtype()); })
      .def_property_readonly("shape", [](const Traced& t) { return shape_tuple(t.t.dims()); })
      .def_property_readonly("ndim", [](const Traced& t) { return t.t.rank(); });

  py::class_<Tracer>(m, "Tracer")
      .def(py::init([](const std::string& name) {
        return Tracer{std::make_shared<TraceContext>(name, &runtime().registry())};
      }), "name"_a)
      .def("parameter", [](const Tracer& tr, const std::string& name, const std::string& dtype,
                           const py::sequence& dims) {
        return Traced{tr.ctx, tr.ctx->parameter(name, parse_dtype_arg(dtype), dims_of(dims))};
      }, "name"_a, "dtype"_a, "dims"_a)
      .def("constant", [](const Tracer& tr, const py::array& a) {
        return Traced{tr.ctx, tr.ctx->constant(view_array(a, "constant").clone())};
      }, "value"_a)
      .def("finish", [](const Tracer& tr, const std::vector<Traced>& outputs) {
        std::vector<TracedTensor> outs;
        for (const Traced& o : outputs) {
          if (o.ctx != tr.ctx) throw py::value_error("an output belongs to another trace");
          outs.push_back(o.t);
        }
        return PyProgram(tr.ctx->finish(outs));
      }, "outputs"_a)
      .def("inline", &inline_program, "program"_a, "args"_a);

  m.def("t_binary", &binary, "op"_a, "a"_a, "b"_a);
  m.def("t_scalar", &scalar_op, "op"_a, "a"_a, "s"_a, "reversed"_a = false);
  m.def("t_unary", &unary, "op"_a, "a"_a);
  m.def("t_reshape", [](const Traced& a, const py::sequence& dims) { return wrap(a, reshape(a.t, dims_of(dims))); },
        "a"_a, "dims"_a, "einstage's reshape: column-major element order");
  m.def("t_transpose", [](const Traced& a, const Axes& perm) { return wrap(a, transpose(a.t, perm)); });
  m.def("t_broadcast", [](const Traced& a, const Axes& dims, const py::sequence& shape) {
    return wrap(a, broadcast_in_dim(a.t, dims, dims_of(shape)));
  });
  m.def("t_reduce_sum", [](const Traced& a, const Axes& axes) { return wrap(a, reduce_sum(a.t, axes)); });
  m.def("t_reduce_max", [](const Traced& a, const Axes& axes) { return wrap(a, reduce_max(a.t, axes)); });
  m.def("t_convert", [](const Traced& a, const std::string& dtype) { return wrap(a, convert(a.t, parse_dtype_arg(dtype))); });
  m.def("t_select", [](const std::string& cmp, const Traced& a, const Traced& b, const Traced& x, const Traced& y) {
    same_trace(a, b);
    same_trace(a, x);
    same_trace(a, y);
    return wrap(a, select(comparison(cmp), a.t, b.t, x.t, y.t));
  });
  m.def("t_einsum", [](const std::string& subscripts, const std::vector<Traced>& operands, const std::string& plan) {
    if (operands.empty()) throw py::value_error("einsum needs at least one operand");
    std::vector<TracedTensor> ts;
    for (const Traced& o : operands) {
      same_trace(operands[0], o);
      ts.push_back(o.t);
    }
    einsum::TraceEinsumOptions options;
    options.plan = einsum::PlanSpec::parse(plan);
    options.allow_broadcast = true;
    return wrap(operands[0], einsum::einsum(*operands[0].ctx, subscripts, ts, options));
  });

  // The decompositions (extensions/linalg): batches along the right axes, einstage's convention; einstage/_trace.py
  // moves NumPy's left batch axes there and back.
  m.def("t_svd", [](const Traced& a, bool full, int64_t keep) {
    linalg::SvdOptions options;
    options.full = full;
    options.keep = keep;
    auto [u, s, vh] = linalg::svd(*a.ctx, a.t, options);
    return py::make_tuple(wrap(a, u), wrap(a, s), wrap(a, vh));
  }, "a"_a, "full"_a = false, "keep"_a = 0);
  m.def("t_qr", [](const Traced& a) {
    auto [q, r] = linalg::qr(*a.ctx, a.t);
    return py::make_tuple(wrap(a, q), wrap(a, r));
  });
  m.def("t_eigh", [](const Traced& a) {
    auto [w, v] = linalg::eigh(*a.ctx, a.t);
    return py::make_tuple(wrap(a, w), wrap(a, v));
  });

  py::class_<PyProgram>(m, "Program")
      .def("__str__", [](const PyProgram& p) { return print_program(p.program()); })
      .def("json", [](const PyProgram& p) { return program_to_json(p.program()); })
      .def("dot", [](const PyProgram& p) { return print_dot(p.program()); })
      .def("lower", [](const PyProgram& p, const DimBindings& bindings) {
        return PyProgram(lower_to_standard_ops(p.program(), bindings, runtime().registry()));
      }, "bindings"_a = DimBindings{})
      .def("transform", &transformed, "how"_a, "wrt"_a)
      .def("run", &PyProgram::run, "inputs"_a)
      .def_property_readonly("name", [](const PyProgram& p) { return p.program().name; })
      .def_property_readonly("params", [](const PyProgram& p) {
        py::list params;
        for (const Parameter& q : p.program().params)
          params.append(py::make_tuple(q.name, std::string(name(q.value.type.dtype)), shape_tuple(q.value.type.dims)));
        return params;
      })
      .def_property_readonly("num_outputs", [](const PyProgram& p) { return p.program().outputs.size(); })
      .def_static("parse", [](const std::string& text) { return PyProgram(parse_program(text, &runtime().registry())); })
      .def_static("from_json", [](const std::string& text) {
        return PyProgram(program_from_json(text, &runtime().registry()));
      });
}

}  // namespace einstage::python
