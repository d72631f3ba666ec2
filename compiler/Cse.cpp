#include "compiler/Cse.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace einstage {

Program eliminate_common_subexpressions(const Program& program) {
  std::map<ValueId, Value> replaced;  // removed result id -> the value that replaces it
  auto rewrite = [&](const Value& v) {
    auto it = replaced.find(v.id);
    return it == replaced.end() ? v : it->second;
  };
  // (op hash, operand ids) -> indices into out.instructions with that key.
  std::map<std::pair<uint64_t, std::vector<ValueId>>, std::vector<size_t>> seen;
  Program out;
  out.name = program.name;
  out.params = program.params;
  for (const Instruction& original : program.instructions) {
    Instruction inst = original;
    for (Value& v : inst.operands) v = rewrite(v);
    std::vector<ValueId> ids;
    for (const Value& v : inst.operands) ids.push_back(v.id);
    auto& bucket = seen[{hash_op(inst.op), ids}];
    auto same = std::find_if(bucket.begin(), bucket.end(), [&](size_t k) {
      const std::vector<Value>& rs = out.instructions[k].results;
      return out.instructions[k].op == inst.op && rs.size() == inst.results.size() &&
             std::equal(rs.begin(), rs.end(), inst.results.begin(),
                        [](const Value& a, const Value& b) { return a.type == b.type; });
    });
    if (same != bucket.end()) {  // every result is replaced by the earlier instruction's result at its index
      for (size_t r = 0; r < inst.results.size(); ++r) replaced[inst.results[r].id] = out.instructions[*same].results[r];
      continue;
    }
    bucket.push_back(out.instructions.size());
    out.instructions.push_back(std::move(inst));
  }
  for (const Value& v : program.outputs) out.outputs.push_back(rewrite(v));
  for (ShapeConstraint c : program.constraints) {
    if (c.at >= 0) c.at = rewrite(Value{c.at, {}}).id;
    if (std::find(out.constraints.begin(), out.constraints.end(), c) == out.constraints.end())
      out.constraints.push_back(std::move(c));
  }
  return out;
}

}  // namespace einstage
