// The rules of the family `einstage.einsum_ad.v1` (EinsumAdOp.h): linearize and transpose of each mode, which emit
// einsums and further einsum_ad instructions through einsum's own AD rules (EinsumAd.h), and the lowering to
// standard ops, which replays einsum's (Lowering.h). Semantics.cpp puts them into the family's ExtensionSemantics.
// Stage: compiler side of the einsum extension; depends on ir, EinsumAdOp.h, EinsumAd.h and Lowering.h; not on
// compiler/ or runtime/.
#pragma once

#include "extensions/einsum/op/EinsumAdOp.h"
#include "ir/Program.h"

#include <optional>
#include <span>
#include <vector>

namespace einstage::einsum {

/// The tangents of the instruction's results given its operands' tangents (nullopt: zero): jvp's is jvp over the
/// tangents' tangents plus each slot's einsum tangent; vjp's and vjp_jvp's as EinsumAdOp.h says; value_vjp is
/// einsum's for the value and vjp's for the rest; vjp_with_jvp vjp's for the first half and vjp_jvp's for the second.
std::vector<std::optional<Value>> linearize_einsum_ad(Builder& b, const EinsumAdPayload& payload,
                                                      std::span<const Value> primals,
                                                      std::span<const std::optional<Value>> tangents);

/// The cotangents of the linear operands given the results' cotangents: modes jvp and vjp_jvp; the other modes are
/// the reverse pass itself and fail (ErrorKind::unsupported) naming the mode.
std::vector<std::optional<Value>> transpose_einsum_ad(Builder& b, const EinsumAdPayload& payload,
                                                      std::span<const Value> operands, std::span<const bool> linear,
                                                      std::span<const std::optional<Value>> cts);

/// The instruction as standard ops: jvp is the sum of the lowered einsums with each tangent in place; vjp and
/// vjp_jvp each slot's lowered reverse einsum (vjp_jvp's with each tangent in place, summed); value_vjp the lowered
/// einsum then vjp's; vjp_with_jvp vjp's then vjp_jvp's.
std::vector<Value> lower_einsum_ad(Builder& b, const EinsumAdPayload& payload, std::span<const Value> operands);

}  // namespace einstage::einsum
