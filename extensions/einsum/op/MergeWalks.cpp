// merge_value_vjp, merge_vjp_jvp and merge_walks (both, the family's rewrite_derivative): instructions that walk
// the same planned tree merged into one walk (see EinsumAd.h).
#include "extensions/einsum/op/EinsumAd.h"

#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "ir/ValueMap.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace einstage::einsum {

namespace {

const EinsumAdPayload* ad_payload(const Instruction& inst) {
  const auto* ext = std::get_if<ExtensionOp>(&inst.op);
  if (!ext || ext->family() != kEinsumAdFamily) return nullptr;
  return static_cast<const EinsumAdPayload*>(ext->payload.get());
}

bool same_ids(std::span<const Value> a, std::span<const Value> b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const Value& x, const Value& y) { return x.id == y.id; });
}

// Two instructions, `first` before `second`, that one instruction (`payload`, over the second's operands) replaces
// at the second's place: result i of `first` becomes its result first_results[i], result i of `second` its result
// second_results[i]. `first` and `second` index the instructions of the program given to merge_all.
struct Merge {
  size_t first = 0, second = 0;
  std::shared_ptr<EinsumAdPayload> payload;
  std::vector<size_t> first_results, second_results;
};

// One instruction of the program being merged: an original one, or a merged pair (at the second's place).
// Merges are searched and applied on these nodes, which keep the original value ids, and the program is rebuilt
// once at the end: rebuilding it (types, verification) after every merge made AD of a program with hundreds of
// einsums (the Ising TRG's jvp of grad) spend a second in this pass.
struct Node {
  size_t inst = 0;                   // the original instruction, or the merge's second
  std::optional<Merge> merge;        // set for a merged pair
  std::vector<ValueId> result_ids;   // in the order of the node's results (-1: a merged result nobody reads)
};

Node merged_node(const std::vector<Instruction>& insts, Merge m) {
  Node n;
  n.inst = m.second;
  const Instruction& first = insts[m.first];
  const Instruction& second = insts[m.second];
  size_t count = 0;
  for (size_t r : m.first_results) count = std::max(count, r + 1);
  for (size_t r : m.second_results) count = std::max(count, r + 1);
  n.result_ids.assign(count, -1);
  for (size_t r = 0; r < first.results.size(); ++r) n.result_ids[m.first_results[r]] = first.results[r].id;
  for (size_t r = 0; r < second.results.size(); ++r) n.result_ids[m.second_results[r]] = second.results[r].id;
  n.merge = std::move(m);
  return n;
}

// The values that depend on one candidate's results, as flags indexed by value id (cleared through `touched`).
class DependSet {
 public:
  explicit DependSet(ValueId ids) : flags_(static_cast<size_t>(std::max<ValueId>(ids, 0)), 0) {}
  void clear() {
    for (ValueId v : touched_) flags_[static_cast<size_t>(v)] = 0;
    touched_.clear();
  }
  void insert(ValueId v) {
    if (v < 0 || flags_[static_cast<size_t>(v)]) return;
    flags_[static_cast<size_t>(v)] = 1;
    touched_.push_back(v);
  }
  bool contains(ValueId v) const { return v >= 0 && flags_[static_cast<size_t>(v)]; }

 private:
  std::vector<char> flags_;
  std::vector<ValueId> touched_;
};

// The instructions `find` would pair each instruction with, ignoring order and dependences (they are the only ones
// the scan of find_merge can pick), worked out once per instruction when it is first a candidate. Every pairing rule
// of this file requires the partner's leading operands to be the candidate's own, so only the instructions reading
// the candidate's first operand are asked; a candidate without operands could pair with any (nullopt: scan them all).
// Without this, each candidate was compared with every later instruction on every search, quadratic in the size of
// the program (a second of the Ising TRG's jvp of grad before the node list, most of what remained after it).
template <class Find>
class Partners {
 public:
  Partners(const std::vector<Instruction>& insts, const Find& find) : insts_(insts), find_(find), known_(insts.size()) {
    for (size_t i = 0; i < insts.size(); ++i)
      if (!insts[i].operands.empty()) readers_[insts[i].operands[0].id].push_back(i);
  }
  const std::optional<std::vector<size_t>>& of(size_t candidate) {
    std::optional<std::optional<std::vector<size_t>>>& k = known_[candidate];
    if (k) return *k;
    const Instruction& inst = insts_[candidate];
    if (inst.operands.empty()) return k.emplace(std::nullopt);
    std::vector<size_t> found;
    if (auto it = readers_.find(inst.operands[0].id); it != readers_.end())
      for (size_t q : it->second)
        if (q != candidate && find_(inst, insts_[q])) found.push_back(q);
    return k.emplace(std::move(found));
  }

