// Preparing the reverse walk of an einsum's planned tree (see TreeAd.h): the tree, the reverse steps and their
// layouts, the kept intermediates and the arena. Running the walks is TreeAdWalk.cpp; what both share is TreeAdParts.h.
#include "extensions/einsum/exec/TreeAdParts.h"

#include "extensions/api/Kernels.h"
#include "extensions/einsum/exec/CallScratch.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/Quote.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

namespace einstage::einsum {

namespace {

Tensor ones_vector(DType dtype, int64_t extent) {
  Tensor t = Tensor::empty(DType::f64, {extent});
  double* d = t.data<double>();
  for (int64_t i = 0; i < extent; ++i) d[i] = 1.0;
  return dtype == DType::f64 ? t : t.astype(dtype);
}

// [first, second] along a new last axis (column-major: each is one contiguous half).
Tensor stack_pair(const Tensor& first, const Tensor& second, ScratchAllocator& scratch) {
  Shape shape = first.shape();
  shape.push_back(2);
  Tensor out = Tensor::empty(first.dtype(), shape, scratch);
  const Strides strides = col_major_strides(first.shape());
  auto* base = static_cast<std::byte*>(out.raw_data());
  Tensor::view_of(first.dtype(), first.shape(), strides, base).copy_from(first);
  Tensor::view_of(first.dtype(), first.shape(), strides, base + first.nbytes()).copy_from(second);
  return out;
}

}  // namespace

namespace tree_ad {

std::string label_string(const Subscripts& s, const std::vector<Label>& labels) {
  std::string out;
  for (Label l : labels) out += label_name(s, l);
  return out;
}

PlannedTree plan_tree(const Subscripts& s, std::span<const TensorMeta> promoted, const EinsumOptions& options,
                      bool with_root) {
  PlannedTree tree;
  const int n = static_cast<int>(promoted.size());
  tree.forward = EinsumPlan::prepare(s, promoted, options);
  if (tree.forward.is_shortcut()) tree.children.push_back({0, 1});
  else tree.children = tree.forward.tree().steps();
  for (int i = 0; i < n; ++i) {
    tree.labels.push_back(s.inputs[static_cast<size_t>(i)]);
    tree.shapes.push_back(promoted[static_cast<size_t>(i)].shape);
  }
  const DType dtype = tree.forward.dtype();
  const std::vector<StepPlan>& plans = tree.forward.steps();
  for (size_t t = 0; t < plans.size(); ++t) {
    tree.labels.push_back(plans[t].final ? s.output : plans[t].result);
    if (plans[t].final && !with_root) {
      tree.shapes.push_back(tree.forward.output_shape());
      tree.pairs.emplace_back();
      continue;
    }
    auto [a, b] = tree.children[t];
    Subscripts pair;
    pair.names = s.names;
    pair.ellipsis = s.ellipsis;
    pair.inputs = {tree.labels[static_cast<size_t>(a)], tree.labels[static_cast<size_t>(b)]};
    pair.output = tree.labels.back();
    const TensorMeta metas2[2] = {{dtype, tree.shapes[static_cast<size_t>(a)]},
                                  {dtype, tree.shapes[static_cast<size_t>(b)]}};
    EinsumOptions step_options;
    step_options.allow_broadcast = options.allow_broadcast;
    tree.pairs.push_back(EinsumPlan::prepare(pair, metas2, step_options));
    tree.shapes.push_back(tree.pairs.back()->output_shape());
  }
  return tree;
}

std::optional<EinsumPlan> stacked_terms_plan(const EinsumPlan& p, std::span<const TensorMeta> metas,
                                             bool allow_broadcast) {
  const int64_t out = element_count(p.output_shape());
  const int64_t in = element_count(metas[0].shape) + element_count(metas[1].shape);
  if (element_count(metas[0].shape) == 0 || element_count(metas[1].shape) == 0 || out <= 2 * in) return std::nullopt;
  Subscripts s = p.subscripts();
  std::set<Label> used(s.output.begin(), s.output.end());
  for (const auto& term : s.inputs) used.insert(term.begin(), term.end());
  Label pair = 0x110000;  // above every code point, like the reverse steps' fresh labels
  while (used.count(pair)) ++pair;
  std::vector<TensorMeta> stacked(metas.begin(), metas.end());
  for (int i : {0, 1}) {
    s.inputs[static_cast<size_t>(i)].push_back(pair);
    stacked[static_cast<size_t>(i)].shape.push_back(2);
  }
  EinsumOptions o;
  o.allow_broadcast = allow_broadcast;
  return EinsumPlan::prepare(s, stacked, o);
}

Tensor two_terms(const EinsumPlan& plan, const std::optional<EinsumPlan>& stacked, const Tensor& x0,
                 const Tensor& y0, const Tensor& x1, const Tensor& y1, std::span<const Tensor> ones,
                 StepOperands& ops, ExecutionContext& context) {
  if (stacked)
    return stacked->execute(ops.of(stack_pair(x0, x1, context.scratch()), stack_pair(y0, y1, context.scratch()), ones),
                            context);
  Tensor sum = plan.execute(ops.of(x0, y0, ones), context);
  plan.accumulate_into(ops.of(x1, y1, ones), sum, context);
  return sum;
}

}  // namespace tree_ad

using namespace tree_ad;

ContractionWork contraction_work(const EinsumPlan& plan) {
  const Subscripts& s = plan.subscripts();
  const int n = static_cast<int>(s.inputs.size());
  const ContractionTree tree = plan.is_shortcut() || n < 2 ? ContractionTree::left_to_right(n) : plan.tree();
  return ContractionWork{1, static_cast<int64_t>(plan.steps().size()), evaluate(s, plan.extents(), tree).flops};
}


void EinsumVjpPlan::Impl::build(const Subscripts& s, std::span<const TensorMeta> metas, const TensorMeta& ct,
                                const EinsumOptions& options) {
  subs = s;
  n = static_cast<int>(metas.size());
  if (n < 2)
    fail(ErrorKind::invalid_argument, "einsum vjp {}: the tree walk needs two or more operands but the einsum has "
         "{}; differentiate a one-operand einsum per operand (einsum_cotangent)", quote_for_message(einsum::to_string(s)), n);
  value_dtype = metas[0].dtype;
  for (const TensorMeta& m : metas) value_dtype = promote(value_dtype, m.dtype);
  dtype = promote(ct.dtype, value_dtype);
  std::vector<TensorMeta> promoted;
  for (const TensorMeta& m : metas) promoted.push_back(TensorMeta{dtype, m.shape});
  PlannedTree tree = plan_tree(s, promoted, options, with_value);
  forward = std::move(tree.forward);
  if (ct.shape != forward.output_shape())
    fail(ErrorKind::shape, "einsum vjp {}: the output cotangent is {} but the output is {}; pass a cotangent of the "
         "output's shape", quote_for_message(einsum::to_string(s)), shape_to_string(ct.shape),
         shape_to_string(forward.output_shape()));
  for (const TensorMeta& m : metas) {
    complex_inputs.push_back(is_complex(m.dtype));
    operand_dtypes.push_back(m.dtype);
  }
  children = std::move(tree.children);
  labels = std::move(tree.labels);
  shapes = std::move(tree.shapes);
  ct_labels = labels;
  ct_shapes = shapes;
  const std::vector<std::optional<EinsumPlan>>& pairs = tree.pairs;
  const int nodes = 2 * n - 1;
  auto parent_of = std::vector<int>(static_cast<size_t>(nodes), -1);
  for (size_t t = 0; t < children.size(); ++t) {
    parent_of[static_cast<size_t>(children[t].first)] = n + static_cast<int>(t);
    parent_of[static_cast<size_t>(children[t].second)] = n + static_cast<int>(t);
  }
  // Which nodes lead to a requested operand, whose values the reverse pass reads, and which values must be computed.
  std::vector<bool> wanted(static_cast<size_t>(nodes), false), read(static_cast<size_t>(nodes), false);
  std::vector<bool> sibling_read(static_cast<size_t>(nodes), false);  // read by a reverse step itself
  for (int k : slots) wanted[static_cast<size_t>(k)] = true;
  for (size_t t = 0; t < children.size(); ++t) {
    const int r = n + static_cast<int>(t);
    wanted[static_cast<size_t>(r)] = wanted[static_cast<size_t>(children[t].first)] ||
                                     wanted[static_cast<size_t>(children[t].second)];
  }
  for (size_t t = children.size(); t-- > 0;) {
    const int r = n + static_cast<int>(t);
    if (!wanted[static_cast<size_t>(r)]) continue;
    auto [a, b] = children[t];
    for (auto [child, sibling] : {std::pair{a, b}, std::pair{b, a}}) {
      if (!wanted[static_cast<size_t>(child)]) continue;
      reverse.push_back(laid_out_step(child, r, sibling, wanted, options));
      const std::vector<int>& perm = reverse.back().layout.perm;
      ct_labels[static_cast<size_t>(child)] = permuted(labels[static_cast<size_t>(child)], perm);
      ct_shapes[static_cast<size_t>(child)] = permuted(shapes[static_cast<size_t>(child)], perm);
      read[static_cast<size_t>(sibling)] = sibling_read[static_cast<size_t>(sibling)] = true;
    }
  }
  // A kept value needs its children's values; steps are in dependency order, so one backward sweep marks them all.
  for (size_t t = children.size(); t-- > 0;)
    if (read[static_cast<size_t>(n) + t]) {
      read[static_cast<size_t>(children[t].first)] = true;
      read[static_cast<size_t>(children[t].second)] = true;
    }
  steps.resize(children.size());
  stacked_steps.resize(children.size());
  for (size_t t = 0; t + 1 < children.size(); ++t) {
    steps[t] = *pairs[t];  // the tangent walk reads every value
    const TensorMeta pair[2] = {{dtype, shapes[static_cast<size_t>(children[t].first)]},
                                {dtype, shapes[static_cast<size_t>(children[t].second)]}};
    stacked_steps[t] = stacked_terms_plan(*steps[t], pair, options.allow_broadcast);
  }
  if (with_value) steps.back() = *pairs.back();
  // Memory policy: the values the reverse steps read are kept in step order while they fit under the limit; the
  // others are recomputed from their subtrees when a reverse step reads them (the same plans: the same bits).
  keep.assign(static_cast<size_t>(nodes), false);
  forward_phase.assign(static_cast<size_t>(nodes), false);
  forward_phase[static_cast<size_t>(root())] = with_value;  // then every node below it is computed once, in order
  for (size_t t = 0; t + 1 < children.size(); ++t) {
    const size_t v = static_cast<size_t>(n) + t;
    if (!sibling_read[v]) continue;
    const int64_t bytes = checked_bytes(shapes[v], size_of(dtype), "a kept intermediate");
    if (keep_limit >= 0 && checked_add(kept, bytes, "the kept intermediates") > keep_limit) {
      recomputed.push_back(static_cast<int>(v));
      continue;
    }
    keep[v] = true;
    kept += bytes;
  }
  for (size_t t = children.size(); t-- > 0;) {
    const size_t v = static_cast<size_t>(n) + t;
    if (!keep[v] && !forward_phase[v]) continue;
    forward_phase[v] = true;
    forward_phase[static_cast<size_t>(children[t].first)] = true;
    forward_phase[static_cast<size_t>(children[t].second)] = true;
  }
  last_use.assign(static_cast<size_t>(nodes), -1);
  for (size_t i = 0; i < reverse.size(); ++i) last_use[static_cast<size_t>(reverse[i].parent)] = static_cast<int>(i);
  lay_out();
}

// execute()'s walk as steps 0..T-1 (the forward steps, by step index) then T + i (reverse step i): which arena
// tensor each step writes and which it reads, and from that the arena (lay_out_arena: a tensor is live from its
// write to its last read). A value the forward phase keeps is read until the walk ends (a reverse step reads it, or
// recomputes a value that was not kept from it); one it does not keep only by its parent's step. A node's cotangent
// is read by the reverse steps of its children, the last at last_use. The root's value and the slots' cotangents
// are results (tensors of their own), the root's cotangent the caller's.
void EinsumVjpPlan::Impl::lay_out() {
  const size_t nodes = static_cast<size_t>(2 * n - 1);
  const int forward_steps = static_cast<int>(children.size());
  const int end = forward_steps + static_cast<int>(reverse.size());
  value_buffer.assign(nodes, -1);
  ct_buffer.assign(nodes, -1);
  auto add = [&](int node, bool cotangent, int written) {
    ArenaTensor t;
    t.node = node;
    t.cotangent = cotangent;
    t.bytes = checked_bytes((cotangent ? ct_shapes : shapes)[static_cast<size_t>(node)], size_of(dtype),
                            "an intermediate of the walk");
    t.written = written;
    (cotangent ? ct_buffer : value_buffer)[static_cast<size_t>(node)] = static_cast<int>(arena_tensors.size());
    arena_tensors.push_back(std::move(t));
  };
  for (int t = 0; t < forward_steps; ++t) {
    const int v = n + t;
    if (!forward_phase[static_cast<size_t>(v)]) continue;
    for (int c : {children[static_cast<size_t>(t)].first, children[static_cast<size_t>(t)].second})
      if (value_buffer[static_cast<size_t>(c)] >= 0) arena_tensors[static_cast<size_t>(value_buffer[static_cast<size_t>(c)])].read_at.push_back(t);
    if (v != root()) add(v, false, t);
  }
  for (int v = n; v < root(); ++v)
    if (keep[static_cast<size_t>(v)]) arena_tensors[static_cast<size_t>(value_buffer[static_cast<size_t>(v)])].read_at.push_back(end);
  for (size_t i = 0; i < reverse.size(); ++i) {
    const ReverseStep& r = reverse[i];
    const int at = forward_steps + static_cast<int>(i);
    if (ct_buffer[static_cast<size_t>(r.parent)] >= 0)
      arena_tensors[static_cast<size_t>(ct_buffer[static_cast<size_t>(r.parent)])].read_at.push_back(at);
    if (r.node >= n) add(r.node, true, at);
  }
  std::vector<ArenaBuffer> buffers;
  for (const ArenaTensor& t : arena_tensors) {
    int last = t.written;
    for (int r : t.read_at) last = std::max(last, r);
    buffers.push_back(ArenaBuffer{t.bytes, t.written, last});
  }
  const ArenaLayout layout = lay_out_arena(buffers, 64, "the arena of an einsum vjp walk");
  for (size_t b = 0; b < arena_tensors.size(); ++b) arena_tensors[b].offset = layout.offsets[b];
  arena_bytes = layout.bytes;
  result_offset.assign(static_cast<size_t>(n), -1);
  for (const ReverseStep& r : reverse) {
    if (r.node >= n) continue;
    const Shape& shape = ct_shapes[static_cast<size_t>(r.node)];
    EIN_ASSERT(r.plan->output_shape() == shape, "einsum vjp: operand {}'s cotangent step gives {}, not {}", r.node,
               shape_to_string(r.plan->output_shape()), shape_to_string(shape));
    const int64_t bytes = checked_bytes(shape, size_of(dtype), "an operand's cotangent");
    result_offset[static_cast<size_t>(r.node)] = result_bytes;
    result_bytes = checked_add(result_bytes, (bytes + 63) / 64 * 64, "the cotangents of an einsum vjp walk");
  }
  for (size_t t = 0; t < children.size(); ++t)
    if (forward_phase[static_cast<size_t>(n) + t]) step_scratch = std::max(step_scratch, steps[t]->scratch_bytes());
  for (const ReverseStep& r : reverse) step_scratch = std::max(step_scratch, r.plan->scratch_bytes());
  id = executor::next_plan_identity();
}

// The penalty (ReverseLayout.h) of the reverse step giving `node` its cotangent from a parent cotangent laid out as
// `ct` and the sibling's value, run in `layout`.
double EinsumVjpPlan::Impl::step_penalty(int node, int sibling, LaidOutTerm ct, const ReverseLayout& layout) const {
  const LaidOutTerm value{labels[static_cast<size_t>(sibling)], shapes[static_cast<size_t>(sibling)]};
  const std::vector<Label> out_labels = permuted(labels[static_cast<size_t>(node)], layout.perm);
  const Shape out_shape = permuted(shapes[static_cast<size_t>(node)], layout.perm);
  const LaidOutTerm out{out_labels, out_shape};
  return layout.sibling_first ? gett_stride_penalty(value, ct, out) : gett_stride_penalty(ct, value, out);
}

// The least penalty of that step over the layouts laid_out_step considers for `node` (for an operand, whose
// cotangent keeps its layout, the identity with either operand first).
double EinsumVjpPlan::Impl::best_step_penalty(int node, int sibling, LaidOutTerm ct) const {
  const std::vector<Label>& lc = labels[static_cast<size_t>(node)];
  if (node < n) {
    std::vector<int> identity(lc.size());
    std::iota(identity.begin(), identity.end(), 0);
    return std::min(step_penalty(node, sibling, ct, {identity, false}), step_penalty(node, sibling, ct, {identity, true}));
  }
  double best = -1;
  for (const ReverseLayout& l : reverse_layout_candidates(ct.labels, labels[static_cast<size_t>(sibling)], lc)) {
    const double p = step_penalty(node, sibling, ct, l);
    if (best < 0 || p < best) best = p;
  }
  return best;
}

// The reverse step of `node` in the layout of least penalty: its own step's plus, looking one level down, that of
// the best layout of each of its children's reverse steps reading the cotangent so laid out (ties: the earlier
// candidate, the node's own order with the cotangent first). An operand's cotangent keeps the operand's layout (its
// step takes the sibling first where that costs less), and a step with ones operands (its labels are not all in its
// two operands) keeps the node's order.
ReverseStep EinsumVjpPlan::Impl::laid_out_step(int node, int parent, int sibling, const std::vector<bool>& wanted,
                                               const EinsumOptions& options) const {
  const std::vector<Label>& lc = labels[static_cast<size_t>(node)];
  std::vector<int> identity(lc.size());
  std::iota(identity.begin(), identity.end(), 0);
  ReverseStep r = reverse_step(node, parent, sibling, {identity, false}, options);
  if (!r.ones.empty()) return r;
  const LaidOutTerm ct{ct_labels[static_cast<size_t>(parent)], ct_shapes[static_cast<size_t>(parent)]};
  if (node < n) {  // the operand's layout, with the sibling's value first where that costs less
    const ReverseLayout swapped{identity, true};
    if (step_penalty(node, sibling, ct, swapped) < step_penalty(node, sibling, ct, r.layout))
      return reverse_step(node, parent, sibling, swapped, options);
    return r;
  }
  const auto [a, b] = children[static_cast<size_t>(node - n)];
  double best_cost = -1;
  ReverseLayout best;
  for (const ReverseLayout& l : reverse_layout_candidates(ct.labels, labels[static_cast<size_t>(sibling)], lc)) {
    double cost = step_penalty(node, sibling, ct, l);
    const std::vector<Label> below_labels = permuted(lc, l.perm);
    const Shape below_shape = permuted(shapes[static_cast<size_t>(node)], l.perm);
    for (auto [child, other] : {std::pair{a, b}, std::pair{b, a}})
      if (wanted[static_cast<size_t>(child)]) cost += best_step_penalty(child, other, {below_labels, below_shape});
    if (best_cost < 0 || cost < best_cost) best_cost = cost, best = l;
  }
  if (best == r.layout) return r;
  return reverse_step(node, parent, sibling, best, options);
}

ReverseStep EinsumVjpPlan::Impl::reverse_step(int node, int parent, int sibling, const ReverseLayout& layout,
                                              const EinsumOptions& options) const {
  ReverseStep r;
  r.node = node;
  r.parent = parent;
  r.sibling = sibling;
  r.layout = layout;
  const std::vector<Label>& lp = ct_labels[static_cast<size_t>(parent)];
  const std::vector<Label>& ls = labels[static_cast<size_t>(sibling)];
  const std::vector<Label>& lc = labels[static_cast<size_t>(node)];
  const Shape& sc = shapes[static_cast<size_t>(node)];
  const Shape& sp = ct_shapes[static_cast<size_t>(parent)];
  const Shape& ss = shapes[static_cast<size_t>(sibling)];
  // The largest extent each label has among the reverse einsum's two operands (absent: in neither).
  std::map<Label, int64_t> available;
  for (auto [ls_, sh] : {std::pair{&lp, &sp}, std::pair{&ls, &ss}})
    for (size_t a = 0; a < ls_->size(); ++a) {
      int64_t& e = available[(*ls_)[a]];
      e = std::max(e, (*sh)[a]);
    }
  std::set<Label> used;
  for (const auto& term : subs.inputs) used.insert(term.begin(), term.end());
  Label fresh = 0x110000;  // above every code point; fresh ellipsis / group labels count down from INT32_MAX
  auto next_fresh = [&] {
    while (used.count(fresh)) ++fresh;
    used.insert(fresh);
    return fresh;
  };
  const std::map<Label, int64_t>& extents = forward.extents();
  Subscripts rev;
  rev.names = subs.names;
  rev.ellipsis = subs.ellipsis;
  rev.inputs = {lp, ls};
  std::vector<TensorMeta> metas = {{dtype, sp}, {dtype, ss}};
  if (layout.sibling_first) {
    std::swap(rev.inputs[0], rev.inputs[1]);
    std::swap(metas[0], metas[1]);
  }
  std::set<Label> given;  // labels that already have a ones operand
  for (int a_ : layout.perm) {  // the result's axes in the cotangent's order
    const size_t a = static_cast<size_t>(a_);
    const Label u = lc[a];
    if (sc[a] == 1 && extents.at(u) != 1) {  // the child broadcasts along u: sum u into a fresh length-1 axis
      const Label f = next_fresh();
      rev.inputs.push_back({f});
      metas.push_back({dtype, {1}});
      r.ones.push_back(ones_vector(dtype, 1));
      rev.output.push_back(f);
      continue;
    }
    rev.output.push_back(u);
    auto it = available.find(u);
    if ((it == available.end() || it->second != sc[a]) && !given.count(u)) {
      // u is summed inside the child, or the others broadcast along it: the cotangent is constant along u
      rev.inputs.push_back({u});
      metas.push_back({dtype, {sc[a]}});
      r.ones.push_back(ones_vector(dtype, sc[a]));
      given.insert(u);
    }
  }
  EinsumOptions o;
  o.allow_broadcast = options.allow_broadcast;
  r.plan = EinsumPlan::prepare(rev, metas, o);
  r.stacked = stacked_terms_plan(*r.plan, metas, options.allow_broadcast);
  EIN_ASSERT(r.plan->output_shape() == permuted(sc, layout.perm),
             "einsum vjp: the reverse step for node {} gives {} for a node of {}", node,
             shape_to_string(r.plan->output_shape()), shape_to_string(sc));
  return r;
}

EinsumVjpPlan EinsumVjpPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> operands,
                                     const TensorMeta& cotangent, std::vector<int> slots,
                                     const EinsumOptions& options, int64_t keep_limit_bytes, bool with_value) {
  auto impl = std::make_shared<Impl>();
  impl->slots = std::move(slots);
  impl->keep_limit = keep_limit_bytes;
  impl->with_value = with_value;
  impl->build(subscripts, operands, cotangent, options);
  EinsumVjpPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

}  // namespace einstage::einsum
