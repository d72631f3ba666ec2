// einsum's linearize and transpose rules and the plan-spec rewrite for reverse einsums (see EinsumAd.h).
#include "extensions/einsum/op/EinsumAd.h"

#include "extensions/einsum/notation/BindRule.h"
#include "extensions/einsum/op/EinsumAdOp.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "ir/Quote.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace einstage::einsum {

namespace {

// The shape rule's policy with nothing recorded: the instruction's operand types were checked (and their undecided
// equalities recorded) when it was built; here only each label's extent is wanted. Equalities resolve as the type
// rule's unify does (the constant wins).
struct CheckedDims {
  detail::ExtentCmp compare(const Dim& a, const Dim& b) const {
    if (a == b) return detail::ExtentCmp::equal;
    if (a.is_constant() && b.is_constant()) return detail::ExtentCmp::differ;
    return detail::ExtentCmp::undecided;
  }
  bool is_one(const Dim& d) const { return d == Dim(1); }
  bool negative(const Dim& d) const { return d.is_constant() && d.constant() < 0; }
  std::string text(const Dim& d) const { return d.to_string(); }
  Dim assume_equal(const Dim& a, const Dim& b, const std::string&) const { return b.is_constant() ? b : a; }
};

std::map<Label, Dim> label_extents(const Subscripts& s, const std::vector<std::vector<Dim>>& shapes, bool broadcast) {
  CheckedDims rules;
  auto fail_shape = [&](const auto&, const std::string& message) {
    EIN_ASSERT(false, "einsum AD: operand types that passed the type rule fail it now: {}", message);
  };
  return detail::bind_label_extents<Dim>(s, std::span<const std::vector<Dim>>(shapes), broadcast, rules, fail_shape)
      .extents;
}

}  // namespace

// ---- linearize: the sum over operands with a tangent of the einsum with that operand replaced ----
std::optional<Value> einsum_tangent(Builder& b, const EinsumPayload& payload, std::span<const Value> primals,
                                    std::span<const std::optional<Value>> tangents, EinsumAdPath path) {
  std::vector<int> slots;
  for (size_t k = 0; k < primals.size(); ++k)
    if (tangents[k]) slots.push_back(static_cast<int>(k));
  if (slots.empty()) return std::nullopt;
  if (path == EinsumAdPath::tree && slots.size() >= 2 && primals.size() >= 3) {
    std::vector<Value> ops(primals.begin(), primals.end());
    for (int k : slots) ops.push_back(*tangents[static_cast<size_t>(k)]);
    return b.extension(std::make_shared<EinsumAdPayload>(payload, EinsumAdMode::jvp, slots), std::move(ops));
  }
  auto shared = std::make_shared<EinsumPayload>(payload);
  std::optional<Value> sum;
  for (int k : slots) {
    std::vector<Value> ops(primals.begin(), primals.end());
    ops[static_cast<size_t>(k)] = *tangents[static_cast<size_t>(k)];
    Value term = b.extension(shared, std::move(ops));
    sum = sum ? b.add(*sum, term) : term;
  }
  return sum;
}

