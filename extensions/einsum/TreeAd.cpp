// The reverse walk of an einsum's planned tree and the tangent sum (see TreeAd.h).
#include "extensions/einsum/TreeAd.h"

#include "extensions/api/Kernels.h"
#include "extensions/einsum/ArenaLayout.h"
#include "extensions/einsum/Notation.h"
#include "extensions/einsum/ReverseLayout.h"
#include "ir/Quote.h"
#include "ir/Size.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

namespace einstage::einsum {

namespace {

// One reverse contraction: the cotangent of tree node `node` from its parent's cotangent and its sibling's value.
// `layout` (ReverseLayout.h) says which operand comes first and, for an intermediate node, the axis order its
// cotangent is written in (the node's own order for an operand).
struct ReverseStep {
  int node = -1, parent = -1, sibling = -1;
  ReverseLayout layout;
  std::vector<Tensor> ones;  // the extra ones operands, in the einsum's operand order after the sibling
  std::optional<EinsumPlan> plan;
  std::optional<EinsumPlan> stacked;  // the tangent P(dct, V) + P(ct, dV) as one contraction (stacked_terms_plan)
  // The pair (x, y) in the plan's operand order: (cotangent, value) or (value, cotangent).
  std::pair<const Tensor&, const Tensor&> order(const Tensor& ct, const Tensor& value) const {
    if (layout.sibling_first) return {value, ct};
    return {ct, value};
  }
};

std::string label_string(const Subscripts& s, const std::vector<Label>& labels) {
  std::string out;
  for (Label l : labels) out += label_name(s, l);
  return out;
}

Tensor ones_vector(DType dtype, int64_t extent) {
  Tensor t = Tensor::empty(DType::f64, {extent});
  double* d = t.data<double>();
  for (int64_t i = 0; i < extent; ++i) d[i] = 1.0;
  return dtype == DType::f64 ? t : t.astype(dtype);
}

// The forward's planned tree as nodes (operands, then one per step; the last is the root) with their labels and
// shapes, and each step as a two-operand einsum of its children: `pairs[t]` gives step t's result (the root's with
// the output labels when `with_root`, else the root has no pair). A step's result may keep extent 1 where both
// children broadcast (the forward einsum materialises the label's full extent there); the reverse steps treat that
// as broadcasting. Both plans read the tree through this one function.
struct PlannedTree {
  EinsumPlan forward;
  std::vector<std::pair<int, int>> children;  // per step: (left, right) node ids
  std::vector<std::vector<Label>> labels;     // per node: labels as stored
  std::vector<Shape> shapes;                  // per node
  std::vector<std::optional<EinsumPlan>> pairs;
};

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

// Operands in the walk's dtype.
Tensor promoted_to(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : x.astype(dtype); }

// A step's operands (x, y, then its ones) in one vector reused across a walk's steps: assigning a Tensor into a
// slot reuses that slot's shape and stride storage, so a step allocates nothing here (a vector and two shapes per
// step before; perf had the walk's allocations at several percent of the 8x8 grid's gradient). A slot keeps its
// tensor until the next step overwrites it.
class StepOperands {
 public:
  std::span<const Tensor> of(const Tensor& x, const Tensor& y, std::span<const Tensor> ones = {}) {
    const size_t count = 2 + ones.size();
    if (ops_.size() < count) ops_.resize(count);
    ops_[0] = x;
    ops_[1] = y;
    std::copy(ones.begin(), ones.end(), ops_.begin() + 2);
    return std::span<const Tensor>(ops_.data(), count);
  }