 private:
  const std::vector<Instruction>& insts_;
  const Find& find_;
  std::map<ValueId, std::vector<size_t>> readers_;  // value id -> instructions whose first operand it is
  std::vector<std::optional<std::optional<std::vector<size_t>>>> known_;
};

// The first merge `find` proposes for a candidate `first` node and a later `second` one that does not depend on
// first's results (`depends`: the values that do, up to `second`); its node positions, or nullopt when there is
// none. Candidates are original extension instructions from node `start` on; a merged node is never a candidate.
// `gone` marks the instructions that are no longer nodes of their own (a merged pair's two).
template <class Find>
std::optional<std::pair<size_t, size_t>> find_merge(const std::vector<Instruction>& insts,
                                                    const std::vector<Node>& order, size_t start, DependSet& depends,
                                                    std::optional<Merge>& found, const Find& find,
                                                    Partners<Find>& partners, const std::vector<bool>& gone) {
  for (size_t p = start; p < order.size(); ++p) {
    const Node& candidate = order[p];
    if (candidate.merge || !std::holds_alternative<ExtensionOp>(insts[candidate.inst].op)) continue;
    // How many partners the scan can still meet; it stops after the last (none: the candidate is skipped).
    const std::optional<std::vector<size_t>>& known = partners.of(candidate.inst);
    size_t remaining = SIZE_MAX;
    if (known) {
      remaining = static_cast<size_t>(
          std::count_if(known->begin(), known->end(), [&](size_t q) { return !gone[q]; }));
      if (remaining == 0) continue;
    }
    depends.clear();
    for (ValueId r : candidate.result_ids) depends.insert(r);
    for (size_t q = p + 1; q < order.size() && remaining > 0; ++q) {
      const Node& c = order[q];
      const Instruction& ci = insts[c.inst];
      const bool reads_first =
          std::any_of(ci.operands.begin(), ci.operands.end(), [&](const Value& v) { return depends.contains(v.id); });
      if (!reads_first && !c.merge)
        if (std::optional<Merge> m = find(insts[candidate.inst], ci)) {
          m->first = candidate.inst;
          m->second = c.inst;
          found = std::move(m);
          return std::make_pair(p, q);
        }
      if (reads_first)
        for (ValueId r : c.result_ids) depends.insert(r);
      if (known && !c.merge && std::find(known->begin(), known->end(), c.inst) != known->end()) --remaining;
    }
  }
  return std::nullopt;
}

// Rebuilds `program` with its instructions in the order of `order`, each merged pair as one instruction.
Program rebuild(const Program& program, const std::vector<Node>& order, const ExtensionRegistry* registry) {
  Builder b(program.name, registry);
  ValueMap<Value> mapped(program);
  for (const Parameter& p : program.params) mapped.insert_or_assign(p.value.id, b.parameter(p.name, p.value.type));
  for (const ShapeConstraint& c : program.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);
  for (const Node& n : order) {
    const Instruction& inst = program.instructions[n.inst];
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(mapped.at(v.id));
    if (!n.merge) {
      std::vector<Value> rs = b.emit_results(inst.op, std::move(ops));
      for (size_t r = 0; r < rs.size(); ++r) mapped.insert_or_assign(inst.results[r].id, rs[r]);
      continue;
    }
    std::vector<Value> rs = b.extension_results(n.merge->payload, std::move(ops));
    for (size_t r = 0; r < rs.size(); ++r)
      if (n.result_ids[r] >= 0) mapped.insert_or_assign(n.result_ids[r], rs[r]);
  }
  std::vector<Value> outputs;
  for (const Value& v : program.outputs) outputs.push_back(mapped.at(v.id));
  return b.finish(std::move(outputs));
}

