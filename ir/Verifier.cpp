#include "ir/Verifier.h"

#include "ir/Extension.h"
#include "ir/Printer.h"
#include "ir/Quote.h"
#include "ir/ValueMap.h"

#include <fmt/format.h>

#include <set>

namespace einstage {

namespace {

// Throws `message` followed by the printed program around `line`, marked with '>'.
[[noreturn]] void fail_at(const Program& p, size_t line, ErrorKind kind, const std::string& message) {
  auto lines = print_program_lines(p);
  size_t first = line >= 3 ? line - 3 : 0, last = std::min(lines.size(), line + 4);
  std::string text = message + "\nwhile verifying:\n";
  for (size_t i = first; i < last; ++i) text += (i == line ? "> " : "  ") + lines[i] + "\n";
  text.pop_back();
  throw Error(kind, text);
}

}  // namespace

void verify(const Program& p, const ExtensionRegistry* registry) {
  // The type of each value defined so far, by id. The printed names and the "'op' at %k in @f" prefix are made only
  // for a message: this runs after every pass, over every instruction, and formatting them up front was most of its
  // time.
  ValueMap<const TensorType*> defined(p);
  auto lookup = [&](ValueId id) -> const TensorType* {
    const TensorType* const* t = defined.find(id);
    return t ? *t : nullptr;
  };
  auto define = [&](ValueId id, const TensorType& type) { return id >= 0 && defined.try_emplace(id, &type).second; };
  auto name_of = [&](ValueId id) {
    auto names = value_names(p);
    auto it = names.find(id);
    return it == names.end() ? fmt::format("%?{}", id) : it->second;
  };
  std::set<std::string_view> param_names;
  // Names are checked before the program is printed into a message: a name that is not an identifier is echoed
  // escaped (a newline in it would otherwise break the printed program apart).
  if (!is_identifier(p.name))
    fail(ErrorKind::verification, "program name '{}' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", shown_arg(p.name));
  for (const Parameter& par : p.params) {
    if (!is_identifier(par.name))
      fail(ErrorKind::verification, "@{}: parameter name '%{}' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", p.name,
           shown_arg(par.name));
    if (!param_names.insert(par.name).second)
      fail_at(p, 0, ErrorKind::verification, fmt::format("@{}: parameter name '%{}' is used twice", p.name, par.name));
    if (!define(par.value.id, par.value.type))
      fail_at(p, 0, ErrorKind::verification,
              fmt::format("@{}: parameter '%{}' has value id {}, which is negative or already in use", p.name,
                          par.name, par.value.id));
  }
  std::vector<TensorType> types;
  size_t printed = 0;  // results so far: instruction i's first result prints as %printed
  for (size_t i = 0; i < p.instructions.size(); printed += p.instructions[i++].results.size()) {
    const Instruction& inst = p.instructions[i];
    std::string_view op = op_name(inst.op);
    auto where = [&] { return fmt::format("'{}' at %{} in @{}", op, printed, p.name); };
    types.clear();
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      const Value& v = inst.operands[k];
      const TensorType* def = lookup(v.id);
      if (!def)
        fail_at(p, i + 1, ErrorKind::verification,
                fmt::format("{}: operand {} (%?{}) is not defined before this use", where(), k, v.id));
      if (*def != v.type)
        fail_at(p, i + 1, ErrorKind::verification,
                fmt::format("{}: operand {} ({}) is used with type {} but was defined with type {}", where(), k,
                            name_of(v.id), v.type.to_string(), def->to_string()));
      types.push_back(v.type);
    }
    TypeContext ctx(op, printed, p.name, nullptr);
    std::vector<TensorType> expected;
    try {
      expected = infer_result_types(inst.op, types, ctx, registry);
    } catch (const Error& e) {
      fail_at(p, i + 1, e.kind() == ErrorKind::not_found ? ErrorKind::not_found : ErrorKind::verification, e.what());
    }
    if (inst.results.size() != expected.size())
      fail_at(p, i + 1, ErrorKind::verification,
              fmt::format("{}: the instruction has {} result{} but the type rule gives {}; give it one result per "
                          "type the rule returns", where(), inst.results.size(), inst.results.size() == 1 ? "" : "s",
                          expected.size()));
    for (size_t r = 0; r < expected.size(); ++r) {
      const Value& result = inst.results[r];
      auto which = [&] { return expected.size() == 1 ? std::string("result") : fmt::format("result {}", r); };
      if (expected[r] != result.type)
        fail_at(p, i + 1, ErrorKind::verification,
                fmt::format("{}: {} type is {} but the type rule gives {}", where(), which(), result.type.to_string(),
                            expected[r].to_string()));
      if (!define(result.id, result.type))
        fail_at(p, i + 1, ErrorKind::verification,
                fmt::format("{}: {} value id {} is negative or already defined (SSA values are defined once)", where(),
                            which(), result.id));
    }
  }
  // A constraint may name any value of the program (one defined by an instruction or a parameter).
  size_t constraint_line = p.instructions.size() + 1;
  for (size_t c = 0; c < p.constraints.size(); ++c)
    if (p.constraints[c].at >= 0 && !lookup(p.constraints[c].at))
      fail_at(p, constraint_line + c, ErrorKind::verification,
              fmt::format("@{}: shape constraint {} refers to %?{}, which is not a value of the program", p.name, c,
                          p.constraints[c].at));
  size_t return_line = constraint_line + p.constraints.size();
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const TensorType* def = lookup(p.outputs[k].id);
    if (!def)
      fail_at(p, return_line, ErrorKind::verification,
              fmt::format("@{}: output {} (%?{}) is not a defined value", p.name, k, p.outputs[k].id));
    if (*def != p.outputs[k].type)
      fail_at(p, return_line, ErrorKind::verification,
              fmt::format("@{}: output {} ({}) has type {} but was defined with type {}", p.name, k,
                          name_of(p.outputs[k].id), p.outputs[k].type.to_string(), def->to_string()));
  }
}

}  // namespace einstage