 private:
  std::vector<Tensor> ops_;
};

// A tangent's two terms P(x0, y0) + P(x1, y1) (dA.B + A.dB, or P(dct, V) + P(ct, dV)) as one contraction: a label
// of extent 2 is appended to P's first two operands and contracted, P2([x0, x1], [y0, y1]). It writes the output once
// instead of writing it and then reading it back to add into it, and costs copying the four operands into the two
// stacks, so it is prepared only when the output has more elements than the four operands together (an outer
// product's, say; a matrix-vector step's two passes read the large operand once each either way). `metas`: P's
// operands.
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

// x0.y0 + x1.y1 by `plan` (ones: its operands after the first two): by `stacked` in one contraction when prepared,
// else the second term added by the kernel into the first's tensor.
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

}  // namespace

struct EinsumVjpPlan::Impl {
  Subscripts subs;
  int n = 0;
  DType dtype = DType::f64;
  std::vector<int> slots;
  std::vector<DType> operand_dtypes;           // per operand: the dtype of its cotangent
  EinsumPlan forward;                          // the planned tree (the same the forward einsum gets)
  std::vector<std::pair<int, int>> children;   // per step: (left, right) node ids
  std::vector<std::vector<Label>> labels;      // per node: labels as stored
  std::vector<Shape> shapes;                   // per node
  std::vector<std::vector<Label>> ct_labels;   // per node: its cotangent's labels as stored (ReverseLayout.h)
  std::vector<Shape> ct_shapes;                // per node: its cotangent's shape
  std::vector<bool> complex_inputs;            // per operand: conjugated before the walk
  std::vector<std::optional<EinsumPlan>> steps;  // per step: the forward step, when its value is ever needed
  std::vector<std::optional<EinsumPlan>> stacked_steps;  // per step below the root: dA.B + A.dB as one contraction
  std::vector<ReverseStep> reverse;            // in execution order (parents before children)
  std::vector<int> last_use;                   // per node: index of the last reverse step reading its cotangent
  int64_t keep_limit = -1;                     // bytes of intermediates the forward may keep (-1: no limit)
  std::vector<bool> keep;                      // per node: kept by the forward phase
  std::vector<bool> forward_phase;             // per node: computed by the forward phase (kept, or feeds a kept one)
  std::vector<int> recomputed;                 // nodes the reverse steps read that are recomputed when read
  int64_t kept = 0;
  bool with_value = false;                     // the forward phase also computes the root: the einsum's value
  DType value_dtype = DType::f64;              // the einsum's (the operands' promoted dtype)
  // execute()'s arena (ArenaLayout.h): the values of the forward phase below the root and the cotangents of the
  // nodes above the operands, placed once here from the steps that write and read them, so a call allocates one
  // block (or none: a lease's buffer) instead of a tensor per step.
  std::vector<ArenaTensor> arena_tensors;      // as arena_tensors() reports them
  std::vector<int> value_buffer, ct_buffer;    // per node: its index in arena_tensors (-1: not in the arena)
  int64_t arena_bytes = 0;
  int64_t step_scratch = 0;                    // the largest scratch_bytes() of the plans execute() runs leased
  uint64_t id = 0;                             // unique in the process: a slot's views of this plan's arena

