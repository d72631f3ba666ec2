#include "compiler/Lower.h"

#include "ir/Quote.h"

#include <fmt/format.h>

#include <map>

namespace einstage {

namespace {

Dim substitute(const Dim& d, const DimBindings& bindings) {
  if (auto v = d.evaluate(bindings)) return Dim(*v);
  return d;
}

std::vector<Dim> substitute(const std::vector<Dim>& dims, const DimBindings& bindings) {
  std::vector<Dim> out;
  for (const Dim& d : dims) out.push_back(substitute(d, bindings));
  return out;
}

TensorType substitute(const TensorType& t, const DimBindings& bindings) {
  return TensorType{t.dtype, substitute(t.dims, bindings)};
}

// Only symbols that are fully bound are checked here; the rest stay constraints of the lowered program.
bool bound(const Dim& d, const DimBindings& bindings) { return d.evaluate(bindings).has_value(); }

}  // namespace

Program lower_to_standard_ops(const Program& program, const DimBindings& bindings, const ExtensionRegistry& registry) {
  Program checked;  // the constraints whose symbols are all bound
  checked.name = program.name;
  checked.params = program.params;
  checked.instructions = program.instructions;
  for (const ShapeConstraint& c : program.constraints)
    if (bound(c.lhs, bindings) && bound(c.rhs, bindings)) checked.constraints.push_back(c);
  check_constraints(checked, bindings);

  Builder b(program.name, &registry);
  std::map<ValueId, Value> map;  // old id -> new value
  std::map<ValueId, size_t> formless;  // old id -> its instruction: lowered to a placeholder (no standard-op form)
  // A value lowered to a placeholder may go to its users' lower rules (which do not read it), to nothing else.
  auto require_form = [&](const Value& v, std::string_view user) {
    auto it = formless.find(v.id);
    if (it == formless.end()) return;
    const auto& ext = std::get<ExtensionOp>(program.instructions[it->second].op);
    fail(ErrorKind::unsupported, "lower_to_standard_ops: '{}' at %{} in @{} has no standard-op form (its users' "
         "lowering does not read it), but {} read{} it; lower a program in which only those users read it",
         ext.family(), it->second, shown_arg(program.name), user, user.starts_with("the program's outputs") ? "" : "s");
  };
  for (const Parameter& p : program.params) map[p.value.id] = b.parameter(p.name, substitute(p.value.type, bindings));
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction& inst = program.instructions[i];
    std::vector<Value> operands;
    for (const Value& v : inst.operands) operands.push_back(map.at(v.id));
    Value result;
    if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) {
      const ExtensionSemantics& sem = registry.get(ext->family());
      if (!sem.lower)
        fail(ErrorKind::unsupported, "lower_to_standard_ops: '{}' at %{} in @{} has no lowering rule (module '{}' "
             "registers none); run the program with a runtime that loads the module instead", ext->family(), i,
             shown_arg(program.name), sem.module);
      try {
        result = sem.lower(b, inst, operands, bindings);
      } catch (const Error& e) {
        throw Error(e.kind(), fmt::format("lowering '{}' at %{} in @{}: {}", ext->family(), i, shown_arg(program.name), e.what()));
      }
      TensorType expected = substitute(inst.result.type, bindings);
      if (result.id < 0) {  // a placeholder: the rule says the result has no standard-op form
        formless[inst.result.id] = i;
        result.type = expected;
      } else if (result.type != expected)
        fail(ErrorKind::verification, "lowering '{}' at %{} in @{} produced type {} but the instruction has type {}",
             ext->family(), i, shown_arg(program.name), result.type.to_string(), expected.to_string());
    } else {
      for (const Value& v : inst.operands) require_form(v, fmt::format("'{}' at %{}", op_name(inst.op), i));
      Op op = inst.op;
      if (auto* r = std::get_if<Reshape>(&op)) r->shape = substitute(r->shape, bindings);
      if (auto* bc = std::get_if<BroadcastInDim>(&op)) bc->shape = substitute(bc->shape, bindings);
      result = b.emit(std::move(op), std::move(operands));
    }
    map[inst.result.id] = result;
  }
  std::vector<Value> outputs;
  for (const Value& v : program.outputs) {
    require_form(v, "the program's outputs");
    outputs.push_back(map.at(v.id));
  }
  // Constraints with unbound symbols survive; the ones the builder recorded again while re-emitting are kept too.
  for (const ShapeConstraint& c : program.constraints) {
    Dim l = substitute(c.lhs, bindings), r = substitute(c.rhs, bindings);
    if (l.is_constant() && r.is_constant()) continue;
    b.require_equal(l, r, c.what);
  }
  return b.finish(std::move(outputs));
}

}  // namespace einstage
