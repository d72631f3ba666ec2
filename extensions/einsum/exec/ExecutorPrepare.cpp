// EinsumPlan's prepare (see Executor.h): the subscripts bound to the shapes, the tree, one StepPlan per step, the
// intermediates laid out in one arena (first fit) with the one-sided sums' workspace beside it, and per binary step
// the fixed ContractionProblem and the stride terms a call fills in (StepExec, ExecutorImpl.h).
#include "extensions/einsum/exec/ExecutorImpl.h"

#include "extensions/einsum/exec/ArenaLayout.h"
#include "extensions/einsum/exec/CallScratch.h"
#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Notation.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/Quote.h"
#include "ir/Size.h"
#include "runtime/Context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <optional>

namespace einstage::einsum {

using namespace executor;

namespace {

std::vector<Label> first_occurrences(const std::vector<Label>& labels) {
  std::vector<Label> out;
  for (Label l : labels)
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  return out;
}

}  // namespace

void EinsumPlan::Impl::build(const BoundEinsum& bound, std::span<const TensorMeta> metas_in, const PlanSpec& spec,
                             const ContractionTree* given_tree) {
  subs = bound.subs;
  metas.assign(metas_in.begin(), metas_in.end());
  extents = bound.extents;
  output_shape = bound.output_shape;
  const int n = static_cast<int>(subs.inputs.size());
  if (n == 0) fail(ErrorKind::invalid_argument, "einsum: no operands; an einsum needs at least one operand");
  dtype = metas[0].dtype;
  for (const TensorMeta& m : metas) dtype = promote(dtype, m.dtype);
  for (int i = 0; i < n; ++i) nodes.push_back(Node{subs.inputs[i], metas[i].shape, i, -1});
  for (const TensorMeta& m : metas) zero_operand = zero_operand || element_count(m.shape) == 0;

  if (n == 1) {
    steps.push_back(make_unary_step(subs.inputs[0], metas[0].shape, subs.output, extents));
    build_exec();
    return;
  }
  const std::vector<Label> out_distinct = first_occurrences(subs.output);
  const bool explicit_order = spec.kind == PlanKind::path || spec.kind == PlanKind::tree;
  std::vector<std::vector<Label>> keep;
  if (!given_tree && n == 2 && !explicit_order && is_direct_dot_general(subs)) {
    shortcut = true;
    step_nodes.push_back({0, 1});
    keep.push_back(out_distinct);
  } else {
    tree = given_tree ? *given_tree : resolve(spec, subs, extents);
    const TreeCost cost = evaluate(subs, extents, tree);
    for (size_t k = 0; k < tree.steps().size(); ++k) {
      step_nodes.push_back(tree.steps()[k]);
      keep.push_back(k + 1 == tree.steps().size() ? out_distinct : cost.steps[k].result_labels);
    }
  }
  // Sizes of the scratch: every product and sum is checked, and an error names the einsum and the step.
  auto at_step = [&](size_t k, auto&& size) -> int64_t {
    try {
      return size();
    } catch (const Error& e) {
      fail(e.kind(), "einsum {}: step {}: {}", quote_for_message(einsum::to_string(subs)), k, e.what());
    }
  };
  FirstFit arena_fit;
  int64_t live = 0;
  for (size_t k = 0; k < step_nodes.size(); ++k) {
    const bool last = k + 1 == step_nodes.size();
    auto [a, b] = step_nodes[k];
    StepPlan s = make_binary_step(nodes[a].labels, nodes[a].shape, nodes[b].labels, nodes[b].shape, keep[k], extents,
                                  last ? &subs.output : nullptr);
    Node result{s.result, s.result_shape, -1, -1};
    lhs_ws.push_back(-1);
    rhs_ws.push_back(-1);
    if (zero_operand) {  // never run: no workspace, no arena
      nodes.push_back(std::move(result));
      steps.push_back(std::move(s));
      continue;
    }
    // Workspace for one-sided sums of this step: lhs first, then rhs.
    int64_t ws = 0;
    auto reserve_sum = [&](const StepOperand& op, int64_t& at) {
      if (op.summed.empty()) return;
      Shape red;
      for (Label l : op.reduced) red.push_back(extents.at(l));
      at = ws;
      ws = at_step(k, [&] {
        return checked_add(ws, checked_bytes(red, size_of(dtype), "the one-sided sum of shape"), "the workspace");
      });
    };
    reserve_sum(s.lhs, lhs_ws.back());
    reserve_sum(s.rhs, rhs_ws.back());
    workspace = std::max(workspace, ws);
    if (!last) {  // the result is allocated while both operands are live, then the operands are released
      const int64_t bytes =
          at_step(k, [&] { return checked_bytes(s.result_shape, size_of(dtype), "the result of shape"); });
      result.offset = at_step(k, [&] { return arena_fit.allocate(bytes, "the arena"); });
      live = at_step(k, [&] { return checked_add(live, bytes, "the live intermediates"); });
      if (bytes > largest_bytes) largest_step = static_cast<int>(k), largest_bytes = bytes;
      peak = std::max(peak, live);
    }
    for (int id : {a, b})
      if (nodes[id].offset >= 0) {  // sized when its step allocated it
        const int64_t bytes = checked_bytes(nodes[id].shape, size_of(dtype), "an intermediate of shape");
        arena_fit.release(nodes[id].offset, bytes);
        live -= bytes;
      }
    nodes.push_back(std::move(result));
    steps.push_back(std::move(s));
  }
  arena = arena_fit.end();
  (void)checked_add(arena, workspace, fmt::format("einsum {}: the scratch (arena + workspace bytes)",
                                                  quote_for_message(einsum::to_string(subs))));
  for (size_t k = 0; k < steps.size(); ++k) step_kernels.push_back(std::make_shared<StepKernel>());
  accumulate_kernel = std::make_shared<StepKernel>();
  build_exec();
}

namespace {

// A step operand's stride per distinct label, before the call's strides are known: a constant plus axes of a call
// tensor whose strides add up (a repeated label: the diagonal).
struct SymbolicStride {
  int64_t constant = 0;
  std::vector<std::pair<CallTensor, int>> axes;
};
using SymbolicView = std::map<Label, SymbolicStride>;

// Labels of `labels` with stride 0 on broadcast axes and the stored strides summed over repeats; `call` says whose
// strides (a call tensor) or gives the constant ones (an arena layout).
SymbolicView symbolic_view(const std::vector<Label>& labels, const std::vector<Label>& distinct,
                           const std::vector<bool>* broadcast, std::optional<CallTensor> call, const Strides& fixed) {
  SymbolicView v;
  for (size_t d = 0; d < distinct.size(); ++d) {
    SymbolicStride& s = v[distinct[d]];
    if (broadcast && (*broadcast)[d]) continue;
    for (size_t a = 0; a < labels.size(); ++a)
      if (labels[a] == distinct[d]) {
        if (call) s.axes.emplace_back(*call, static_cast<int>(a));
        else s.constant += fixed[a];
      }
  }
  return v;
}

}  // namespace

void EinsumPlan::Impl::build_exec() {
  const int n = static_cast<int>(metas.size());
  needs_convert.assign(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) needs_convert[i] = metas[i].dtype != dtype;
  any_convert = std::find(needs_convert.begin(), needs_convert.end(), 1) != needs_convert.end();
  repeated_output = subs.output.size() != first_occurrences(subs.output).size();
  if (n == 1) return;
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepPlan& s = steps[k];
    auto [a, b] = step_nodes[k];
    StepExec e;
    auto side = [&](int id, const StepOperand& op, bool summed_first, CallTensor who, int& input) {
      const Node& node = nodes[static_cast<size_t>(id)];
      if (node.input >= 0) input = node.input;
      if (summed_first) {  // the product reads the workspace: op.reduced, column-major
        Shape red;
        for (Label l : op.reduced) red.push_back(extents.at(l));
        return symbolic_view(op.reduced, op.reduced, nullptr, std::nullopt, col_major_strides(red));
      }
      if (node.input >= 0) return symbolic_view(op.labels, op.distinct, &op.broadcast, who, {});
      return symbolic_view(op.labels, op.distinct, &op.broadcast, std::nullopt, col_major_strides(node.shape));
    };
    const SymbolicView lv = side(a, s.lhs, lhs_ws[k] >= 0, CallTensor::lhs, e.lhs_input);
    const SymbolicView rv = side(b, s.rhs, rhs_ws[k] >= 0, CallTensor::rhs, e.rhs_input);
    e.lhs_at = nodes[static_cast<size_t>(a)].offset;
    e.rhs_at = nodes[static_cast<size_t>(b)].offset;
    e.lhs_ws = lhs_ws[k];
    e.rhs_ws = rhs_ws[k];
    e.kernel = step_kernels[k].get();
    const SymbolicView dv = s.final ? symbolic_view(s.output, s.output_distinct, nullptr, CallTensor::out, {})
                                    : symbolic_view(s.result, s.result, nullptr, std::nullopt,
                                                    col_major_strides(s.result_shape));
    if (!s.final) e.dst_offset = nodes[static_cast<size_t>(n) + k].offset;
    e.problem.dtype = dtype;
    using Axis = ContractionProblem::Axis;
    const SymbolicView* views[3] = {&lv, &rv, &dv};
    const uint32_t fields[3] = {offsetof(Axis, stride_a), offsetof(Axis, stride_b), offsetof(Axis, stride_c)};
    int64_t Axis::*members[3] = {&Axis::stride_a, &Axis::stride_b, &Axis::stride_c};
    auto add_axes = [&](uint8_t group, std::vector<Axis>& axes, const std::vector<Label>& labels,
                        std::initializer_list<int> present) {
      for (Label l : labels) {
        Axis axis;
        axis.extent = extents.at(l);
        const int index = static_cast<int>(axes.size());
        for (int w : present) {
          const SymbolicStride& st = views[w]->at(l);
          axis.*members[w] = st.constant;
          EIN_ASSERT(st.axes.empty() || st.constant == 0, "einsum step {}: a stride of a call tensor with a constant part", k);
          for (size_t t = 0; t < st.axes.size(); ++t)
            e.terms.push_back(StrideTerm{group, st.axes[t].first, t == 0,
                                         static_cast<uint32_t>(index * sizeof(Axis) + fields[w]),
                                         st.axes[t].second});
        }
        axes.push_back(axis);
      }
    };
    add_axes(0, e.problem.m, s.lhs_free, {0, 2});
    add_axes(1, e.problem.n, s.rhs_free, {1, 2});
    add_axes(2, e.problem.k, s.contracted, {0, 1});
    add_axes(3, e.problem.batch, s.batch, {0, 1, 2});
    e.id = next_plan_identity();
    e.live = e.problem;
    exec.push_back(std::move(e));
  }
}

