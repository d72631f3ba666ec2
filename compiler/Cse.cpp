#include "compiler/Cse.h"

#include "ir/Hash.h"
#include "ir/ValueMap.h"

#include <algorithm>
#include <unordered_map>

namespace einstage {

namespace {

// The bucket of an instruction: its op kind and operand ids. An op without operands (a constant) is bucketed by
// hash_op instead, or every constant of a program would share one bucket. Equal instructions always share a bucket;
// the op's equality decides within it.
struct Key {
  uint64_t op = 0;
  std::vector<ValueId> ids;
  friend bool operator==(const Key&, const Key&) = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    Fnv1a h;
    h.word(k.op);
    for (ValueId id : k.ids) h.word(static_cast<uint64_t>(static_cast<uint32_t>(id)));
    return static_cast<size_t>(h.value());
  }
};

}  // namespace

Program eliminate_common_subexpressions(Program program) {
  ValueMap<Value> replaced(program);  // removed result id -> the value that replaces it
  auto rewrite = [&](Value& v) {
    if (const Value* r = replaced.find(v.id)) v = *r;
  };
  std::unordered_map<Key, std::vector<size_t>, KeyHash> seen;  // key -> indices of kept instructions with that key
  std::vector<Instruction>& insts = program.instructions;
  size_t n = 0;  // kept so far, moved down in place
  for (size_t i = 0; i < insts.size(); ++i) {
    Instruction& inst = insts[i];
    for (Value& v : inst.operands) rewrite(v);
    Key key;
    key.op = inst.operands.empty() ? hash_op(inst.op) : static_cast<uint64_t>(kind(inst.op));
    key.ids.reserve(inst.operands.size());
    for (const Value& v : inst.operands) key.ids.push_back(v.id);
    std::vector<size_t>& bucket = seen[std::move(key)];
    auto same = std::find_if(bucket.begin(), bucket.end(), [&](size_t k) {
      const std::vector<Value>& rs = insts[k].results;
      return insts[k].op == inst.op && rs.size() == inst.results.size() &&
             std::equal(rs.begin(), rs.end(), inst.results.begin(),
                        [](const Value& a, const Value& b) { return a.type == b.type; });
    });
    if (same != bucket.end()) {  // every result is replaced by the earlier instruction's result at its index
      for (size_t r = 0; r < inst.results.size(); ++r)
        replaced.insert_or_assign(inst.results[r].id, insts[*same].results[r]);
      continue;
    }
    bucket.push_back(n);
    if (n != i) insts[n] = std::move(inst);
    ++n;
  }
  insts.erase(insts.begin() + static_cast<std::ptrdiff_t>(n), insts.end());
  for (Value& v : program.outputs) rewrite(v);
  std::vector<ShapeConstraint> constraints;
  for (ShapeConstraint& c : program.constraints) {
    if (c.at >= 0)
      if (const Value* r = replaced.find(c.at)) c.at = r->id;
    if (std::find(constraints.begin(), constraints.end(), c) == constraints.end()) constraints.push_back(std::move(c));
  }
  program.constraints = std::move(constraints);
  return program;
}

}  // namespace einstage