// ---- transpose with respect to operand k ----
Value einsum_cotangent(Builder& b, const EinsumPayload& payload, std::span<const Value> operands, size_t k,
                       const Value& ct, const EinsumEmitter& emit) {
  const Subscripts& s = payload.subscripts();
  const TensorType& tk = operands[k].type;
  const std::vector<Label>& lk = s.inputs[k];

  std::vector<std::vector<Dim>> shapes;
  for (const Value& v : operands) shapes.push_back(v.type.dims);
  const std::map<Label, Dim> forward = label_extents(s, shapes, payload.broadcast());

  // The reverse einsum: the cotangent first, then the other operands (conjugated: adjoint for Re<a, b>).
  Subscripts rev;
  rev.names = s.names;
  rev.ellipsis = s.ellipsis;
  rev.inputs.push_back(s.output);
  std::vector<Value> rev_ops{ct};
  std::vector<std::vector<Dim>> rev_shapes{ct.type.dims};
  std::set<Label> available(s.output.begin(), s.output.end());
  for (size_t j = 0; j < operands.size(); ++j) {
    if (j == k) continue;
    rev.inputs.push_back(s.inputs[j]);
    rev_ops.push_back(is_complex(operands[j].type.dtype) ? b.conj(operands[j]) : operands[j]);
    rev_shapes.push_back(operands[j].type.dims);
    available.insert(s.inputs[j].begin(), s.inputs[j].end());
  }
  const std::map<Label, Dim> reverse = label_extents(rev, rev_shapes, payload.broadcast());

  // k's distinct labels in order of first occurrence, and which of them the reverse einsum produces.
  std::vector<Label> distinct;
  std::vector<Dim> distinct_dims;
  for (size_t a = 0; a < lk.size(); ++a)
    if (std::find(distinct.begin(), distinct.end(), lk[a]) == distinct.end()) {
      distinct.push_back(lk[a]);
      distinct_dims.push_back(tk.dims[a]);
    }
  for (size_t i = 0; i < distinct.size(); ++i) {
    Label u = distinct[i];
    const Dim& dk = distinct_dims[i];
    if (!available.count(u)) continue;                                // only in k: broadcast back below
    if (dk == Dim(1) && forward.at(u) != Dim(1)) continue;            // k broadcast along u: the einsum sums it
    if (reverse.at(u) == Dim(1) && dk != Dim(1)) continue;            // the others broadcast along u
    rev.output.push_back(u);
  }

  Value x = ct;
  if (!(operands.size() == 1 && rev.output == s.output)) {  // a one-operand permutation-free einsum is the identity
    auto rev_payload = std::make_shared<EinsumPayload>(
        rev, reverse_plan_spec(payload.plan(), static_cast<int>(operands.size()), static_cast<int>(k)),
        payload.broadcast());
    x = emit ? emit(b, *rev_payload, std::move(rev_ops)) : b.extension(std::move(rev_payload), std::move(rev_ops));
  }
  if (is_complex(x.type.dtype) && !is_complex(tk.dtype)) x = b.real(x);  // adjoint of the real -> complex promotion
  if (x.type.dtype != tk.dtype) x = b.convert(x, tk.dtype);
  if (rev.output.size() != distinct.size()) {
    Axes dims;
    for (size_t i = 0, r = 0; i < distinct.size() && r < rev.output.size(); ++i)
      if (distinct[i] == rev.output[r]) {
        dims.push_back(static_cast<int64_t>(i));
        ++r;
      }
    x = b.broadcast_in_dim(x, dims, distinct_dims);
  }
  // Repeated labels: axis p repeats the label first seen at axis q < p; embed the diagonal there.
  for (size_t p = 0; p < lk.size(); ++p) {
    size_t q = static_cast<size_t>(std::find(lk.begin(), lk.end(), lk[p]) - lk.begin());
    if (q < p) x = b.embed_diag(x, static_cast<int64_t>(q), static_cast<int64_t>(p));
  }
  if (x.type.dims != tk.dims) x = b.reshape(x, tk.dims);  // same extents, written as k's type writes them
  return x;
}

namespace {

std::vector<std::optional<Value>> einsum_transpose(Builder& b, const Instruction& inst, std::span<const Value> operands,
                                                   std::span<const bool> linear, const Value& ct) {
  const EinsumPayload& payload = payload_of<EinsumPayload>(inst);
  std::vector<std::optional<Value>> out(operands.size());
  std::optional<size_t> k;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!linear[i]) continue;
    if (k)
      fail(ErrorKind::invalid_argument, "'{}' {} is linear in each operand separately, but operands {} and {} "
           "both depend on the linear inputs; transpose needs a program linear in them", kEinsumFamily,
           quote_for_message(payload.display()), *k, i);
    k = i;
  }
  if (k) out[*k] = einsum_cotangent(b, payload, operands, *k, ct);
  return out;
}

}  // namespace

PlanSpec reverse_plan_spec(const PlanSpec& spec, int n, int k) {
  if (spec.kind != PlanKind::path && spec.kind != PlanKind::tree) return spec;
  const ContractionTree tree = spec.kind == PlanKind::path ? ContractionTree::from_positional_path(n, spec.steps)
                                                           : ContractionTree(n, spec.steps);
  if (n <= 1) return PlanSpec::tree_plan({});
  const std::vector<Step>& steps = tree.steps();
  std::function<bool(int)> contains = [&](int id) {
    if (id < n) return id == k;
    const Step& s = steps[static_cast<size_t>(id - n)];
    return contains(s.first) || contains(s.second);
  };
  std::vector<Step> out;
  // An off-path subtree is contracted as in the forward tree; leaf j (j != k) is reverse operand j+1 before k, j after.
  std::function<int(int)> emit = [&](int id) -> int {
    if (id < n) return id < k ? id + 1 : id;
    const Step& s = steps[static_cast<size_t>(id - n)];
    int a = emit(s.first), c = emit(s.second);
    out.emplace_back(a, c);
    return n + static_cast<int>(out.size()) - 1;
  };
  int carried = 0;  // the cotangent, then its product with each off-path subtree from the root down
  int node = tree.root();
  while (node != k) {
    const Step& s = steps[static_cast<size_t>(node - n)];
    bool left = contains(s.first);
    int sibling = emit(left ? s.second : s.first);
    out.emplace_back(carried, sibling);
    carried = n + static_cast<int>(out.size()) - 1;
    node = left ? s.first : s.second;
  }
  return PlanSpec::tree_plan(std::move(out));
}

