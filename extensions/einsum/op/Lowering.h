// Lowering of one `einstage.einsum.v1` instruction to standard ops (the family's `lower` rule). Stage: compiler
// pass support (called by compiler/Lower.h's lower_to_standard_ops through the registry).
//
// The lowering does not know any pairwise rule: it prepares the same EinsumPlan the executor runs (bind_einsum, the
// planner's resolve for the payload's PlanSpec, one StepPlan per step) for the operands' concrete shapes and emits
// one standard op per StepPlan action (extract_diag, broadcast_in_dim, reduce_sum, dot_general, mul, transpose,
// embed_diag), walking the steps in the plan's order. Operands whose dtype differs from the plan's promoted dtype
// get a convert first. The only translation of its own: a broadcast_in_dim action whose dims are not increasing
// (an outer product whose lhs has batch labels before free ones) becomes a transpose that sorts them, then the
// broadcast, because the IR's broadcast_in_dim takes increasing dims. Depends on ir, EinsumOp.h and Executor.h.
#pragma once

#include "extensions/einsum/op/EinsumOp.h"
#include "ir/Program.h"

#include <span>

namespace einstage::einsum {

/// Emits the standard ops computing `payload` on `operands` into `b` and returns the result. The operands' types
/// must be concrete (bind the symbolic dims first; errors name the operand and the symbol).
Value lower_einsum(Builder& b, const EinsumPayload& payload, std::span<const Value> operands);

}  // namespace einstage::einsum
