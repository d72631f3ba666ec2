// The AD rules of `einstage.einsum.v1`: linearize and transpose, registered into the family's ExtensionSemantics
// through the same public interface a third-party module uses (ExtensionRegistry::find_mutable). Stage: compiler
// side of the einsum extension; depends on ir (Builder, ExtensionSemantics), EinsumOp.h and the planner's PlanSpec;
// not on compiler/ or runtime/ (the transformations in compiler/ad find these rules in the registry).
//
// linearize: einsum is linear in each operand, so the tangent is the sum over operands with a tangent of the same
// einsum (same payload, same plan spec) with that operand replaced by its tangent; zero tangents are skipped. On
// the tree path (the default) an einsum of three or more operands of which two or more have tangents gets ONE
// `einstage.einsum_ad.v1` jvp instruction for that sum instead (EinsumAdOp.h), whose transpose computes every
// operand's cotangent in one reverse walk of the planned tree; the per-operand path keeps the sum of einsums (and
// so N independent reverse einsums in reverse mode), for comparison.
//
// transpose with respect to operand k (exactly one operand may be linear): one reverse einsum of the output
// cotangent (first) and the other operands (conjugated when complex) whose output labels are k's distinct labels
// that occur in the output or another operand, then
//   - labels only in k (summed in the forward einsum) are broadcast back (broadcast_in_dim);
//   - labels repeated in k are projected on the diagonal: the reverse einsum produces the diagonal once and
//     embed_diag places it (extract, then embed);
//   - THE FIX (docs/behaviour.md §5.6): an axis on which k has extent 1 while the label's extent is larger (permitted
//     length-1 broadcasting) is left out of the reverse einsum's output, which sums it, and comes back as a length-1
//     axis, so the cotangent has k's shape; symmetrically, a label on which the other operands broadcast (extent 1
//     there, k's extent larger) is broadcast back to k's extent. Broadcast-ness is read from the types: an axis
//     broadcasts when its dim is the constant 1 and the label's extent (the one shape rule, BindRule.h, over the
//     operand types) is not the constant 1. A symbolic extent is never taken for a broadcast 1 (the type rule made it
//     a constraint instead), and a symbolic extent that is 1 at run time makes the sum a no-op, so the static
//     decision is exact.
// The reverse einsum keeps the payload's broadcast bit and plan spec: auto/greedy/optimal/anneal/left_to_right stay
// as they are (planned when the reverse einsum first runs, for its own shapes); an explicit path or tree is
// rewritten for the new operand order (reverse_plan_spec).
#pragma once

#include "extensions/einsum/op/EinsumOp.h"
#include "extensions/einsum/planner/PlanSpec.h"
#include "ir/Extension.h"
#include "ir/Program.h"

#include <functional>
#include <optional>
#include <span>

