#include "compiler/Reassociate.h"

#include "compiler/Dce.h"
#include "ir/Ops.h"

#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>

namespace einstage {

namespace {

// op(v): v, or vᵀ when t.
struct Factor {
  Value v;
  bool t = false;
};
int64_t rows(const Factor& f) { return f.v.type.dims[f.t ? 1 : 0].constant(); }
int64_t cols(const Factor& f) { return f.v.type.dims[f.t ? 0 : 1].constant(); }
Factor flip(Factor f) {
  f.t = !f.t;
  return f;
}

// op(a) op(b).
struct Term {
  Factor a, b;
};
int64_t cost(const Factor& x, const Factor& y) { return rows(x) * cols(x) * cols(y); }

// x (y z) when `right`, else (x y) z.
struct Chain {
  Factor x, y, z;
  bool right = false;
};
int64_t cost(const Chain& c) {
  return c.right ? cost(c.y, c.z) + rows(c.x) * cols(c.x) * cols(c.z) : cost(c.x, c.y) + rows(c.x) * cols(c.y) * cols(c.z);
}

bool constant_matrix(const Value& v) {
  return v.type.rank() == 2 && v.type.dims[0].is_constant() && v.type.dims[1].is_constant();
}

// The instruction as op(lhs) op(rhs), when it is a plain matrix product (see the header).
std::optional<Term> as_product(const Instruction& inst) {
  const auto* d = std::get_if<DotGeneral>(&inst.op);
  if (!d || !d->lhs_batch.empty() || !d->rhs_batch.empty() || d->lhs_contracting.size() != 1 ||
      d->rhs_contracting.size() != 1)
    return std::nullopt;
  const Value &l = inst.operands[0], &r = inst.operands[1];
  if (!constant_matrix(l) || !constant_matrix(r) || l.type.dtype != r.type.dtype ||
      inst.results[0].type.dtype != l.type.dtype)
    return std::nullopt;
  return Term{{l, d->lhs_contracting[0] == 0}, {r, d->rhs_contracting[0] == 1}};
}

constexpr size_t kMaxTerms = 8;

// The product instruction of op(x) op(y) into `result`.
Instruction product_instruction(const Factor& x, const Factor& y, const Value& result) {
  Instruction p;
  p.op = DotGeneral{.lhs_batch = {}, .lhs_contracting = {x.t ? 0 : 1}, .rhs_batch = {},
                    .rhs_contracting = {y.t ? 1 : 0}};
  p.operands = {x.v, y.v};
  p.results = {result};
  return p;
}

// transpose(op(a) op(b)) with perm [1, 0] as the product op(b)ᵀ op(a)ᵀ itself when the transpose is the product's
// only reader: one pass over the result fewer, and the reader becomes a product the rewrite below can see through.
void fold_transposed_products(Program& program) {
  std::vector<Instruction>& insts = program.instructions;
  std::unordered_map<ValueId, size_t> def, reads;
  for (size_t i = 0; i < insts.size(); ++i) {
    for (const Value& r : insts[i].results) def[r.id] = i;
    for (const Value& v : insts[i].operands) ++reads[v.id];
  }
  for (const Value& v : program.outputs) ++reads[v.id];
  for (Instruction& inst : insts) {
    const auto* t = std::get_if<Transpose>(&inst.op);
    if (!t || t->perm != Axes{1, 0}) continue;
    const auto it = def.find(inst.operands[0].id);
    if (it == def.end() || reads[inst.operands[0].id] != 1) continue;
    const std::optional<Term> p = as_product(insts[it->second]);
    if (!p) continue;
    inst = product_instruction(flip(p->b), flip(p->a), inst.results[0]);
  }
}

}  // namespace

Program reassociate_products(Program program) {
  fold_transposed_products(program);
  std::vector<Instruction>& insts = program.instructions;
  std::unordered_map<ValueId, size_t> def;                  // result id -> its instruction
  std::unordered_map<ValueId, std::vector<size_t>> readers;  // value id -> reading instructions, once per operand
  std::unordered_set<ValueId> outputs;
  for (size_t i = 0; i < insts.size(); ++i) {
    for (const Value& r : insts[i].results) def[r.id] = i;
    for (const Value& v : insts[i].operands) readers[v.id].push_back(i);
  }
  for (const Value& v : program.outputs) outputs.insert(v.id);

  // V as a sum of products: a product, or an add of two such sums each read by nothing but the add. `tree` collects
  // the instructions that die when V's readers no longer read it.
  std::function<bool(ValueId, std::vector<Term>&, std::vector<size_t>&)> expand =
      [&](ValueId id, std::vector<Term>& terms, std::vector<size_t>& tree) {
        const auto it = def.find(id);
        if (it == def.end() || terms.size() >= kMaxTerms) return false;
        const Instruction& inst = insts[it->second];
        if (inst.results.size() != 1) return false;
        if (const std::optional<Term> p = as_product(inst)) {
          terms.push_back(*p);
          tree.push_back(it->second);
          return true;
        }
        if (!std::holds_alternative<Add>(inst.op) || !constant_matrix(inst.results[0])) return false;
        for (const Value& x : inst.operands)
          if (outputs.count(x.id) || readers[x.id].size() != 1 || !expand(x.id, terms, tree)) return false;
        tree.push_back(it->second);
        return true;
      };

  std::vector<bool> touched(insts.size(), false);  // in a chosen tree or a rewritten reader
  std::map<size_t, std::vector<Chain>> plan;        // reader -> the chains whose sum replaces it
  for (size_t i = 0; i < insts.size(); ++i) {
    const Instruction& inst = insts[i];
    if (touched[i] || inst.results.size() != 1 || outputs.count(inst.results[0].id)) continue;
    const ValueId vid = inst.results[0].id;
    const std::vector<size_t>& rs = readers[vid];
    std::vector<Term> terms;
    std::vector<size_t> tree;
    if (rs.empty() || !expand(vid, terms, tree)) continue;
    int64_t old_cost = 0, new_cost = 0;
    for (const Term& t : terms) old_cost += cost(t.a, t.b);
    bool ok = true;
    std::vector<std::pair<size_t, std::vector<Chain>>> chains;
    for (size_t r : rs) {
      const std::optional<Term> p = as_product(insts[r]);
      // Every reader a product with V as exactly one of its operands (V twice in one reader is listed twice).
      if (!p || touched[r] || (p->a.v.id == vid) == (p->b.v.id == vid)) {
        ok = false;
        break;
      }
      old_cost += cost(p->a, p->b);
      const bool left = p->a.v.id == vid;
      const Factor& w = left ? p->b : p->a;
      const bool transposed = left ? p->a.t : p->b.t;
      std::vector<Chain> cs;
      for (const Term& term : terms) {
        // op(V) = Σ op(a) op(b), or Σ op(b)ᵀ op(a)ᵀ when V is read transposed.
        const Factor x = transposed ? flip(term.b) : term.a, y = transposed ? flip(term.a) : term.b;
        cs.push_back(left ? Chain{x, y, w, true} : Chain{w, x, y, false});
        new_cost += cost(cs.back());
      }
      chains.emplace_back(r, std::move(cs));
    }
    if (!ok || 3 * new_cost > 2 * old_cost) continue;
    bool free = true;
    for (size_t k : tree) free = free && !touched[k];
    if (!free) continue;
    for (size_t k : tree) touched[k] = true;
    for (auto& [r, cs] : chains) touched[r] = true, plan[r] = std::move(cs);
  }
  if (plan.empty()) return eliminate_dead_code(std::move(program));

  ValueId next = program.next_value_id();
  std::vector<Instruction> out;
  out.reserve(insts.size() + 4 * plan.size());
  // op(x) op(y) into `result`, or a fresh value.
  auto product = [&](const Factor& x, const Factor& y, const std::optional<Value>& result) {
    const Value v = result ? *result : Value{next++, TensorType{x.v.type.dtype, {Dim(rows(x)), Dim(cols(y))}}};
    out.push_back(product_instruction(x, y, v));
    return v;
  };
  for (size_t i = 0; i < insts.size(); ++i) {
    const auto it = plan.find(i);
    if (it == plan.end()) {
      out.push_back(std::move(insts[i]));
      continue;
    }
    const Value result = insts[i].results[0];
    const std::vector<Chain>& cs = it->second;
    std::optional<Value> sum;
    for (size_t c = 0; c < cs.size(); ++c) {
      const Chain& ch = cs[c];
      const bool last = c + 1 == cs.size();
      // The last chain writes the reader's own result when it is the only one.
      const std::optional<Value> into = last && !sum ? std::optional<Value>(result) : std::nullopt;
      const Value v = ch.right ? product(ch.x, Factor{product(ch.y, ch.z, std::nullopt)}, into)
                               : product(Factor{product(ch.x, ch.y, std::nullopt)}, ch.z, into);
      if (!sum) {
        sum = v;
        continue;
      }
      Instruction add;
      add.op = Add{};
      add.operands = {*sum, v};
      add.results = {last ? result : Value{next++, result.type}};
      sum = add.results[0];
      out.push_back(std::move(add));
    }
  }
  insts = std::move(out);
  return eliminate_dead_code(std::move(program));
}

}  // namespace einstage
