// Forward mode: jvp (each instruction re-emitted with its tangent from the op's linearize rule) and linearize (jvp
// followed by partial evaluation into a primal and a linear program). See Ad.h.
#include "compiler/ad/Ad.h"
#include "compiler/ad/Rules.h"
#include "compiler/ad/Util.h"
#include "ir/ValueMap.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

namespace einstage::ad {

namespace {

// The tangents of one instruction's results from its op's rule; `where` names the instruction for messages (made
// only for one: this runs for every instruction).
template <class Where>
std::vector<Tangent> apply_linearize(Builder& b, const Instruction& inst, std::span<const Value> primals,
                                     std::span<const Tangent> tangents, std::span<const Value> outs,
                                     const ExtensionRegistry* registry, const Where& where) {
  if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) {
    const ExtensionSemantics* sem = &detail::ad_semantics(registry, ext->family(), where());
    if (inst.results.size() == 1 && sem->linearize) return {sem->linearize(b, inst, primals, tangents)};
    if (!sem->linearize_results)
      fail(ErrorKind::unsupported, "differentiation rule for '{}' not implemented (needed by {}; module '{}' "
           "registers no {} rule)", ext->family(), where(), sem->module,
           inst.results.size() == 1 ? "linearize" : "linearize_results");
    std::vector<Tangent> ts = sem->linearize_results(b, inst, primals, tangents);
    EIN_ASSERT(ts.size() == inst.results.size(), "linearize_results of '{}' returned {} tangents for {} results",
               ext->family(), ts.size(), inst.results.size());
    return ts;
  }
  StdLinearizeRule rule = std_ad_rules(kind(inst.op)).linearize;
  if (!rule) fail(ErrorKind::unsupported, "differentiation rule for '{}' not implemented (needed by {})",
                  op_name(inst.op), where());
  return {rule(b, inst, primals, tangents, outs[0])};
}

struct JvpValues {
  std::vector<Value> outputs;
  std::vector<Tangent> tangents;
};

// Re-emits `program` on `b` with its parameters bound to `primal_args` and their tangents `tangent_args` (one per
// parameter, nullopt = zero), emitting each instruction's tangent right after it.
JvpValues jvp_into(Builder& b, const Program& program, std::span<const Value> primal_args,
                   std::span<const Tangent> tangent_args, const ExtensionRegistry* registry) {
  ValueMap<Value> primal(program);
  ValueMap<Tangent> tangent(program);  // only values that have one
  for (size_t i = 0; i < program.params.size(); ++i) {
    primal.insert_or_assign(program.params[i].value.id, primal_args[i]);
    if (tangent_args[i]) tangent.insert_or_assign(program.params[i].value.id, tangent_args[i]);
  }
  for (size_t k = 0; k < program.instructions.size(); ++k) {
    const Instruction& inst = program.instructions[k];
    std::vector<Value> ops;
    std::vector<Tangent> ts;
    bool any = false;
    for (const Value& v : inst.operands) {
      ops.push_back(primal.at(v.id));
      const Tangent* found = tangent.find(v.id);
      Tangent t = found && is_floating(v.type.dtype) ? *found : std::nullopt;
      any |= t.has_value();
      ts.push_back(std::move(t));
    }
    std::vector<Value> outs = b.emit_results(inst.op, ops);
    bool floating = false;
    for (size_t r = 0; r < outs.size(); ++r) {
      primal.insert_or_assign(inst.results[r].id, outs[r]);
      floating |= is_floating(outs[r].type.dtype);
    }
    // Symbolic zeros: an instruction none of whose operands has a tangent gets none, without asking its rule;
    // integer results never carry one.
    if (!any || !floating) continue;
    std::vector<Tangent> t = apply_linearize(b, inst, ops, ts, outs, registry,
                                             [&] { return detail::instruction_where(program, inst); });
    for (size_t r = 0; r < outs.size(); ++r) {
      if (!t[r] || !is_floating(outs[r].type.dtype)) continue;
      EIN_ASSERT(t[r]->type.dtype == outs[r].type.dtype && t[r]->type.rank() == outs[r].type.rank(),
                 "linearize rule of '{}' returned {} for a result of type {}", op_name(inst.op),
                 t[r]->type.to_string(), outs[r].type.to_string());
      tangent.insert_or_assign(inst.results[r].id, t[r]);
    }
  }
  JvpValues r;
  for (const Value& v : program.outputs) {
    r.outputs.push_back(primal.at(v.id));
    const Tangent* found = tangent.find(v.id);
    r.tangents.push_back(found ? *found : std::nullopt);
  }
  return r;
}

}  // namespace

