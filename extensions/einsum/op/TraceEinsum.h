// Tracing einsum: the calls that append one `einstage.einsum.v1` instruction to a TraceContext. Stage: compiler
// front end, provided by the einsum extension (tools -> extensions -> compiler), so compiler/ itself knows no family.
//
//   TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
//   TracedTensor z = einsum::einsum(ctx, "(ij,jk),kl->il", {a, b, c});          // order fixed: tree plan spec
//   TracedTensor u = einsum::einsum(ctx, make_subscripts({{0, 1}, {1, 2}}, {0, 2}), {x, w});
//   TracedTensor v = einsum::einsum_grouped(ctx, "WCa,Caib->WCb", {p, q});
//
// Each call parses the notation once (Notation.h / Grouped.h; `...` and group lengths need only the operand ranks,
// which tracing knows even for symbolic dims) and appends ONE extension op whose payload is the integer subscripts,
// the plan spec (a nested string's parentheses become an explicit `tree[...]` spec), the broadcast bit and the
// optional output-shape hint. No tree is stored. The op's type rule (EinsumOp.h) checks the shapes right away.
// The context's registry must have the family registered (register_einsum_semantics). Depends on compiler/Trace.h
// and the einsum headers.
#pragma once

#include "compiler/Trace.h"
#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/notation/Grouped.h"

#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace einstage::einsum {

struct TraceEinsumOptions {
  PlanSpec plan;                                     // default auto; a nested string sets a tree spec itself
  bool allow_broadcast = false;                      // length-1 broadcasting of named labels (docs/behaviour.md §1.5)
  std::optional<std::vector<Dim>> output_shape;      // optional hint, unified with the inferred output dims
};

/// Plain, nested or `...` strings.
TracedTensor einsum(TraceContext& ctx, std::string_view subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
TracedTensor einsum(TraceContext& ctx, std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
/// The same without the context: the operands' own (compiler/Trace.h context_of; at least one operand, all from one
/// TraceContext), so a callable traced by einstage::trace needs no context argument.
TracedTensor einsum(std::string_view subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
TracedTensor einsum(std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
/// Integer labels (make_subscripts).
TracedTensor einsum(TraceContext& ctx, const Subscripts& subscripts, std::span<const TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
TracedTensor einsum(TraceContext& ctx, const Subscripts& subscripts, std::initializer_list<TracedTensor> operands,
                    const TraceEinsumOptions& options = {});
/// The grouped dialect; group lengths are solved from the operand ranks and `lengths`.
TracedTensor einsum_grouped(TraceContext& ctx, std::string_view subscripts, std::span<const TracedTensor> operands,
                            std::span<const GroupLength> lengths = {}, const TraceEinsumOptions& options = {});
TracedTensor einsum_grouped(TraceContext& ctx, std::string_view subscripts, std::initializer_list<TracedTensor> operands,
                            std::span<const GroupLength> lengths = {}, const TraceEinsumOptions& options = {});

}  // namespace einstage::einsum
