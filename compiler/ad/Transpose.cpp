// Reverse mode's core: transposing a program that is linear in some of its parameters (JAX's backward_pass). The
// instructions that do not depend on the linear inputs run forward first; then the linear ones are walked backwards,
// each op's transpose rule turning its result's cotangent into its operands' cotangents, accumulated with add.
// Zero cotangents stay symbolic: an instruction whose result gets none is skipped. See Ad.h.
#include "compiler/ad/Ad.h"
#include "compiler/ad/Rules.h"
#include "compiler/ad/Util.h"
#include "ir/ValueMap.h"

#include <functional>
#include <map>
#include <memory>
#include <set>

namespace einstage::ad {

namespace {

// `cts` has one entry per result of `inst` (nullopt = zero, at least one a value); `where()` names the instruction
// for messages (made only for one: this runs for every linear instruction).
template <class Where>
std::vector<Tangent> apply_transpose(Builder& b, const Instruction& inst, std::span<const Value> operands,
                                     std::span<const bool> linear, std::span<const Tangent> cts,
                                     const ExtensionRegistry* registry, const Where& where) {
  std::function<std::vector<Tangent>()> rule;
  if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) {
    const ExtensionSemantics* sem = &detail::ad_semantics(registry, ext->family(), where());
    if (inst.results.size() == 1 && sem->transpose) {
      rule = [&, sem] { return sem->transpose(b, inst, operands, linear, *cts[0]); };
    } else if (sem->transpose_results) {
      rule = [&, sem] { return sem->transpose_results(b, inst, operands, linear, cts); };
    } else {
      fail(ErrorKind::unsupported, "transpose rule for '{}' not implemented (needed for reverse mode by {}; module "
           "'{}' registers no {} rule)", ext->family(), where(), sem->module,
           inst.results.size() == 1 ? "transpose" : "transpose_results");
    }
  } else {
    StdTransposeRule std_rule = std_ad_rules(kind(inst.op)).transpose;
    if (!std_rule)
      fail(ErrorKind::unsupported, "transpose rule for '{}' not implemented (needed for reverse mode by {}: the op "
           "is not linear, so the program is not linear in its linear inputs)", op_name(inst.op), where());
    rule = [&, std_rule] { return std_rule(b, inst, operands, linear, *cts[0]); };
  }
  // A rule's own error (an op used non-linearly) gets the instruction it is about.
  try {
    return rule();
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("transpose of {}: {}", where(), e.what()));
  }
}

}  // namespace

Program transpose(const Program& program, std::span<const int> linear_inputs, const ExtensionRegistry* registry) {
  detail::check_parameter_indices(program, linear_inputs, "transpose", "linear_inputs");
  detail::check_registry(program, registry);
  ValueSet linear(program);
  for (int i : linear_inputs) linear.insert(program.params[static_cast<size_t>(i)].value.id);
  for (const Instruction& inst : program.instructions)
    for (const Value& v : inst.operands)
      if (linear.contains(v.id)) {
        for (const Value& r : inst.results) linear.insert(r.id);
        break;
      }

  Builder b(program.name + "_t", registry);
  std::set<std::string> used;
  for (const Parameter& p : program.params) used.insert(p.name);
  ValueMap<Value> forward(program);  // non-linear values of the input program -> values of b
  for (const Parameter& p : program.params)
    if (!linear.contains(p.value.id)) forward.insert_or_assign(p.value.id, b.parameter(p.name, p.value.type));
  std::vector<Value> ct_params;
  for (size_t k = 0; k < program.outputs.size(); ++k)
    ct_params.push_back(b.parameter(detail::fresh_name(used, "ct_" + std::to_string(k)), program.outputs[k].type));
  for (const ShapeConstraint& c : program.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);

  // Forward: everything that does not depend on the linear inputs (residual arithmetic, constants).
  for (const Instruction& inst : program.instructions) {
    if (linear.contains(inst.results[0].id)) continue;
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(forward.at(v.id));
    std::vector<Value> rs = b.emit_results(inst.op, ops);
    for (size_t r = 0; r < rs.size(); ++r) forward.insert_or_assign(inst.results[r].id, rs[r]);
  }

  // Backward.
  ValueMap<Value> ct(program);
  auto accumulate = [&](const Value& target, const Value& c) {
    EIN_ASSERT(c.type.dtype == target.type.dtype && c.type.rank() == target.type.rank(),
               "a transpose rule returned {} for an operand of type {}", c.type.to_string(), target.type.to_string());
    auto [sum, fresh] = ct.try_emplace(target.id, c);
    if (!fresh) *sum = b.add(*sum, c);
  };
  for (size_t k = 0; k < program.outputs.size(); ++k)
    if (linear.contains(program.outputs[k].id)) accumulate(program.outputs[k], ct_params[k]);
  for (size_t k = program.instructions.size(); k-- > 0;) {
    const Instruction& inst = program.instructions[k];
    if (!linear.contains(inst.results[0].id)) continue;
    std::vector<Tangent> c;  // one per result
    bool any = false;
    for (const Value& r : inst.results) {
      if (const Value* found = ct.find(r.id)) {
        c.push_back(Tangent(*found));
        any = true;
        ct.erase(r.id);
      } else {
        c.push_back(std::nullopt);
      }
    }
    if (!any) continue;  // zero cotangents: nothing flows back
    const size_t n = inst.operands.size();
    std::vector<Value> ops;
    auto mask = std::make_unique<bool[]>(n);  // std::vector<bool> has no contiguous storage for a span
    for (size_t i = 0; i < n; ++i) {
      const Value& v = inst.operands[i];
      mask[i] = linear.contains(v.id);
      ops.push_back(mask[i] ? Value{-1, v.type} : forward.at(v.id));  // a linear operand has no value here
    }
    std::vector<Tangent> cts = apply_transpose(b, inst, ops, std::span<const bool>(mask.get(), n), c, registry,
                                               [&] { return detail::instruction_where(program, inst); });
    EIN_ASSERT(cts.size() == n, "transpose rule of '{}' returned {} cotangents for {} operands", op_name(inst.op),
               cts.size(), n);
    for (size_t i = 0; i < n; ++i)
      if (mask[i] && cts[i]) accumulate(inst.operands[i], *cts[i]);
  }

  std::vector<Value> outputs;
  for (int i : linear_inputs) {
    const Value& p = program.params[static_cast<size_t>(i)].value;
    const Value* found = ct.find(p.id);
    outputs.push_back(found ? *found : b.full(p.type, 0.0));
  }
  return detail::clean_up(b.finish(std::move(outputs)));
}

}  // namespace einstage::ad