namespace {

// jvp without the families' rewrites (detail::finish_public), which linearize partially evaluates.
Program plain_jvp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry,
                  std::string_view transform) {
  detail::check_parameter_indices(program, wrt, transform, "wrt");
  detail::check_registry(program, registry);
  Builder b(program.name + "_jvp", registry);
  std::set<std::string> used;
  for (const Parameter& p : program.params) used.insert(p.name);
  std::vector<Value> primals;
  for (const Parameter& p : program.params) primals.push_back(b.parameter(p.name, p.value.type));
  std::vector<Tangent> tangents(program.params.size());
  for (int i : wrt) {
    const Parameter& p = program.params[static_cast<size_t>(i)];
    tangents[static_cast<size_t>(i)] = b.parameter(detail::fresh_name(used, "t_" + p.name), p.value.type);
  }
  for (const ShapeConstraint& c : program.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);
  JvpValues r = jvp_into(b, program, primals, tangents, registry);
  std::vector<Value> outputs = r.outputs;
  for (size_t i = 0; i < r.tangents.size(); ++i)
    outputs.push_back(r.tangents[i] ? *r.tangents[i] : b.full(r.outputs[i].type, 0.0));
  return detail::clean_up(b.finish(std::move(outputs)));
}

}  // namespace

Program jvp(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry) {
  return detail::finish_public(plain_jvp(program, wrt, registry, "jvp"), registry);
}

