// Reverse mode assembled from the other transformations: vjp = linearize + transpose (never a per-op vjp), grad =
// vjp with the cotangent 1, and the inliner that lets one program be emitted inside another. See Ad.h.
#include "compiler/Dce.h"
#include "compiler/ad/Ad.h"
#include "compiler/ad/Util.h"
#include "ir/Quote.h"
#include "ir/ValueMap.h"

#include <map>
#include <set>
#include <numeric>

namespace einstage::ad {

std::vector<Value> inline_program(Builder& b, const Program& program, std::span<const Value> args) {
  EIN_ASSERT(args.size() == program.params.size(), "inline_program: {} arguments for @{} with {} parameters",
             args.size(), shown_arg(program.name), program.params.size());
  ValueMap<Value> mapped(program);
  for (size_t i = 0; i < args.size(); ++i) mapped.insert_or_assign(program.params[i].value.id, args[i]);
  for (const ShapeConstraint& c : program.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);
  for (const Instruction& inst : program.instructions) {
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(mapped.at(v.id));
    std::vector<Value> rs = b.emit_results(inst.op, std::move(ops));
    for (size_t r = 0; r < rs.size(); ++r) mapped.insert_or_assign(inst.results[r].id, rs[r]);
  }
  std::vector<Value> out;
  for (const Value& v : program.outputs) out.push_back(mapped.at(v.id));
  return out;
}

namespace {

// vjp without the families' rewrites (detail::finish_public): grad's input. `output_numbers` (empty: 0, 1, ...) are
// the numbers in the cotangents' names, the outputs' indices in the program they were selected from.
Program plain_vjp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry,
                  std::span<const int> output_numbers = {}) {
  detail::check_parameter_indices(program, wrt, "vjp", "wrt");
  detail::check_registry(program, registry);
  Linearized lin = linearize(program, wrt, registry);
  std::vector<int> tangent_inputs(wrt.size());
  std::iota(tangent_inputs.begin(), tangent_inputs.end(), lin.num_residuals);
  Program back = transpose(lin.linear, tangent_inputs, registry);

  Builder b(program.name + "_vjp", registry);
  std::set<std::string> used;
  for (const Parameter& p : program.params) used.insert(p.name);
  std::vector<Value> params;
  for (const Parameter& p : program.params) params.push_back(b.parameter(p.name, p.value.type));
  std::vector<Value> cts;
  for (size_t k = 0; k < program.outputs.size(); ++k)
    cts.push_back(b.parameter(
        detail::fresh_name(used, "ct_" + std::to_string(output_numbers.empty() ? int(k) : output_numbers[k])),
        program.outputs[k].type));
  std::vector<Value> primal = inline_program(b, lin.primal, params);  // outputs, then residuals
  std::vector<Value> back_args(primal.begin() + lin.num_outputs, primal.end());
  back_args.insert(back_args.end(), cts.begin(), cts.end());
  std::vector<Value> grads = inline_program(b, back, back_args);
  std::vector<Value> outputs(primal.begin(), primal.begin() + lin.num_outputs);
  outputs.insert(outputs.end(), grads.begin(), grads.end());
  return detail::clean_up(b.finish(std::move(outputs)));
}

Program grad_impl(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry,
                  bool with_value, std::string_view transform) {
  if (program.outputs.size() != 1)
    fail(ErrorKind::invalid_argument, "{}: @{} has {} outputs but grad needs exactly one (a real scalar); "
         "choose one by index ({}(program, output, wrt, registry)), or use vjp with a cotangent per output", transform,
         shown_arg(program.name), program.outputs.size(), transform);
  const TensorType& out = program.outputs[0].type;
  if (is_complex(out.dtype))
    fail(ErrorKind::dtype, "{}: @{} returns {} but grad needs a real output (as JAX's grad); take real() or the "
         "squared magnitude first, or use vjp with a cotangent", transform, shown_arg(program.name), out.to_string());
  if (!is_floating(out.dtype))
    fail(ErrorKind::dtype, "{}: @{} returns {}; an integer output has no gradient", transform, shown_arg(program.name),
         out.to_string());
  if (out.rank() != 0)
    fail(ErrorKind::shape, "{}: @{} returns {} but grad needs a scalar output; reduce it first (e.g. sum), or use "
         "vjp with a cotangent of that shape", transform, shown_arg(program.name), out.to_string());
  Program v = plain_vjp(program, wrt, registry);
  Builder b(program.name + (with_value ? "_value_and_grad" : "_grad"), registry);
  std::vector<Value> args;
  for (const Parameter& p : program.params) args.push_back(b.parameter(p.name, p.value.type));
  args.push_back(b.full(out, 1.0));
  std::vector<Value> res = inline_program(b, v, args);  // value, then one cotangent per wrt entry
  std::vector<Value> outputs;
  if (with_value) outputs.push_back(res[0]);
  // JAX's convention for a complex parameter z = x + iy: df/dx - i df/dy, the conjugate of the adjoint cotangent.
  for (size_t i = 1; i < res.size(); ++i) outputs.push_back(is_complex(res[i].type.dtype) ? b.conj(res[i]) : res[i]);
  return detail::clean_up(b.finish(std::move(outputs)));
}

// "(f64[], f64[3])": the output types of `program`, for messages.
std::string output_types(const Program& program) {
  std::string out = "(";
  for (size_t k = 0; k < program.outputs.size(); ++k)
    out += (k ? ", " : "") + program.outputs[k].type.to_string();
  return out + ")";
}

}  // namespace

Program select_outputs(const Program& program, const Outputs& outputs, std::string_view transform) {
  const int n = int(program.outputs.size());
  Program selected = program;
  selected.outputs.clear();
  std::set<int> seen;
  for (int k : outputs.indices) {
    if (k < 0 || k >= n)
      fail(ErrorKind::invalid_argument, "{}: output index {} is out of range for @{}, which has {} output{} {}; give "
           "an index from 0 to {}", transform, k, shown_arg(program.name), n, n == 1 ? "" : "s",
           output_types(program), n - 1);
    if (!seen.insert(k).second)
      fail(ErrorKind::invalid_argument, "{}: output {} of @{} is selected twice; give each output once", transform, k,
           shown_arg(program.name));
    selected.outputs.push_back(program.outputs[size_t(k)]);
  }
  return eliminate_dead_code(selected);
}

Program grad(const Program& program, int output, std::span<const int> wrt, const ExtensionRegistry* registry) {
  return grad(select_outputs(program, Outputs{output}, "grad"), wrt, registry);
}

Program value_and_grad(const Program& program, int output, std::span<const int> wrt,
                       const ExtensionRegistry* registry) {
  return value_and_grad(select_outputs(program, Outputs{output}, "value_and_grad"), wrt, registry);
}

Program vjp(const Program& program, const Outputs& outputs, std::span<const int> wrt,
            const ExtensionRegistry* registry) {
  return detail::finish_public(plain_vjp(select_outputs(program, outputs, "vjp"), wrt, registry, outputs.indices),
                               registry);
}

Program vjp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry) {
  return detail::finish_public(plain_vjp(program, wrt, registry), registry);
}

Program grad(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry) {
  return detail::finish_public(grad_impl(program, wrt, registry, false, "grad"), registry);
}

Program value_and_grad(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry) {
  return detail::finish_public(grad_impl(program, wrt, registry, true, "value_and_grad"), registry);
}

}  // namespace einstage::ad
