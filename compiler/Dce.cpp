#include "compiler/Dce.h"

#include "ir/ValueMap.h"

#include <algorithm>

namespace einstage {

Program eliminate_dead_code(Program program) {
  ValueSet live(program);
  for (const Value& v : program.outputs) live.insert(v.id);
  std::vector<bool> keep(program.instructions.size(), false);
  // One backward sweep suffices: SSA operands are defined before their uses.
  for (size_t i = program.instructions.size(); i-- > 0;) {
    const Instruction& inst = program.instructions[i];
    // An instruction with several results stays while any of them is read (it computes them together).
    if (std::none_of(inst.results.begin(), inst.results.end(), [&](const Value& r) { return live.contains(r.id); }))
      continue;
    keep[i] = true;
    for (const Value& v : inst.operands) live.insert(v.id);
  }
  // In place: the kept instructions move down over the removed ones, in order.
  ValueSet kept(program);
  size_t n = 0;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (!keep[i]) continue;
    for (const Value& r : program.instructions[i].results) kept.insert(r.id);
    if (n != i) program.instructions[n] = std::move(program.instructions[i]);
    ++n;
  }
  program.instructions.erase(program.instructions.begin() + static_cast<std::ptrdiff_t>(n), program.instructions.end());
  for (ShapeConstraint& c : program.constraints)
    if (c.at >= 0 && !kept.contains(c.at)) c.at = -1;
  return program;
}

}  // namespace einstage
