// merge_value_vjp, merge_vjp_jvp and merge_walks (both, the family's rewrite_derivative): instructions that walk
// the same planned tree merged into one walk (see EinsumAd.h).
#include "extensions/einsum/EinsumAd.h"

#include "extensions/einsum/EinsumAdOp.h"
#include "extensions/einsum/EinsumOp.h"

#include <algorithm>
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
// second_results[i].
struct Merge {
  size_t first = 0, second = 0;
  std::shared_ptr<EinsumAdPayload> payload;
  std::vector<size_t> first_results, second_results;
};

// The first merge `find` proposes for a candidate `first` instruction and a later `second` one that does not depend
// on first's results (`depends`: the values that do, up to `second`); nullopt when there is none.
// Candidates for `first` are extension instructions from index `start` on.
template <class Find>
std::optional<Merge> find_merge(const Program& program, size_t start, std::set<ValueId>& depends, const Find& find) {
  const std::vector<Instruction>& insts = program.instructions;
  for (size_t i = start; i < insts.size(); ++i) {
    if (!std::holds_alternative<ExtensionOp>(insts[i].op)) continue;
    depends.clear();
    for (const Value& r : insts[i].results) depends.insert(r.id);
    for (size_t j = i + 1; j < insts.size(); ++j) {
      const Instruction& c = insts[j];
      const bool reads_first = std::any_of(c.operands.begin(), c.operands.end(),
                                           [&](const Value& v) { return depends.count(v.id); });
      if (!reads_first)
        if (std::optional<Merge> m = find(insts[i], c)) {
          m->first = i;
          m->second = j;
          return m;
        }
      if (reads_first)
        for (const Value& r : c.results) depends.insert(r.id);
    }
  }
  return std::nullopt;
}

// Rebuilds `current` with m's two instructions replaced by one at the second's place; the readers of the first's
// results between the two (`depends`) move right after it. A single merge never makes a cycle: the second does not
// depend on the first's results and the first's operands precede it, so the program stays in order.
Program apply_merge(const Program& current, const Merge& m, const std::set<ValueId>& depends,
                    const ExtensionRegistry* registry) {
  Builder b(current.name, registry);
  std::map<ValueId, Value> mapped;
  for (const Parameter& p : current.params) mapped[p.value.id] = b.parameter(p.name, p.value.type);
  for (const ShapeConstraint& c : current.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);
  auto emit = [&](const Instruction& inst) {
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(mapped.at(v.id));
    std::vector<Value> rs = b.emit_results(inst.op, std::move(ops));
    for (size_t r = 0; r < rs.size(); ++r) mapped[inst.results[r].id] = rs[r];
  };
  std::vector<size_t> deferred;
  for (size_t k = 0; k < current.instructions.size(); ++k) {
    const Instruction& inst = current.instructions[k];
    if (k == m.first) continue;
    if (k > m.first && k < m.second && depends.count(inst.results[0].id)) {
      deferred.push_back(k);
      continue;
    }
    if (k != m.second) {
      emit(inst);
      continue;
    }
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(mapped.at(v.id));
    std::vector<Value> rs = b.extension_results(m.payload, std::move(ops));
    const Instruction& first = current.instructions[m.first];
    for (size_t r = 0; r < first.results.size(); ++r) mapped[first.results[r].id] = rs[m.first_results[r]];
    for (size_t r = 0; r < inst.results.size(); ++r) mapped[inst.results[r].id] = rs[m.second_results[r]];
    for (size_t d : deferred) emit(current.instructions[d]);
  }
  std::vector<Value> outputs;
  for (const Value& v : current.outputs) outputs.push_back(mapped.at(v.id));
  return b.finish(std::move(outputs));
}

// The search resumes at the last merge's first instruction: the instructions before it keep their order, and no
// merge gives one of them a partner it lacked (the merged instruction reads the second's operands, which include
// the first's, and is no candidate itself), so a program of many einsums is not searched again from the start.
template <class Find>
Program merge_all(const Program& program, const ExtensionRegistry* registry, const Find& find) {
  Program current = program;
  std::set<ValueId> depends;
  size_t start = 0;
  while (std::optional<Merge> m = find_merge(current, start, depends, find)) {
    current = apply_merge(current, *m, depends, registry);
    start = m->first;
  }
  return current;
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