// Merges pairs until none is left. A merge puts the merged instruction at the second's place and moves the readers
// of the first's results between the two (`depends`) right after it; it never makes a cycle, since the second does
// not depend on the first's results and the first's operands precede it. The search resumes at the last merge's
// first node: the nodes before it keep their order, and no merge gives one of them a partner it lacked (the merged
// instruction reads the second's operands, which include the first's, and is no candidate itself).
template <class Find>
Program merge_all(const Program& program, const ExtensionRegistry* registry, const Find& find) {
  const std::vector<Instruction>& insts = program.instructions;
  std::vector<Node> order;
  order.reserve(insts.size());
  for (size_t i = 0; i < insts.size(); ++i) {
    Node n;
    n.inst = i;
    for (const Value& r : insts[i].results) n.result_ids.push_back(r.id);
    order.push_back(std::move(n));
  }
  DependSet depends(program.next_value_id());
  Partners<Find> partners(insts, find);
  std::vector<bool> gone(insts.size(), false);
  std::optional<Merge> found;
  size_t start = 0;
  bool merged = false;
  while (std::optional<std::pair<size_t, size_t>> at =
             find_merge(insts, order, start, depends, found, find, partners, gone)) {
    const auto [p, q] = *at;
    gone[found->first] = gone[found->second] = true;
    std::vector<Node> next;
    next.reserve(order.size() - 1);
    std::vector<Node> deferred;
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == p) continue;
      if (k > p && k < q && depends.contains(order[k].result_ids.empty() ? -1 : order[k].result_ids[0])) {
        deferred.push_back(std::move(order[k]));
        continue;
      }
      if (k != q) {
        next.push_back(std::move(order[k]));
        continue;
      }
      next.push_back(merged_node(insts, std::move(*found)));
      for (Node& d : deferred) next.push_back(std::move(d));
    }
    order = std::move(next);
    start = p;
    merged = true;
  }
  return merged ? rebuild(program, order, registry) : program;
}

}  // namespace

Program merge_value_vjp(const Program& program, const ExtensionRegistry* registry) {
  return merge_all(program, registry, [](const Instruction& e, const Instruction& c) -> std::optional<Merge> {
    const auto* ext = std::get_if<ExtensionOp>(&e.op);
    if (!ext || ext->family() != kEinsumFamily) return std::nullopt;
    const auto& forward = static_cast<const EinsumPayload&>(*ext->payload);
    if (forward.plan().max_memory > 0) return std::nullopt;  // a sliced einsum bounds its memory; the walk would not
    const EinsumAdPayload* p = ad_payload(c);
    if (!p || p->mode() != EinsumAdMode::vjp || !p->forward().equals(forward) ||
        c.operands.size() != e.operands.size() + 1 ||
        !same_ids(std::span(c.operands).first(e.operands.size()), e.operands) ||
        c.operands.back().type.dtype != e.result().type.dtype)
      return std::nullopt;
    Merge m;
    m.payload = std::make_shared<EinsumAdPayload>(p->forward(), EinsumAdMode::value_vjp, p->slots());
    m.first_results = {0};
    for (size_t r = 0; r < c.results.size(); ++r) m.second_results.push_back(r + 1);
    return m;
  });
}

Program merge_vjp_jvp(const Program& program, const ExtensionRegistry* registry) {
  return merge_all(program, registry, [](const Instruction& v, const Instruction& c) -> std::optional<Merge> {
    const EinsumAdPayload* pv = ad_payload(v);
    const EinsumAdPayload* pc = ad_payload(c);
    if (!pv || !pc || pv->mode() != EinsumAdMode::vjp || pc->mode() != EinsumAdMode::vjp_jvp ||
        !pc->forward().equals(pv->forward()) || c.operands.size() < v.operands.size() ||
        !same_ids(std::span(c.operands).first(v.operands.size()), v.operands) ||
        !std::includes(pv->slots().begin(), pv->slots().end(), pc->slots().begin(), pc->slots().end()))
      return std::nullopt;
    Merge m;
    m.payload = std::make_shared<EinsumAdPayload>(pv->forward(), EinsumAdMode::vjp_with_jvp, pv->slots(),
                                                  pc->tangents());
    const size_t slots = pv->slots().size();
    for (size_t r = 0; r < slots; ++r) m.first_results.push_back(r);
    for (int k : pc->slots())
      m.second_results.push_back(slots + static_cast<size_t>(std::find(pv->slots().begin(), pv->slots().end(), k) -
                                                             pv->slots().begin()));
    return m;
  });
}

Program merge_walks(const Program& program, const ExtensionRegistry* registry) {
  return merge_value_vjp(merge_vjp_jvp(program, registry), registry);
}

}  // namespace einstage::einsum