  int root() const { return 2 * n - 2; }
  void build(const Subscripts& s, std::span<const TensorMeta> metas, const TensorMeta& ct, const EinsumOptions& o);
  void lay_out();
  ReverseStep reverse_step(int node, int parent, int sibling, const ReverseLayout& layout,
                           const EinsumOptions& options) const;
  ReverseStep laid_out_step(int node, int parent, int sibling, const std::vector<bool>& wanted,
                            const EinsumOptions& options) const;
  double step_penalty(int node, int sibling, LaidOutTerm ct, const ReverseLayout& layout) const;
  double best_step_penalty(int node, int sibling, LaidOutTerm ct) const;
};

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
  for (size_t t = 0; t < children.size(); ++t)
    if (forward_phase[static_cast<size_t>(n) + t]) step_scratch = std::max(step_scratch, steps[t]->scratch_bytes());
  for (const ReverseStep& r : reverse) step_scratch = std::max(step_scratch, r.plan->scratch_bytes());
  static std::atomic<uint64_t> next_id{1};
  id = next_id.fetch_add(1, std::memory_order_relaxed);
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

namespace {

// execute()'s arena and step scratch come from one lease of the context's scratch when they are this small (the slot
// keeps them for the next call, and keeps the views below); a larger arena is a block of the allocator's per call.
constexpr int64_t kLeasedWalkBytes = int64_t(1) << 20;

// What a slot keeps for the vjp walk besides its buffers: views of one plan's arena tensors at one base address, so
// a call whose lease gives the same slot buffer again makes no tensor (no shape, stride or storage allocation).
struct WalkSlot {
  uint64_t plan = 0;
  const std::byte* base = nullptr;
  std::vector<Tensor> views;  // per arena tensor
};

}  // namespace

std::vector<Tensor> EinsumVjpPlan::execute(std::span<const Tensor> operands, const Tensor& cotangent,
                                           ExecutionContext& context) const {
  const Impl& im = *impl_;
  ThreadPool* pool = &context.pool();
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n, "einsum vjp: {} operands for a plan of {}", operands.size(),
             im.n);
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  // The arena (intermediates) and the steps' own scratch, in one lease; the steps run under it (run_leased).
  ScratchAllocator& allocator = context.scratch();
  ScratchAllocator::Lease lease = allocator.lease();
  std::shared_ptr<std::byte> block;
  std::byte* base = nullptr;
  if (im.arena_bytes <= kLeasedWalkBytes) {
    base = lease.buffer(0, static_cast<size_t>(std::max<int64_t>(im.arena_bytes, 64)));
  } else {
    block = allocator.allocate(static_cast<size_t>(im.arena_bytes), "the arena of an einsum vjp walk");
    base = block.get();
  }
  std::byte* step_scratch = im.step_scratch <= kLeasedWalkBytes
                                ? lease.buffer(1, static_cast<size_t>(std::max<int64_t>(im.step_scratch, 64)))
                                : nullptr;
  WalkSlot& slot = lease.object<WalkSlot>();
  if (slot.plan != im.id || slot.base != base) {
    slot.views.clear();
    for (const ArenaTensor& t : im.arena_tensors) {
      const Shape& shape = (t.cotangent ? im.ct_shapes : im.shapes)[static_cast<size_t>(t.node)];
      slot.views.push_back(Tensor::view_of(im.dtype, shape, col_major_strides(shape), base + t.offset));
    }
    slot.plan = im.id;
    slot.base = base;
  }
  // A step's operands by pointer (x, y, then its ones), in one vector reused across the walk's steps: no Tensor is
  // copied per step.
  std::vector<const Tensor*> pointers;
  StepOperands ops;  // the same as tensors, for a step too large for the lease (execute_into)
  auto run = [&](const EinsumPlan& plan, const Tensor& x, const Tensor& y, std::span<const Tensor> ones, Tensor& out) {
    if (step_scratch) {
      pointers.assign({&x, &y});
      for (const Tensor& one : ones) pointers.push_back(&one);
      plan.run_leased(pointers, out, context, lease, step_scratch);
    } else {
      plan.execute_into(ops.of(x, y, ones), out, context, pool);
    }
  };
  // Per node, its value and its cotangent where the walk has them (operands, arena views, results, temporaries).
  std::vector<const Tensor*> values(nodes, nullptr), cts(nodes, nullptr);
  std::vector<Tensor> promoted(static_cast<size_t>(im.n));
  for (int i = 0; i < im.n; ++i) {
    const Tensor& x = operands[static_cast<size_t>(i)];
    const bool conj = is_complex(im.dtype) && im.complex_inputs[static_cast<size_t>(i)];
    if (x.dtype() == im.dtype && !conj) {
      values[static_cast<size_t>(i)] = &x;
      continue;
    }
    Tensor v = x.dtype() == im.dtype ? x : x.astype(im.dtype);
    // Conjugated operands make every forward intermediate the conjugate too: the reverse steps read them as they are.
    if (conj) v = kernels::unary(kernels::UnaryOp::conj, v, pool);
    promoted[static_cast<size_t>(i)] = std::move(v);
    values[static_cast<size_t>(i)] = &promoted[static_cast<size_t>(i)];
  }
  auto arena = [&](int buffer) -> Tensor& { return slot.views[static_cast<size_t>(buffer)]; };
  Tensor value;  // the root's, when asked for
  // Forward phase: the kept values, and what they are computed from (released once their parent exists).
  for (size_t t = 0; t < im.steps.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    if (!im.forward_phase[v]) continue;
    auto [a, b] = im.children[t];
    Tensor* out = &value;
    if (static_cast<int>(v) == im.root()) value = Tensor::empty(im.dtype, im.shapes[v], allocator);
    else out = &arena(im.value_buffer[v]);
    run(*im.steps[t], *values[static_cast<size_t>(a)], *values[static_cast<size_t>(b)], {}, *out);
    values[v] = out;
    for (int c : {a, b})
      if (c >= im.n && !im.keep[static_cast<size_t>(c)]) values[static_cast<size_t>(c)] = nullptr;
  }
  // A value that was not kept is recomputed from its subtree (kept values and operands) when a reverse step reads it.
  std::function<Tensor(int)> value_of = [&](int v) -> Tensor {
    if (values[static_cast<size_t>(v)]) return *values[static_cast<size_t>(v)];
    const size_t t = static_cast<size_t>(v - im.n);
    const Tensor pair[2] = {value_of(im.children[t].first), value_of(im.children[t].second)};
    return im.steps[t]->execute(pair, context);
  };
  const Tensor root_ct = cotangent.dtype() == im.dtype ? Tensor() : cotangent.astype(im.dtype);
  cts[static_cast<size_t>(im.root())] = root_ct.defined() ? &root_ct : &cotangent;
  std::vector<Tensor> grads(static_cast<size_t>(im.n));  // the slots' cotangents
  for (size_t i = 0; i < im.reverse.size(); ++i) {
    const ReverseStep& r = im.reverse[i];
    const Tensor* sibling = values[static_cast<size_t>(r.sibling)];
    Tensor recomputed;
    if (!sibling) {
      recomputed = value_of(r.sibling);
      sibling = &recomputed;
    }
    Tensor* out = nullptr;
    if (r.node < im.n) {
      grads[static_cast<size_t>(r.node)] = Tensor::empty(im.dtype, r.plan->output_shape(), allocator);
      out = &grads[static_cast<size_t>(r.node)];
    } else {
      out = &arena(im.ct_buffer[static_cast<size_t>(r.node)]);
    }
    const auto [x, y] = r.order(*cts[static_cast<size_t>(r.parent)], *sibling);
    run(*r.plan, x, y, r.ones, *out);
    cts[static_cast<size_t>(r.node)] = out;
    if (im.last_use[static_cast<size_t>(r.parent)] == static_cast<int>(i)) cts[static_cast<size_t>(r.parent)] = nullptr;
  }
  // The value first when asked for (the walk's values are conjugated when complex), then each slot's cotangent in
  // its operand's dtype: the real part for a real operand of a complex walk.
  std::vector<Tensor> out;
  out.reserve(im.slots.size() + 1);
  if (im.with_value) {
    if (is_complex(im.dtype)) value = kernels::unary(kernels::UnaryOp::conj, value, pool);
    out.push_back(value.dtype() == im.value_dtype ? std::move(value) : value.astype(im.value_dtype));
  }
  for (int k : im.slots) {
    Tensor g = std::move(grads[static_cast<size_t>(k)]);
    const DType want = im.operand_dtypes[static_cast<size_t>(k)];
    if (is_complex(g.dtype()) && !is_complex(want)) g = kernels::real_part(g);
    out.push_back(g.dtype() == want ? std::move(g) : g.astype(want));
  }
  return out;
}