EinsumPlan EinsumPlan::prepare(std::string_view text, std::span<const TensorMeta> metas, const EinsumOptions& options) {
  const Notation notation = parse_notation(text, metas.size());
  const std::vector<Shape> shapes = shapes_of(metas);
  const BoundEinsum bound = bind_einsum(notation, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  if (notation.nested && notation.num_inputs() >= 2) {
    if (options.plan.kind != PlanKind::automatic)
      fail(ErrorKind::invalid_argument,
           "einsum: {} fixes the contraction order with parentheses, and plan {} was passed too; use one of them",
           quote_for_message(notation.text), options.plan.to_string());
    ContractionTree tree(static_cast<int>(notation.num_inputs()), notation.order);
    impl->build(bound, metas, options.plan, &tree);
  } else {
    impl->build(bound, metas, options.plan, nullptr);
  }
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

EinsumPlan EinsumPlan::prepare(const Subscripts& subscripts, std::span<const TensorMeta> metas,
                               const EinsumOptions& options) {
  const std::vector<Shape> shapes = shapes_of(metas);
  const BoundEinsum bound = bind_einsum(subscripts, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  impl->build(bound, metas, options.plan, nullptr);
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

EinsumPlan EinsumPlan::prepare_grouped(std::string_view text, std::span<const TensorMeta> metas,
                                       std::span<const GroupLength> lengths, const EinsumOptions& options) {
  const std::vector<Shape> shapes = shapes_of(metas);
  std::vector<int64_t> ranks;
  for (const Shape& s : shapes) ranks.push_back(static_cast<int64_t>(s.size()));
  const auto expansion =
      grouped_cache(options.context ? *options.context : default_context())->expand(text, ranks, lengths);
  const BoundEinsum bound = bind_einsum(expansion->expanded, shapes, options.allow_broadcast);
  auto impl = std::make_shared<Impl>();
  if (bound.subs.inputs.size() >= 2) {
    // The order is planned on the grouped form (one symbol per group) and applied to the expansion.
    ContractionTree tree = resolve_grouped(options.plan, expansion->notation->symbolic, expansion->symbol_labels,
                                           expansion->expanded, bound.extents);
    impl->build(bound, metas, options.plan, &tree);
  } else {
    impl->build(bound, metas, options.plan, nullptr);
  }
  EinsumPlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

}  // namespace einstage::einsum
