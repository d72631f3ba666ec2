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

std::string LoweredProgram::describe() const {
  std::string out;
  for (const KeptOp& k : kept)
    out += fmt::format("kept '{}' at {} ({} in the lowered program): module '{}' registers no lowering rule\n",
                       k.family, k.at, k.lowered_at, k.module);
  return out;
}

Program lower_to_standard_ops(const Program& program, const DimBindings& bindings, const ExtensionRegistry& registry) {
  return lower_to_standard_ops(program, bindings, registry, LowerOptions{}).program;
}

LoweredProgram lower_to_standard_ops(const Program& program, const DimBindings& bindings,
                                     const ExtensionRegistry& registry, const LowerOptions& options) {
  Program checked;  // the constraints whose symbols are all bound
  checked.name = program.name;
  checked.params = program.params;
  checked.instructions = program.instructions;
  for (const ShapeConstraint& c : program.constraints)
    if (bound(c.lhs, bindings) && bound(c.rhs, bindings)) checked.constraints.push_back(c);
  check_constraints(checked, bindings);

  Builder b(program.name, &registry);
  LoweredProgram lowered;
  std::vector<Value> kept_values;  // the first result of each kept op, for its name in the lowered program
  auto names = value_names(program);
  std::map<ValueId, Value> map;  // old id -> new value
  std::map<ValueId, size_t> formless;  // old id -> its instruction: lowered to a placeholder (no standard-op form)
  // A value lowered to a placeholder may go to its users' lower rules (which do not read it), to nothing else.
  auto require_form = [&](const Value& v, std::string_view user) {
    auto it = formless.find(v.id);
    if (it == formless.end()) return;
    const auto& ext = std::get<ExtensionOp>(program.instructions[it->second].op);
    fail(ErrorKind::unsupported, "lower_to_standard_ops: '{}' at {} in @{} has no standard-op form (its users' "
         "lowering does not read it), but {} read{} it; lower a program in which only those users read it",
         ext.family(), names.at(v.id), shown_arg(program.name), user,
         user.starts_with("the program's outputs") ? "" : "s");
  };
  for (const Parameter& p : program.params) map[p.value.id] = b.parameter(p.name, substitute(p.value.type, bindings));
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction& inst = program.instructions[i];
    const std::string& at = names.at(inst.results[0].id);
    std::vector<Value> operands;
    for (const Value& v : inst.operands) operands.push_back(map.at(v.id));
    std::vector<Value> results;
    const auto* ext = std::get_if<ExtensionOp>(&inst.op);
    const ExtensionSemantics* semantics = ext ? &registry.get(ext->family()) : nullptr;
    const bool lowerable =
        semantics && ((inst.results.size() == 1 && semantics->lower) || semantics->lower_results);
    if (ext && !lowerable && options.keep_unlowerable) {  // partial lowering: the op stays, on lowered operands
      for (const Value& v : inst.operands) require_form(v, fmt::format("'{}' at {} (kept)", ext->family(), at));
      results = b.emit_results(inst.op, std::move(operands));
      lowered.kept.push_back(KeptOp{std::string(ext->family()), semantics->module, at, ""});
      kept_values.push_back(results.at(0));
    } else if (ext) {
      const ExtensionSemantics& sem = *semantics;
      const bool single = inst.results.size() == 1 && sem.lower;
      if (!single && !sem.lower_results)
        fail(ErrorKind::unsupported, "lower_to_standard_ops: '{}' at {} in @{} has no lowering rule (module '{}' "
             "registers {}); run the program with a runtime that loads the module instead, or lower partially "
             "(LowerOptions::keep_unlowerable) to keep such ops", ext->family(), at,
             shown_arg(program.name), sem.module, inst.results.size() == 1 ? "none" : "no lower_results rule for its "
             "several results");
      try {
        results = single ? std::vector<Value>{sem.lower(b, inst, operands, bindings)}
                         : sem.lower_results(b, inst, operands, bindings);
      } catch (const Error& e) {
        throw Error(e.kind(), fmt::format("lowering '{}' at {} in @{}: {}", ext->family(), at, shown_arg(program.name),
                                          e.what()));
      }
      if (results.size() != inst.results.size())
        fail(ErrorKind::verification, "lowering '{}' at {} in @{} produced {} values for {} results",
             ext->family(), at, shown_arg(program.name), results.size(), inst.results.size());
      for (size_t r = 0; r < results.size(); ++r) {
        TensorType expected = substitute(inst.results[r].type, bindings);
        if (results[r].id < 0) {  // a placeholder: the rule says the result has no standard-op form
          formless[inst.results[r].id] = i;
          results[r].type = expected;
        } else if (results[r].type != expected)
          fail(ErrorKind::verification, "lowering '{}' at {} in @{} produced type {} but the instruction's {} has "
               "type {}", ext->family(), at, shown_arg(program.name), results[r].type.to_string(),
               names.at(inst.results[r].id), expected.to_string());
      }
    } else {
      for (const Value& v : inst.operands) require_form(v, fmt::format("'{}' at {}", op_name(inst.op), at));
      Op op = inst.op;
      if (auto* r = std::get_if<Reshape>(&op)) r->shape = substitute(r->shape, bindings);
      if (auto* bc = std::get_if<BroadcastInDim>(&op)) bc->shape = substitute(bc->shape, bindings);
      if (auto* sl = std::get_if<Slice>(&op)) sl->size = substitute(sl->size, bindings);
      if (auto* pd = std::get_if<Pad>(&op)) pd->shape = substitute(pd->shape, bindings);
      results = b.emit_results(std::move(op), std::move(operands));
    }
    for (size_t r = 0; r < results.size(); ++r) map[inst.results[r].id] = results[r];
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
  lowered.program = b.finish(std::move(outputs));
  auto lowered_names = value_names(lowered.program);
  for (size_t k = 0; k < lowered.kept.size(); ++k) lowered.kept[k].lowered_at = lowered_names.at(kept_values[k].id);
  return lowered;
}

}  // namespace einstage