std::vector<Tensor> EinsumVjpPlan::execute_tangent(std::span<const Tensor> operands, const Tensor& cotangent,
                                                   std::span<const Tensor> tangents, const Tensor& cotangent_tangent,
                                                   ExecutionContext& context, bool with_cotangents) const {
  const Impl& im = *impl_;
  ThreadPool* pool = &context.pool();
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n && static_cast<int>(tangents.size()) == im.n,
             "einsum vjp tangent: {} operands and {} tangents for a plan of {}", operands.size(), tangents.size(), im.n);
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  std::vector<Tensor> values(nodes), dvalues(nodes), cts(nodes), dcts(nodes);
  auto walk_input = [&](const Tensor& x, size_t i) {
    Tensor v = promoted_to(x, im.dtype);
    return is_complex(im.dtype) && im.complex_inputs[i] ? kernels::unary(kernels::UnaryOp::conj, v, pool) : v;
  };
  for (size_t i = 0; i < static_cast<size_t>(im.n); ++i) {
    values[i] = walk_input(operands[i], i);
    if (tangents[i].defined()) dvalues[i] = walk_input(tangents[i], i);
  }
  StepOperands ops;
  // Forward: every value below the root and its tangent dA.B + A.dB (all kept: the reverse steps read them).
  for (size_t t = 0; t + 1 < im.children.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    const auto [a, b] = im.children[t];
    const Tensor& va = values[static_cast<size_t>(a)];
    const Tensor& vb = values[static_cast<size_t>(b)];
    const Tensor& da = dvalues[static_cast<size_t>(a)];
    const Tensor& db = dvalues[static_cast<size_t>(b)];
    values[v] = im.steps[t]->execute(ops.of(va, vb), context);
    if (da.defined() && db.defined())
      dvalues[v] = two_terms(*im.steps[t], im.stacked_steps[t], da, vb, va, db, {}, ops, context);
    else if (da.defined()) dvalues[v] = im.steps[t]->execute(ops.of(da, vb), context);
    else if (db.defined()) dvalues[v] = im.steps[t]->execute(ops.of(va, db), context);
  }
  // Reverse: ct_child = P(ct_parent, V_sibling); its tangent P(dct_parent, V_sibling) + P(ct_parent, dV_sibling).
  cts[static_cast<size_t>(im.root())] = promoted_to(cotangent, im.dtype);
  if (cotangent_tangent.defined()) dcts[static_cast<size_t>(im.root())] = promoted_to(cotangent_tangent, im.dtype);
  for (const ReverseStep& r : im.reverse) {
    const size_t node = static_cast<size_t>(r.node), parent = static_cast<size_t>(r.parent),
                 sibling = static_cast<size_t>(r.sibling);
    // Each product in the plan's operand order (ReverseStep::order).
    auto run = [&](const Tensor& ct, const Tensor& value) {
      const auto [x, y] = r.order(ct, value);
      return r.plan->execute(ops.of(x, y, r.ones), context);
    };
    if (r.node >= im.n || with_cotangents) cts[node] = run(cts[parent], values[sibling]);
    if (dcts[parent].defined() && dvalues[sibling].defined()) {
      const auto [x0, y0] = r.order(dcts[parent], values[sibling]);
      const auto [x1, y1] = r.order(cts[parent], dvalues[sibling]);
      dcts[node] = two_terms(*r.plan, r.stacked, x0, y0, x1, y1, r.ones, ops, context);
    } else if (dcts[parent].defined()) {
      dcts[node] = run(dcts[parent], values[sibling]);
    } else if (dvalues[sibling].defined()) {
      dcts[node] = run(cts[parent], dvalues[sibling]);
    }
  }
  // The slots' cotangents first when asked for (mode vjp_with_jvp), then their tangents; each in its operand's dtype
  // (the real part for a real operand of a complex walk), as execute() gives them.
  std::vector<Tensor> out;
  out.reserve(2 * im.slots.size());
  auto give = [&](Tensor g, int k) {
    const DType want = im.operand_dtypes[static_cast<size_t>(k)];
    if (!g.defined()) {  // no tangent reaches this slot's cotangent
      out.push_back(Tensor::zeros(want, im.shapes[static_cast<size_t>(k)]));
      return;
    }
    if (is_complex(g.dtype()) && !is_complex(want)) g = kernels::real_part(g);
    out.push_back(g.dtype() == want ? std::move(g) : g.astype(want));
  };
  if (with_cotangents)
    for (int k : im.slots) give(std::move(cts[static_cast<size_t>(k)]), k);
  for (int k : im.slots) give(std::move(dcts[static_cast<size_t>(k)]), k);
  return out;
}

