// The family `einstage.einsum_ad.v1`: the derivative forms of an N-ary einsum that einsum's AD rules emit so that the
// runtime can differentiate along the forward's planned contraction tree instead of as N independent einsums.
// Compiler side: the payload and the type rule here, the AD rules and lowering in EinsumAdRules.h, the registration
// in Semantics.h; the runtime half is TreeAd.h. Depends on ir and EinsumOp.h; not on compiler/ or runtime/.
//
// The payload is the forward einsum's (subscripts, plan spec, broadcast bit) plus a mode and the operand slots it
// concerns. Two modes, both planned at first run from the forward's subscripts, shapes and plan spec (the same
// tree the forward einsum gets, since planning is deterministic):
//
//   jvp       (%x0, ..., %x{n-1}, %t_k for k in slots) -> the forward's type
//             sum over k in slots of the einsum with operand k replaced by its tangent t_k: einsum's linearize
//             when two or more operands of an einsum of three or more have tangents. Linear in the tangents
//             jointly, so its transpose sees every linear operand at once.
//   vjp       (%x0, ..., %x{n-1}, %ct) -> one result per slot k, x_k's type
//             every slot's cotangent (einsum's transpose rule with respect to that operand, adjoint for the real
//             inner product; the real part for a real operand of a complex einsum), computed by one reverse walk of
//             the tree. Symbolic dims are fine: the walk is planned on the concrete shapes.
//
//   value_vjp (%x0, ..., %x{n-1}, %ct) -> the forward's type, then one result per slot k, x_k's type
//             the einsum's value and vjp's results from one walk: the forward phase runs up to the root, so the
//             intermediates the reverse steps read are the ones the value was computed from (kept under the same
//             limit, else recomputed). Never emitted by an AD rule: merge_value_vjp (EinsumAd.h) rewrites an einsum
//             and a vjp of the same operands into it when the cotangent does not depend on the einsum's value; the
//             family's rewrite_derivative (merge_walks) does so in every program the public AD transformations return.
//             Its linearize rule is einsum's for the value and vjp's for the rest; like vjp it has no transpose.
//
//   vjp_jvp   (%x0, ..., %x{n-1}, %ct, %d_i for i in tangents) -> one result per slot k, x_k's type
//             the tangent of vjp's results in the directions d_i (i < n: operand i's tangent, i = n: the
//             cotangent's), by one walk forward then backward along the tree (EinsumVjpPlan::execute_tangent):
//             vjp's linearize rule, so a Hessian-vector product (jvp of grad) costs about two value-and-gradient
//             walks instead of one tangent pass per operand over each reverse einsum.
//
//   vjp_with_jvp (%x0, ..., %x{n-1}, %ct, %d_i for i in tangents) -> one result per slot k (vjp's), then one per
//             slot k (vjp_jvp's), each x_k's type
//             vjp's results and vjp_jvp's from the one walk vjp_jvp makes (it computes every node's cotangent on
//             the way: the slots' are one more reverse step each), so a Hessian-vector product program (the
//             gradient and its tangent) walks the tree once instead of twice. The cotangents have vjp's bits.
//             Never emitted by an AD rule: merge_vjp_jvp (EinsumAd.h; run by merge_walks like merge_value_vjp)
//             rewrites a vjp and a vjp_jvp of the same operands and cotangent into it. Its linearize rule is vjp's for the first half and vjp_jvp's for the
//             second; like vjp it has no transpose.
//
// Higher derivatives stay exact and stay in the family: vjp_jvp is linear in its tangents jointly; its transpose
// gives the cotangent's tangent the cotangent of mode jvp over the slots, and operand j's tangent mode vjp_jvp with
// the roles of slots and tangents swapped (the mixed second derivative is symmetric); its linearize rule is vjp_jvp
// in the new directions plus, per tangent operand j, a vjp_jvp over the operands with x_j replaced by its tangent.
// vjp has no transpose rule (it never occurs in a linearized program). Lowering: jvp is the sum of the lowered
// einsums, vjp and vjp_jvp each slot's lowered reverse einsum (for vjp_jvp with each tangent in place, summed),
// value_vjp the lowered einsum and then vjp's lowering, vjp_with_jvp vjp's lowering and then vjp_jvp's.
//
// Text form (attributes sorted by key):
//   %3, %4, %5 = einstage.einsum_ad.v1(%a, %b, %c, %ct) {broadcast = false, mode = vjp, plan = auto,
//        slots = [0, 1, 2], subscripts = "ij,jk,kl->il"} : f64[...], f64[...], f64[...]
#pragma once

#include "extensions/einsum/op/EinsumOp.h"

#include <string_view>
#include <vector>

namespace einstage::einsum {

inline constexpr std::string_view kEinsumAdFamily = "einstage.einsum_ad.v1";

enum class EinsumAdMode : uint8_t { jvp, vjp, vjp_jvp, value_vjp, vjp_with_jvp };

/// The attributes of one einsum_ad instruction; the payload is FamilyPayload<EinsumAdAttrs> (extensions/api/Family.h).
class EinsumAdAttrs {
 public:
  static constexpr std::string_view kFamily = kEinsumAdFamily;

  /// `slots`: distinct operand indices, ascending. `tangents` (modes vjp_jvp and vjp_with_jvp only, non-empty):
  /// distinct indices in [0, n], ascending, n standing for the cotangent.
  EinsumAdAttrs(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots, std::vector<int> tangents = {});

  const EinsumPayload& forward() const { return forward_; }
  EinsumAdMode mode() const { return mode_; }
  const std::vector<int>& slots() const { return slots_; }
  const std::vector<int>& tangents() const { return tangents_; }

  std::string to_text() const;
  std::string to_json() const;
  bool operator==(const EinsumAdAttrs& other) const;

  static EinsumAdAttrs parse_text(std::string_view attr_text);
  static EinsumAdAttrs parse_json(std::string_view json_text);

 private:
  EinsumPayload forward_;
  EinsumAdMode mode_;
  std::vector<int> slots_;
  std::vector<int> tangents_;
};

using EinsumAdPayload = FamilyPayload<EinsumAdAttrs>;

std::string_view mode_name(EinsumAdMode mode);

/// The result types of an einsum_ad instruction: the forward's type rule (infer_einsum_type) on the primal operands,
/// each tangent unified with its operand's (or the cotangent's) type, the cotangent with the forward's output; then
/// the forward's type (jvp; value_vjp first) and each slot's operand type (vjp, vjp_jvp; twice for vjp_with_jvp).
std::vector<TensorType> infer_einsum_ad_types(const EinsumAdPayload& payload, Types operands, TypeContext& ctx);

}  // namespace einstage::einsum