Linearized linearize(const Program& program, std::span<const int> wrt, const ExtensionRegistry* registry) {
  const Program joint = plain_jvp(program, wrt, registry, "linearize");
  const size_t np = program.params.size(), no = program.outputs.size();

  // Partial evaluation: `linear` = depends on a tangent parameter; `constant` = depends on no parameter at all
  // (recomputed in the linear program rather than passed as a residual).
  ValueSet linear(joint), constant(joint);
  for (size_t i = np; i < joint.params.size(); ++i) linear.insert(joint.params[i].value.id);
  // Classified per instruction (id of its first result): all results of one instruction share its class.
  ValueMap<const Instruction*> defined_by(joint);
  for (const Instruction& inst : joint.instructions) {
    bool lin = false, cst = true;
    for (const Value& v : inst.operands) {
      lin |= linear.contains(v.id);
      cst &= constant.contains(v.id);
    }
    for (const Value& r : inst.results) {
      defined_by.insert_or_assign(r.id, &inst);
      if (lin) linear.insert(r.id);
      else if (cst) constant.insert(r.id);
    }
  }
  // Residuals: primal values (not constants) that the linear part reads, in order of first use.
  std::vector<Value> residuals;
  ValueSet is_residual(joint);
  auto need = [&](const Value& v) {
    if (linear.contains(v.id) || constant.contains(v.id) || is_residual.contains(v.id)) return;
    is_residual.insert(v.id);
    residuals.push_back(v);
  };
  for (const Instruction& inst : joint.instructions)
    if (linear.contains(inst.results[0].id))
      for (const Value& v : inst.operands) need(v);
  for (size_t i = no; i < joint.outputs.size(); ++i) need(joint.outputs[i]);
  // The linear program must bind every symbol its instructions use from its own parameters (a zero tangent output
  // of type f64[m], say, when nothing else carries m): pass the first original parameter that carries such a
  // symbol as one more residual.
  std::set<std::string> bound, wanted;
  auto collect = [](std::set<std::string>& into, const TensorType& t) {
    for (const Dim& d : t.dims) into.insert(d.symbols().begin(), d.symbols().end());
  };
  for (const Value& r : residuals) collect(bound, r.type);
  for (size_t i = np; i < joint.params.size(); ++i) collect(bound, joint.params[i].value.type);
  for (const Instruction& inst : joint.instructions)
    if (linear.contains(inst.results[0].id) || constant.contains(inst.results[0].id))
      for (const Value& r : inst.results) collect(wanted, r.type);
  for (size_t i = no; i < joint.outputs.size(); ++i) collect(wanted, joint.outputs[i].type);
  for (size_t i = 0; i < np; ++i) {
    std::set<std::string> carried;
    for (const Dim& d : joint.params[i].value.type.dims)
      if (d.is_symbol()) carried.insert(d.symbols()[0]);
    bool witness = false;
    for (const std::string& sym : carried) witness |= wanted.count(sym) && !bound.count(sym);
    if (!witness) continue;
    need(joint.params[i].value);
    bound.insert(carried.begin(), carried.end());
  }

  Linearized out;
  out.num_outputs = static_cast<int>(no);
  out.num_residuals = static_cast<int>(residuals.size());

  // The primal program: the joint program's tangent-free instructions, returning outputs and residuals.
  Program primal;
  primal.name = program.name + "_primal";
  primal.params.assign(joint.params.begin(), joint.params.begin() + static_cast<std::ptrdiff_t>(np));
  ValueSet kept(joint);
  for (const Instruction& inst : joint.instructions)
    if (!linear.contains(inst.results[0].id)) {
      primal.instructions.push_back(inst);
      for (const Value& r : inst.results) kept.insert(r.id);
    }
  primal.outputs.assign(joint.outputs.begin(), joint.outputs.begin() + static_cast<std::ptrdiff_t>(no));
  primal.outputs.insert(primal.outputs.end(), residuals.begin(), residuals.end());
  for (const ShapeConstraint& c : joint.constraints)
    if (c.at < 0 || kept.contains(c.at)) primal.constraints.push_back(c);
  out.primal = detail::clean_up(std::move(primal));

  // The linear program: residuals and tangents in, the tangent instructions re-emitted.
  Builder b(program.name + "_lin", registry);
  std::set<std::string> used;
  for (const Parameter& p : joint.params) used.insert(p.name);
  ValueMap<std::string> param_name(joint);
  for (const Parameter& p : joint.params) param_name.insert_or_assign(p.value.id, p.name);
  ValueMap<Value> mapped(joint);
  for (size_t r = 0; r < residuals.size(); ++r) {
    const std::string* given = param_name.find(residuals[r].id);
    // fmt rather than "r" + std::to_string(r): GCC 12 reports a false -Wrestrict inside char_traits for the latter.
    std::string name = given ? *given : detail::fresh_name(used, fmt::format("r{}", r));
    mapped.insert_or_assign(residuals[r].id, b.parameter(name, residuals[r].type));
  }
  for (size_t i = np; i < joint.params.size(); ++i)
    mapped.insert_or_assign(joint.params[i].value.id, b.parameter(joint.params[i].name, joint.params[i].value.type));
  // Constants are emitted where first needed (their operands are constants too).
  std::function<Value(const Value&)> value_of = [&](const Value& v) -> Value {
    if (const Value* m = mapped.find(v.id)) return *m;
    EIN_ASSERT(constant.contains(v.id), "linearize: value {} is neither linear, residual nor constant", v.id);
    const Instruction& inst = *defined_by.at(v.id);
    std::vector<Value> ops;
    for (const Value& o : inst.operands) ops.push_back(value_of(o));
    std::vector<Value> rs = b.emit_results(inst.op, ops);
    for (size_t r = 0; r < rs.size(); ++r) mapped.insert_or_assign(inst.results[r].id, rs[r]);
    return mapped.at(v.id);
  };
  for (const Instruction& inst : joint.instructions) {
    if (!linear.contains(inst.results[0].id)) continue;
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(value_of(v));
    std::vector<Value> rs = b.emit_results(inst.op, ops);
    for (size_t r = 0; r < rs.size(); ++r) mapped.insert_or_assign(inst.results[r].id, rs[r]);
  }
  std::vector<Value> tangent_outputs;
  for (size_t i = no; i < joint.outputs.size(); ++i) tangent_outputs.push_back(value_of(joint.outputs[i]));
  out.linear = detail::clean_up(b.finish(std::move(tangent_outputs)));
  return out;
}

}  // namespace einstage::ad