DType EinsumVjpPlan::dtype() const { return impl_->dtype; }
const std::vector<EinsumVjpPlan::ArenaTensor>& EinsumVjpPlan::arena_tensors() const { return impl_->arena_tensors; }
int64_t EinsumVjpPlan::arena_bytes() const { return impl_->arena_bytes; }
bool EinsumVjpPlan::with_value() const { return impl_->with_value; }
int64_t EinsumVjpPlan::kept_bytes() const { return impl_->kept; }
int EinsumVjpPlan::recomputed_count() const { return static_cast<int>(impl_->recomputed.size()); }

std::string EinsumVjpPlan::to_string() const {
  const Impl& im = *impl_;
  auto node = [&](int id) {
    return fmt::format("{} {}", id < im.n ? fmt::format("operand {}", id) : fmt::format("node {}", id),
                       quote_for_message(label_string(im.subs, im.labels[static_cast<size_t>(id)])));
  };
  std::string out = fmt::format("einsum {}vjp {} over operands [{}] dtype {}\n",
                                im.with_value ? "value (the forward phase runs to the root) and " : "",
                                quote_for_message(einsum::to_string(im.subs)), fmt::join(im.slots, ", "),
                                name(im.dtype));
  if (!im.forward.tree().steps().empty()) out += fmt::format("tree {}\n", im.forward.tree().to_string());
  std::vector<std::string> kept;
  for (size_t t = 0; t < im.steps.size(); ++t)
    if (im.keep[static_cast<size_t>(im.n) + t]) kept.push_back(node(im.n + static_cast<int>(t)));
  out += fmt::format("forward keeps {} ({}{}): {}\n", kept.size(), human_bytes(im.kept),
                     im.keep_limit < 0 ? std::string() : fmt::format(", limit {}", human_bytes(im.keep_limit)),
                     kept.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(kept, ", ")));
  if (!im.recomputed.empty()) {
    std::vector<std::string> names;
    for (int v : im.recomputed) names.push_back(node(v));
    out += fmt::format("recomputes {} when read (over the limit): {}\n", names.size(), fmt::join(names, ", "));
  }
  for (const ReverseStep& r : im.reverse) {
    // A cotangent laid out in another order than its node's value, and a step with the value as lhs, say so.
    std::vector<std::string> layout;
    if (!std::is_sorted(r.layout.perm.begin(), r.layout.perm.end()))
      layout.push_back(fmt::format("laid out {}", quote_for_message(label_string(
                                                      im.subs, im.ct_labels[static_cast<size_t>(r.node)]))));
    if (r.layout.sibling_first) layout.push_back("value first");
    out += fmt::format("reverse: ct {} = ct {} x {}{}{}{}\n", node(r.node), node(r.parent), node(r.sibling),
                       r.ones.empty() ? "" : fmt::format(" x {} ones", r.ones.size()),
                       r.stacked ? " (tangent terms stacked)" : "",
                       layout.empty() ? std::string() : fmt::format(" ({})", fmt::join(layout, ", ")));
  }
  return out;
}

