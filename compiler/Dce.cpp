#include "compiler/Dce.h"

#include <algorithm>
#include <set>

namespace einstage {

Program eliminate_dead_code(const Program& program) {
  std::set<ValueId> live;
  for (const Value& v : program.outputs) live.insert(v.id);
  std::vector<bool> keep(program.instructions.size(), false);
  // One backward sweep suffices: SSA operands are defined before their uses.
  for (size_t i = program.instructions.size(); i-- > 0;) {
    const Instruction& inst = program.instructions[i];
    // An instruction with several results stays while any of them is read (it computes them together).
    if (std::none_of(inst.results.begin(), inst.results.end(), [&](const Value& r) { return live.count(r.id); }))
      continue;
    keep[i] = true;
    for (const Value& v : inst.operands) live.insert(v.id);
  }
  Program out;
  out.name = program.name;
  out.params = program.params;
  out.outputs = program.outputs;
  std::set<ValueId> kept;
  for (size_t i = 0; i < program.instructions.size(); ++i)
    if (keep[i]) {
      out.instructions.push_back(program.instructions[i]);
      for (const Value& r : program.instructions[i].results) kept.insert(r.id);
    }
  for (ShapeConstraint c : program.constraints) {
    if (c.at >= 0 && !kept.count(c.at)) c.at = -1;
    out.constraints.push_back(std::move(c));
  }
  return out;
}

}  // namespace einstage