namespace einstage::einsum {

/// Rewrites every einsum instruction of 3 or more operands into the pairwise einsums of its contraction tree (each
/// step's result keeps the labels the planner's evaluator keeps; the last step produces the einsum's output as
/// written), so that reverse mode reuses the forward intermediates as residuals instead of contracting all other
/// operands once per operand (docs/ad.md, "Gradient cost"). The tree comes from an explicit path or tree spec; for
/// the other kinds it is planned now (resolve) when every operand dim is a constant, which fixes the tree in the
/// program instead of planning when it first runs; an einsum with symbolic dims and a non-explicit spec is kept as
/// it is. Numerically the same contraction (the same tree the runtime would plan for these shapes with these specs).
Program split_einsums(const Program& program, const ExtensionRegistry* registry);

/// Shares the forward's intermediates with the reverse pass: every einsum instruction whose value does not feed the
/// cotangent of an `einstage.einsum_ad.v1` vjp of the same payload and operands becomes, with that vjp, one mode
/// value_vjp instruction (EinsumAdOp.h) that returns the value and the cotangents from one walk of the planned tree,
/// so the forward contractions run once instead of twice (the vjp's walk recomputes them otherwise). The readers of
/// the value move after it; the results have the same bits (the walk's forward steps are the forward's), but for the sign
/// of a zero imaginary part of a complex value (the walk computes conj(E(conj x))) and the rounding of the value
/// when real and complex operands are mixed (the walk promotes the real ones). An einsum
/// with `max_memory` (sliced) and a cotangent that depends on the value (e.g. the loss sum(y * y)) are left as they
/// are. For programs about to run (the public AD transformations apply it through merge_walks): differentiating the
/// result again works (value_vjp has a linearize rule), but no AD rule emits value_vjp itself.
Program merge_value_vjp(const Program& program, const ExtensionRegistry* registry);

/// Walks a Hessian-vector product's tree once: every `einstage.einsum_ad.v1` vjp and a later vjp_jvp of the same
/// payload, operands and cotangent (over some of its slots, and not reading its results) become one mode
/// vjp_with_jvp instruction (EinsumAdOp.h) that returns the cotangents and their tangents from the vjp_jvp walk,
/// which computes every node's cotangent anyway. The cotangents have the same bits; readers of them move after it.
/// The program jvp(grad(f)) has exactly such a pair per einsum of three or more operands. Like merge_value_vjp,
/// for programs about to run (merge_walks); differentiating the result again works (vjp_with_jvp has a linearize
/// rule).
Program merge_vjp_jvp(const Program& program, const ExtensionRegistry* registry);

/// merge_vjp_jvp, then merge_value_vjp: the `einstage.einsum_ad.v1` family's rewrite_derivative (ir/Extension.h),
/// so every program the public AD transformations return (ad::jvp, vjp, grad, value_and_grad) has its walks merged.
/// In that order because an HVP program jvp(vjp(f)) holds an einsum, its vjp and their vjp_jvp: the vjp goes into
/// the vjp_jvp's walk, which leaves the einsum's forward walk alone, cheaper than fusing it with the vjp instead.
/// A registry without the rewrite (rewrite_derivative cleared) gives the unmerged programs, for comparison.
Program merge_walks(const Program& program, const ExtensionRegistry* registry);

/// How reverse mode treats an einsum of three or more operands: `tree` (one reverse walk of the planned tree for all
/// operands, the default) or `per_operand` (one reverse einsum per operand, sharing nothing).
enum class EinsumAdPath : uint8_t { tree, per_operand };

/// Fills the linearize and transpose slots of the registered `einstage.einsum.v1` family (fails with not_found if
/// it is not registered yet; the tree path also needs `einstage.einsum_ad.v1`). register_einsum_semantics calls it
/// with the default; calling it again with another path switches the registry's rules.
void register_einsum_ad_rules(ExtensionRegistry& registry, EinsumAdPath path = EinsumAdPath::tree);

/// The tangent of einsum(`primals`) given their tangents (nullopt: zero): nullopt when none has one, the einsum with
/// the one tangent in place when one has, and for two or more either one einsum_ad jvp instruction (`path` tree and
/// three or more operands) or the sum of the einsums with each tangent in place.
std::optional<Value> einsum_tangent(Builder& b, const EinsumPayload& payload, std::span<const Value> primals,
                                    std::span<const std::optional<Value>> tangents, EinsumAdPath path);

/// Emits one einsum (an extension instruction, or its lowering to standard ops).
using EinsumEmitter = std::function<Value(Builder& b, const EinsumPayload& payload, std::vector<Value> operands)>;

/// The cotangent of operand k of einsum(`operands`) given the output cotangent `ct`, as one reverse einsum plus the
/// broadcast / diagonal / dtype fix-ups described above (adjoint for Re<a, b>). Only the types of operand k are read.
/// `emit` emits the reverse einsum (default: an einsum instruction).
Value einsum_cotangent(Builder& b, const EinsumPayload& payload, std::span<const Value> operands, size_t k,
                       const Value& ct, const EinsumEmitter& emit = {});

/// The plan spec of the reverse einsum for operand k of an n-operand einsum planned by `spec`. Operands of the
/// reverse einsum: the cotangent (id 0), then the other operands in their order. For path and tree specs the tree is
/// rewritten the way backpropagation walks it: every subtree off the path from the root to leaf k is contracted as
/// in the forward tree, and the cotangent meets them from the root down. Other kinds are returned unchanged.
PlanSpec reverse_plan_spec(const PlanSpec& spec, int num_operands, int k);

}  // namespace einstage::einsum