namespace {

// The tree of an einsum on operands of these types, when it can be known now.
std::optional<ContractionTree> tree_now(const EinsumPayload& payload, std::span<const Value> operands) {
  const Subscripts& s = payload.subscripts();
  const int n = static_cast<int>(operands.size());
  const PlanSpec& spec = payload.plan();
  if (spec.kind == PlanKind::path) return ContractionTree::from_positional_path(n, spec.steps);
  if (spec.kind == PlanKind::tree) return ContractionTree(n, spec.steps);
  std::vector<std::vector<Dim>> shapes;
  for (const Value& v : operands) {
    if (!v.type.constant_shape()) return std::nullopt;
    shapes.push_back(v.type.dims);
  }
  Extents extents;
  for (const auto& [label, dim] : label_extents(s, shapes, payload.broadcast())) extents[label] = dim.constant();
  return resolve(spec, s, extents);
}

}  // namespace

Program split_einsums(const Program& program, const ExtensionRegistry* registry) {
  Builder b(program.name, registry);
  std::map<ValueId, Value> mapped;
  for (const Parameter& p : program.params) mapped[p.value.id] = b.parameter(p.name, p.value.type);
  for (const ShapeConstraint& c : program.constraints)
    if (c.at < 0) b.require_equal(c.lhs, c.rhs, c.what);
  for (const Instruction& inst : program.instructions) {
    std::vector<Value> ops;
    for (const Value& v : inst.operands) ops.push_back(mapped.at(v.id));
    const auto* ext = std::get_if<ExtensionOp>(&inst.op);
    std::optional<ContractionTree> tree;
    if (ext && ext->family() == kEinsumFamily && ops.size() >= 3)
      tree = tree_now(static_cast<const EinsumPayload&>(*ext->payload), ops);
    if (!tree) {
      std::vector<Value> rs = b.emit_results(inst.op, ops);
      for (size_t r = 0; r < rs.size(); ++r) mapped[inst.results[r].id] = rs[r];
      continue;
    }
    const auto& payload = static_cast<const EinsumPayload&>(*ext->payload);
    const Subscripts& s = payload.subscripts();
    // Which labels each step keeps depends only on the labels (ContractionTree.h), so any extents do.
    Extents unit;
    for (const auto& term : s.inputs)
      for (Label l : term) unit[l] = 2;
    const TreeCost cost = evaluate(s, unit, *tree);
    const int n = static_cast<int>(ops.size());
    std::vector<Value> values = ops;
    std::vector<std::vector<Label>> labels = s.inputs;
    for (size_t k = 0; k < cost.steps.size(); ++k) {
      const StepCost& st = cost.steps[k];
      Subscripts pair;
      pair.names = s.names;
      pair.ellipsis = s.ellipsis;
      pair.inputs = {labels[static_cast<size_t>(st.left)], labels[static_cast<size_t>(st.right)]};
      pair.output = k + 1 == cost.steps.size() ? s.output : st.result_labels;
      auto step_payload = std::make_shared<EinsumPayload>(pair, PlanSpec{}, payload.broadcast());
      values.push_back(b.extension(std::move(step_payload),
                                   {values[static_cast<size_t>(st.left)], values[static_cast<size_t>(st.right)]}));
      labels.push_back(pair.output);
    }
    EIN_ASSERT(static_cast<int>(values.size()) == 2 * n - 1, "split_einsums: {} steps for {} operands",
               cost.steps.size(), n);
    mapped[inst.result().id] = values.back();
  }
  std::vector<Value> outputs;
  for (const Value& v : program.outputs) outputs.push_back(mapped.at(v.id));
  return b.finish(std::move(outputs));
}

void register_einsum_ad_rules(ExtensionRegistry& registry, EinsumAdPath path) {
  ExtensionSemantics* sem = registry.find_mutable(kEinsumFamily);
  if (!sem)
    fail(ErrorKind::not_found, "register_einsum_ad_rules: family '{}' is not registered; call "
         "register_einsum_semantics first", kEinsumFamily);
  if (path == EinsumAdPath::tree && !registry.find(kEinsumAdFamily))
    fail(ErrorKind::not_found, "register_einsum_ad_rules: the tree path emits '{}', which is not registered; call "
         "register_einsum_semantics (it registers both families)", kEinsumAdFamily);
  sem->linearize = [path](Builder& b, const Instruction& inst, std::span<const Value> primals,
                          std::span<const std::optional<Value>> tangents) {
    return einsum_tangent(b, payload_of<EinsumPayload>(inst), primals, tangents, path);
  };
  sem->transpose = einsum_transpose;
}

}  // namespace einstage::einsum
