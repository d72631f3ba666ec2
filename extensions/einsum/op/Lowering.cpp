// einsum -> standard ops, by replaying the executor's StepPlans (see Lowering.h).
#include "extensions/einsum/op/Lowering.h"

#include "extensions/einsum/exec/Executor.h"
#include "ir/Quote.h"

#include <algorithm>
#include <numeric>

namespace einstage::einsum {

namespace {

Axes axes_of(const std::vector<int>& v) { return Axes(v.begin(), v.end()); }

std::vector<Dim> dims_of(const Shape& shape) { return std::vector<Dim>(shape.begin(), shape.end()); }

// broadcast_in_dim with the action's dims, sorted first by a transpose when they are not increasing.
Value broadcast(Builder& b, Value x, const std::vector<int>& dims, const Shape& shape) {
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return dims[size_t(p)] < dims[size_t(q)]; });
  Axes sorted;
  for (int64_t p : order) sorted.push_back(dims[size_t(p)]);
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == int64_t(i);
  if (!identity) x = b.transpose(x, order);
  // Broadcasting a tensor to its own shape is the identity; no op needed.
  bool same = x.type.rank() == int(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = sorted[i] == int64_t(i) && x.type.dims[i] == Dim(shape[i]);
  if (same) return x;
  return b.broadcast_in_dim(x, std::move(sorted), dims_of(shape));
}

}  // namespace

Value lower_einsum(Builder& b, const EinsumPayload& payload, std::span<const Value> operands) {
  std::vector<TensorMeta> metas;
  for (size_t k = 0; k < operands.size(); ++k) {
    auto shape = operands[k].type.constant_shape();
    if (!shape)
      fail(ErrorKind::invalid_argument, "lowering einsum {}: operand {} has type {} with symbolic dims; "
           "lower_to_standard_ops needs a value for every symbol (pass them as bindings)",
           quote_for_message(payload.display()), k, operands[k].type.to_string());
    metas.push_back(TensorMeta{operands[k].type.dtype, std::move(*shape)});
  }
  EinsumOptions options;
  options.plan = payload.plan();
  options.allow_broadcast = payload.broadcast();
  // The same preparation the executor runs: bind, plan the tree, make the StepPlans.
  const EinsumPlan plan = EinsumPlan::prepare(payload.subscripts(), metas, options);

  std::vector<Value> nodes;  // tree ids: inputs, then one per step
  for (const Value& v : operands) nodes.push_back(v.type.dtype == plan.dtype() ? v : b.convert(v, plan.dtype()));
  std::vector<Step> pairs;
  if (operands.size() >= 2) {
    if (plan.is_shortcut())
      pairs.push_back({0, 1});
    else
      pairs = plan.tree().steps();
  }
  const auto& steps = plan.steps();
  EIN_ASSERT(steps.size() == std::max<size_t>(pairs.size(), 1), "einsum plan has {} steps for {} tree steps",
             steps.size(), pairs.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepPlan& s = steps[k];
    Value lhs = s.binary ? nodes[size_t(pairs[k].first)] : nodes[0];
    Value rhs = s.binary ? nodes[size_t(pairs[k].second)] : Value{};
    std::optional<Value> result;
    auto target = [&](StepSide side) -> Value& {
      if (side == StepSide::lhs) return lhs;
      if (side == StepSide::rhs) return rhs;
      if (!result) {
        EIN_ASSERT(!s.binary, "binary step acts on its result before the product");
        result = lhs;
      }
      return *result;
    };
    for (const StepAction& action : s.actions) {
      std::visit(
          [&](const auto& a) {
            using A = std::decay_t<decltype(a)>;
            if constexpr (std::is_same_v<A, ExtractDiagAction>) {
              Value& t = target(a.side);
              t = b.extract_diag(t, a.axis_a, a.axis_b);
            } else if constexpr (std::is_same_v<A, BroadcastInDimAction>) {
              Value& t = target(a.side);
              t = broadcast(b, t, a.dims, a.shape);
            } else if constexpr (std::is_same_v<A, ReduceSumAction>) {
              Value& t = target(a.side);
              t = b.reduce_sum(t, axes_of(a.axes));
            } else if constexpr (std::is_same_v<A, DotGeneralAction>) {
              result = b.dot_general(lhs, rhs, axes_of(a.lhs_contracting), axes_of(a.rhs_contracting),
                                     axes_of(a.lhs_batch), axes_of(a.rhs_batch));
            } else if constexpr (std::is_same_v<A, MulAction>) {
              result = b.mul(lhs, rhs);
            } else if constexpr (std::is_same_v<A, TransposeAction>) {
              Value& t = target(a.side);
              t = b.transpose(t, axes_of(a.perm));
            } else if constexpr (std::is_same_v<A, EmbedDiagAction>) {
              Value& t = target(a.side);
              t = b.embed_diag(t, a.axis_a, a.axis_b);
            }
          },
          action);
    }
    if (!result) {
      EIN_ASSERT(!s.binary, "binary step without a product");
      result = lhs;
    }
    nodes.push_back(*result);
  }
  return nodes.back();
}

}  // namespace einstage::einsum
