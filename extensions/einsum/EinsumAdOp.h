// The family `einstage.einsum_ad.v1`: the derivative forms of an N-ary einsum that einsum's AD rules emit so that the
// runtime can differentiate along the forward's planned contraction tree instead of as N independent einsums.
// Compiler side (payload, type rule, AD rules, registration); the runtime half is TreeAd.h. Depends on ir,
// EinsumOp.h and EinsumAd.h; not on compiler/ or runtime/.
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
// vjp's linearize rule gives each result the tangent of the reverse einsum it equals (EinsumAd.h, einsum_cotangent),
// so higher derivatives are exact: grad of grad and HVPs go through ordinary einsums and mode jvp there. vjp has no
// transpose rule (it never occurs in a linearized program). Lowering: jvp is the sum of the lowered einsums, vjp
// each slot's lowered reverse einsum.
//
// Text form (attributes sorted by key):
//   %3, %4, %5 = einstage.einsum_ad.v1(%a, %b, %c, %ct) {broadcast = false, mode = vjp, plan = auto,
//        slots = [0, 1, 2], subscripts = "ij,jk,kl->il"} : f64[...], f64[...], f64[...]
#pragma once

#include "extensions/einsum/EinsumOp.h"

#include <string_view>
#include <vector>

namespace einstage::einsum {

inline constexpr std::string_view kEinsumAdFamily = "einstage.einsum_ad.v1";

enum class EinsumAdMode : uint8_t { jvp, vjp };

class EinsumAdPayload final : public ExtensionPayload {
 public:
  /// `slots`: distinct operand indices, ascending.
  EinsumAdPayload(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots);

  const EinsumPayload& forward() const { return forward_; }
  EinsumAdMode mode() const { return mode_; }
  const std::vector<int>& slots() const { return slots_; }

  std::string_view family() const override { return kEinsumAdFamily; }
  std::string to_text() const override;
  std::string to_json() const override;
  uint64_t hash() const override;
  bool equals(const ExtensionPayload& other) const override;
  std::unique_ptr<ExtensionPayload> clone() const override;

  static std::unique_ptr<EinsumAdPayload> parse_text(std::string_view attr_text);
  static std::unique_ptr<EinsumAdPayload> parse_json(std::string_view json_text);

 private:
  EinsumPayload forward_;
  EinsumAdMode mode_;
  std::vector<int> slots_;
  uint64_t hash_ = 0;  // of to_text(), computed once (the runtime's prepared-op cache asks on every run)
};

std::string_view mode_name(EinsumAdMode mode);

/// Registers `einstage.einsum_ad.v1` (payload readers, type rule, linearize and transpose rules) in `registry`.
/// register_einsum_semantics calls it after registering the einsum family.
void register_einsum_ad_semantics(ExtensionRegistry& registry);

}  // namespace einstage::einsum
