#include "extensions/einsum/op/TraceEinsum.h"

#include "extensions/einsum/exec/Einsum.h"
#include "extensions/einsum/notation/Notation.h"
#include "ir/Quote.h"
#include "runtime/Context.h"

namespace einstage::einsum {

namespace {

std::vector<int64_t> ranks_of(std::span<const TracedTensor> operands) {
  std::vector<int64_t> ranks;
  for (const TracedTensor& t : operands) ranks.push_back(t.rank());
  return ranks;
}

TracedTensor append(TraceContext& ctx, Subscripts subs, PlanSpec plan, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  auto payload = std::make_shared<EinsumPayload>(std::move(subs), std::move(plan), options.allow_broadcast,
                                                 options.output_shape);
  return ctx.extension(std::move(payload), operands);
}

}  // namespace

TracedTensor einsum(TraceContext& ctx, std::string_view subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  const Notation notation = parse_notation(subscripts, operands.size());
  const std::vector<int64_t> ranks = ranks_of(operands);
  Subscripts subs = notation.has_ellipsis() ? expand(notation, ranks) : to_subscripts(notation);
  PlanSpec plan = options.plan;
  if (notation.nested && !notation.order.empty()) {
    if (options.plan.kind != PlanKind::automatic)
      fail(ErrorKind::invalid_argument,
           "einsum: {} fixes the contraction order with parentheses, and plan {} was passed too; use one of them",
           quote_for_message(notation.text), options.plan.to_string());
    plan = PlanSpec::tree_plan(notation.order);
  }
  return append(ctx, std::move(subs), std::move(plan), operands, options);
}

TracedTensor einsum(TraceContext& ctx, std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  return einsum(ctx, subscripts, std::span<const TracedTensor>(operands.begin(), operands.size()), options);
}

TracedTensor einsum(TraceContext& ctx, const Subscripts& subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  return append(ctx, subscripts, options.plan, operands, options);
}

TracedTensor einsum(std::string_view subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  return einsum(context_of(operands, "einsum"), subscripts, operands, options);
}

TracedTensor einsum(std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  return einsum(subscripts, std::span<const TracedTensor>(operands.begin(), operands.size()), options);
}

TracedTensor einsum(TraceContext& ctx, const Subscripts& subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options) {
  return einsum(ctx, subscripts, std::span<const TracedTensor>(operands.begin(), operands.size()), options);
}

TracedTensor einsum_grouped(TraceContext& ctx, std::string_view subscripts, std::span<const TracedTensor> operands,
                            std::span<const GroupLength> lengths, const TraceEinsumOptions& options) {
  const std::vector<int64_t> ranks = ranks_of(operands);
  // A trace has no execution context: it expands in default_context()'s cache.
  auto expansion = grouped_cache(default_context())->expand(subscripts, ranks, lengths);
  return append(ctx, expansion->expanded, options.plan, operands, options);
}

TracedTensor einsum_grouped(TraceContext& ctx, std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                            std::span<const GroupLength> lengths, const TraceEinsumOptions& options) {
  return einsum_grouped(ctx, subscripts, std::span<const TracedTensor>(operands.begin(), operands.size()), lengths,
                        options);
}

}  // namespace einstage::einsum