// ---- jvp ----

struct EinsumJvpPlan::Impl {
  int n = 0;
  DType dtype = DType::f64;
  std::vector<int> slots;
  std::vector<int> tangent_of;  // per operand: its index among the tangents (-1: none)
  PlannedTree tree;             // pairs for every step, the root's included
  std::vector<std::optional<EinsumPlan>> stacked;  // per step: dA.B + A.dB as one contraction (stacked_terms_plan)
  std::vector<bool> has_tangent, needs_value;  // per node
};

EinsumJvpPlan EinsumJvpPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> operands,
                                     std::vector<int> slots, const EinsumOptions& options) {
  auto im = std::make_shared<Impl>();
  im->n = static_cast<int>(operands.size());
  if (im->n < 2)
    fail(ErrorKind::invalid_argument, "einsum jvp {}: the tree walk needs two or more operands but the einsum has "
         "{}; differentiate a one-operand einsum as the einsum of its tangent", quote_for_message(einsum::to_string(subscripts)), im->n);
  im->dtype = operands[0].dtype;
  for (const TensorMeta& m : operands) im->dtype = promote(im->dtype, m.dtype);
  std::vector<TensorMeta> promoted;
  for (const TensorMeta& m : operands) promoted.push_back(TensorMeta{im->dtype, m.shape});
  im->tree = plan_tree(subscripts, promoted, options, true);
  for (size_t t = 0; t < im->tree.children.size(); ++t) {
    const TensorMeta pair[2] = {{im->dtype, im->tree.shapes[static_cast<size_t>(im->tree.children[t].first)]},
                                {im->dtype, im->tree.shapes[static_cast<size_t>(im->tree.children[t].second)]}};
    im->stacked.push_back(stacked_terms_plan(*im->tree.pairs[t], pair, options.allow_broadcast));
  }
  im->slots = std::move(slots);
  im->tangent_of.assign(static_cast<size_t>(im->n), -1);
  for (size_t i = 0; i < im->slots.size(); ++i) im->tangent_of[static_cast<size_t>(im->slots[i])] = static_cast<int>(i);
  const size_t nodes = static_cast<size_t>(2 * im->n - 1);
  const auto& children = im->tree.children;
  im->has_tangent.assign(nodes, false);
  im->needs_value.assign(nodes, false);
  for (int k : im->slots) im->has_tangent[static_cast<size_t>(k)] = true;
  for (size_t t = 0; t < children.size(); ++t)
    im->has_tangent[static_cast<size_t>(im->n) + t] = im->has_tangent[static_cast<size_t>(children[t].first)] ||
                                                      im->has_tangent[static_cast<size_t>(children[t].second)];
  // A step's tangent dA.B + A.dB reads the value of a child whose sibling has a tangent; a value is computed from
  // its children's values.
  for (size_t t = children.size(); t-- > 0;) {
    const size_t v = static_cast<size_t>(im->n) + t, a = static_cast<size_t>(children[t].first),
                 b = static_cast<size_t>(children[t].second);
    if (im->has_tangent[v]) {
      if (im->has_tangent[b]) im->needs_value[a] = true;
      if (im->has_tangent[a]) im->needs_value[b] = true;
    }
    if (im->needs_value[v]) im->needs_value[a] = im->needs_value[b] = true;
  }
  EinsumJvpPlan plan;
  plan.impl_ = std::move(im);
  return plan;
}

