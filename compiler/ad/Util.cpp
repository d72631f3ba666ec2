#include "compiler/ad/Util.h"

#include "compiler/Cse.h"
#include "compiler/Dce.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <algorithm>

namespace einstage::ad::detail {

void check_parameter_indices(const Program& program, std::span<const int> indices, std::string_view transform,
                             std::string_view what) {
  std::set<int> seen;
  for (int i : indices) {
    if (i < 0 || i >= static_cast<int>(program.params.size()))
      fail(ErrorKind::invalid_argument, "{}: {} index {} is out of range; @{} has {} parameters (0..{})", transform,
           what, i, shown_arg(program.name), program.params.size(), static_cast<int>(program.params.size()) - 1);
    if (!seen.insert(i).second)
      fail(ErrorKind::invalid_argument, "{}: {} lists parameter {} (%{}) twice", transform, what, i,
           shown_arg(program.params[i].name));
    const Parameter& p = program.params[i];
    if (!is_floating(p.value.type.dtype))
      fail(ErrorKind::dtype, "{}: cannot differentiate with respect to parameter {} (%{}: {}): only floating "
           "parameters (f32, f64, c64, c128) have tangents", transform, i, shown_arg(p.name), p.value.type.to_string());
  }
}

std::string fresh_name(std::set<std::string>& used, const std::string& base) {
  std::string name = base;
  while (used.count(name)) name += "_";
  used.insert(name);
  return name;
}

std::string instruction_where(const Program& program, const Instruction& inst) {
  const auto k = static_cast<size_t>(&inst - program.instructions.data());
  EIN_ASSERT(k < program.instructions.size(), "instruction_where: the instruction is not one of @{}'s", program.name);
  return fmt::format("{} in @{}", instruction_name(program, k), shown_arg(program.name));
}

Program clean_up(Program program) {
  Program p = eliminate_dead_code(eliminate_common_subexpressions(eliminate_dead_code(std::move(program))));
  // Inlining copies program-level constraints that the re-run type rules record again, and DCE moves the
  // constraints of removed instructions to the program level: keep one of each equality. A program-level
  // constraint over a symbol no parameter binds could never be checked (it belongs to a program that had that
  // parameter, which checks it), so it is dropped.
  std::set<std::string> bound;
  for (const Parameter& par : p.params)
    for (const Dim& d : par.value.type.dims)
      if (d.is_symbol()) bound.insert(d.symbols()[0]);
  auto checkable = [&](const ShapeConstraint& c) {
    for (const Dim* d : {&c.lhs, &c.rhs})
      for (const std::string& s : d->symbols())
        if (!bound.count(s)) return false;
    return true;
  };
  std::vector<ShapeConstraint> kept;
  for (const ShapeConstraint& c : p.constraints) {
    if (c.at < 0 && !checkable(c)) continue;
    bool duplicate = std::any_of(kept.begin(), kept.end(), [&](const ShapeConstraint& k) {
      return (k.lhs == c.lhs && k.rhs == c.rhs) || (k.lhs == c.rhs && k.rhs == c.lhs);
    });
    if (!duplicate) kept.push_back(c);
  }
  p.constraints = std::move(kept);
  return p;
}

namespace {
[[noreturn]] void fail_no_registry(std::string_view where, std::string_view family) {
  fail(ErrorKind::invalid_argument, "{}: extension op '{}' is differentiated by the rules its module registers, and "
       "no ExtensionRegistry was given; pass the registry the program was traced with (e.g. "
       "ad::grad(p, wrt, &registry), or runtime.registry() for a Runtime's modules)",
       where, escape_for_message(family, '\''));
}
}  // namespace

void check_registry(const Program& program, const ExtensionRegistry* registry) {
  if (registry) return;
  for (const Instruction& inst : program.instructions)
    if (const auto* ext = std::get_if<ExtensionOp>(&inst.op)) fail_no_registry(instruction_where(program, inst), ext->family());
}

const ExtensionSemantics& ad_semantics(const ExtensionRegistry* registry, std::string_view family,
                                       const std::string& where) {
  if (!registry) fail_no_registry(where, family);
  const ExtensionSemantics* sem = registry->find(family);
  if (!sem) fail_unknown_family(family, where);
  return *sem;
}

Program finish_public(Program program, const ExtensionRegistry* registry) {
  if (!registry) return program;
  Program p = std::move(program);
  for (const std::string& family : registry->families())
    if (const DerivativeRewrite& rewrite = registry->get(family).rewrite_derivative) p = rewrite(p, registry);
  return p;
}

}  // namespace einstage::ad::detail
