#include "ir/Printer.h"

#include "ir/AttrText.h"
#include "ir/Extension.h"

#include <fmt/format.h>

#include <optional>
#include <set>

namespace einstage {

namespace {
std::string name_of(const std::map<ValueId, std::string>& names, ValueId id) {
  auto it = names.find(id);
  return it == names.end() ? fmt::format("%?{}", id) : it->second;
}

// "%3" or "%3, %4" / "f64[2]" or "f64[2,2], f64[2]": an instruction's results, as the text form and DOT show them.
std::string result_names(const Instruction& inst, const std::map<ValueId, std::string>& names) {
  std::vector<std::string> out;
  for (const Value& r : inst.results) out.push_back(name_of(names, r.id));
  return fmt::format("{}", fmt::join(out, ", "));
}
std::string result_types(const Instruction& inst) {
  std::vector<std::string> out;
  for (const Value& r : inst.results) out.push_back(r.type.to_string());
  return fmt::format("{}", fmt::join(out, ", "));
}

std::string constraint_line(const ShapeConstraint& c, const std::map<ValueId, std::string>& names) {
  std::string at = c.at < 0 ? "" : " at " + name_of(names, c.at);
  return fmt::format("  constraint {} == {}{} {}", c.lhs.to_string(), c.rhs.to_string(), at,
                     format_string_literal(c.what));
}
}  // namespace

std::vector<std::string> print_program_lines(const Program& p) {
  auto names = value_names(p);
  std::vector<std::string> lines;
  std::vector<std::string> params, outs;
  for (const Parameter& par : p.params) params.push_back(fmt::format("%{}: {}", par.name, par.value.type.to_string()));
  for (const Value& v : p.outputs) outs.push_back(v.type.to_string());
  lines.push_back(fmt::format("program @{}({}) -> ({}) {{", p.name, fmt::join(params, ", "), fmt::join(outs, ", ")));
  for (const Instruction& inst : p.instructions) {
    std::vector<std::string> operands;
    for (const Value& v : inst.operands) operands.push_back(name_of(names, v.id));
    std::string attrs = format_op_attributes(inst.op);
    lines.push_back(fmt::format("  {} = {}({}){} : {}", result_names(inst, names), op_name(inst.op),
                                fmt::join(operands, ", "), attrs.empty() ? "" : " {" + attrs + "}",
                                result_types(inst)));
  }
  for (const ShapeConstraint& c : p.constraints) lines.push_back(constraint_line(c, names));
  std::vector<std::string> rets;
  for (const Value& v : p.outputs) rets.push_back(name_of(names, v.id));
  lines.push_back(rets.empty() ? "  return" : fmt::format("  return {}", fmt::join(rets, ", ")));
  lines.push_back("}");
  return lines;
}

std::string print_program(const Program& program) {
  std::string out;
  for (const std::string& line : print_program_lines(program)) out += line + "\n";
  return out;
}

namespace {
std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string dot_attributes(const Op& op) {
  if (const auto* c = std::get_if<Constant>(&op); c && c->value.numel() > 8) {
    TensorType t{c->value.dtype(), {}};
    for (int64_t e : c->value.shape()) t.dims.push_back(Dim(e));
    return "value = " + t.to_string() + "<...>";
  }
  return format_op_attributes(op);
}
}  // namespace

std::string print_dot(const Program& p) {
  auto names = value_names(p);
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n", dot_escape(p.name));
  std::map<ValueId, std::string> node;  // value id -> node name
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Parameter& par = p.params[i];
    node[par.value.id] = fmt::format("p{}", i);
    out += fmt::format("  p{} [shape=ellipse, label=\"%{}\\n{}\"];\n", i, dot_escape(par.name),
                       par.value.type.to_string());
  }
  std::set<ValueId> of_several;  // results of instructions with several: their edges name the result
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& inst = p.instructions[i];
    for (const Value& r : inst.results) {
      node[r.id] = fmt::format("i{}", i);
      if (inst.results.size() > 1) of_several.insert(r.id);
    }
    std::string attrs = dot_attributes(inst.op);
    out += fmt::format("  i{} [shape=box, label=\"{} = {}{}\\n{}\"];\n", i, result_names(inst, names),
                       dot_escape(op_name(inst.op)), attrs.empty() ? "" : "\\n{" + dot_escape(attrs) + "}",
                       result_types(inst));
  }
  // An edge is labelled with the operand index when the user has several operands and with the value's name when
  // its producer has several results ("1: %4").
  auto edge = [&](const Value& v, const std::string& to, std::optional<size_t> operand) {
    auto it = node.find(v.id);
    std::string from = it == node.end() ? fmt::format("undefined_{}", v.id) : it->second;
    std::vector<std::string> label;
    if (operand) label.push_back(std::to_string(*operand));
    if (of_several.count(v.id)) label.push_back(name_of(names, v.id));
    return label.empty() ? fmt::format("  {} -> {};\n", from, to)
                         : fmt::format("  {} -> {} [label=\"{}\"];\n", from, to, fmt::join(label, ": "));
  };
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& inst = p.instructions[i];
    for (size_t k = 0; k < inst.operands.size(); ++k)
      out += edge(inst.operands[k], fmt::format("i{}", i),
                  inst.operands.size() > 1 ? std::optional<size_t>(k) : std::nullopt);
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    out += fmt::format("  out{} [shape=doubleoctagon, label=\"output {}\\n{}\"];\n", k, k, p.outputs[k].type.to_string());
    out += edge(p.outputs[k], fmt::format("out{}", k), std::nullopt);
  }
  out += "}\n";
  return out;
}

}  // namespace einstage