Tensor EinsumJvpPlan::execute(std::span<const Tensor> operands, std::span<const Tensor> tangents,
                              ExecutionContext& context) const {
  const Impl& im = *impl_;
  EIN_ASSERT(static_cast<int>(operands.size()) == im.n && tangents.size() == im.slots.size(),
             "einsum jvp: {} operands and {} tangents for a plan of {} and {}", operands.size(), tangents.size(), im.n,
             im.slots.size());
  const size_t nodes = static_cast<size_t>(2 * im.n - 1);
  std::vector<Tensor> values(nodes), dvalues(nodes);
  for (int i = 0; i < im.n; ++i) {
    values[static_cast<size_t>(i)] = promoted_to(operands[static_cast<size_t>(i)], im.dtype);
    if (const int j = im.tangent_of[static_cast<size_t>(i)]; j >= 0)
      dvalues[static_cast<size_t>(i)] = promoted_to(tangents[static_cast<size_t>(j)], im.dtype);
  }
  StepOperands ops;
  // One pass up the tree: each node's value where read, and its tangent dA.B + A.dB by the step's own pair plan (a
  // child's value and tangent are read by its parent's step only, so both are released there).
  for (size_t t = 0; t < im.tree.children.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    const auto [a, b] = im.tree.children[t];
    const EinsumPlan& step = *im.tree.pairs[t];
    Tensor& va = values[static_cast<size_t>(a)];
    Tensor& vb = values[static_cast<size_t>(b)];
    if (im.needs_value[v]) values[v] = step.execute(ops.of(va, vb), context);
    if (im.has_tangent[v]) {
      Tensor& da = dvalues[static_cast<size_t>(a)];
      Tensor& db = dvalues[static_cast<size_t>(b)];
      if (da.defined() && db.defined()) dvalues[v] = two_terms(step, im.stacked[t], da, vb, va, db, {}, ops, context);
      else if (da.defined()) dvalues[v] = step.execute(ops.of(da, vb), context);
      else dvalues[v] = step.execute(ops.of(va, db), context);
    }
    va = vb = dvalues[static_cast<size_t>(a)] = dvalues[static_cast<size_t>(b)] = Tensor();
  }
  return dvalues.back();
}

std::string EinsumJvpPlan::to_string() const {
  const Impl& im = *impl_;
  std::string out = fmt::format("einsum jvp over operands [{}] dtype {}: tangents along the tree, dA.B + A.dB per "
                                "step\n", fmt::join(im.slots, ", "), name(im.dtype));
  if (!im.tree.forward.tree().steps().empty()) out += fmt::format("tree {}\n", im.tree.forward.tree().to_string());
  for (size_t t = 0; t < im.tree.children.size(); ++t) {
    const size_t v = static_cast<size_t>(im.n) + t;
    const auto [a, b] = im.tree.children[t];
    std::vector<std::string> parts;
    if (im.needs_value[v]) parts.push_back("value");
    if (im.has_tangent[v])
      parts.push_back(fmt::format("tangent = {}", im.has_tangent[static_cast<size_t>(a)] && im.has_tangent[static_cast<size_t>(b)]
                                                       ? (im.stacked[t] ? "dA.B + A.dB (stacked)" : "dA.B + A.dB")
                                                       : im.has_tangent[static_cast<size_t>(a)] ? "dA.B" : "A.dB"));
    out += fmt::format("step {} = ({}, {}): {}\n", v, a, b, parts.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(parts, ", ")));
  }
  return out;
}

}  // namespace einstage::einsum
