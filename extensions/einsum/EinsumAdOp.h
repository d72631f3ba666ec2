// The family `einstage.einsum_ad.v1`: the derivative forms of an N-ary einsum that einsum's AD rules emit so that the
// runtime can differentiate along the forward's planned contraction tree instead of as N independent einsums.
// Compiler side (payload, type rule, AD rules, registration); the runtime half is TreeAd.h. Depends on ir,
// EinsumOp.h and EinsumAd.h; not on compiler/ or runtime/.
//
// The payload is the forward einsum's (subscripts, plan spec, broadcast bit) plus a mode and the operand slots it
// concerns. Three modes, all planned at first run from the forward's subscripts, shapes and plan spec (the same
// tree the forward einsum gets, since planning is deterministic):
//
//   jvp       (%x0, ..., %x{n-1}, %t_k for k in slots) -> the forward's type
//             sum over k in slots of the einsum with operand k replaced by its tangent t_k: einsum's linearize
//             when two or more operands of an einsum of three or more have tangents. Linear in the tangents
//             jointly, so its transpose sees every linear operand at once.
//   vjp       (%x0, ..., %x{n-1}, %ct) -> D[P]
//             every slot's cotangent (einsum's transpose rule with respect to that operand, adjoint for the real
//             inner product), computed by one reverse walk of the tree, packed column-major one after the other in
//             slot order; D is the promoted dtype of the operands and the cotangent, P the slots' element count
//             (so the operand dims must be constants; with symbolic dims the transpose emits reverse einsums).
//   vjp_part  (%packed, %x0, ..., %x{n-1}, %ct) {part = k} -> x_k's type
//             slot k's cotangent read from a `vjp` result of the same operands (real part when x_k is real, then
//             converted to x_k's dtype).
//
// An instruction has one result, so the reverse pass is the pair vjp + vjp_part, and the pair's derivative lives on
// the part: vjp_part's linearize rule differentiates the cotangent as the reverse einsums it equals (EinsumAd.h,
// einsum_cotangent), and vjp's rule gives the packed value no tangent of its own. The packed value is read by
// vjp_part only. Higher derivatives are therefore exact: grad of grad and HVPs go through ordinary einsums there.
// vjp and vjp_part have no transpose rule (they never occur in a linearized program). Lowering: jvp is the sum of
// the lowered einsums, vjp_part its slot's lowered reverse einsum, and vjp a placeholder only vjp_part's lowering
// receives (compiler/Lower.h).
//
// Text form (attributes sorted by key):
//   %3 = einstage.einsum_ad.v1(%a, %b, %c, %ct) {broadcast = false, mode = vjp, plan = auto, slots = [0, 1, 2],
//        subscripts = "ij,jk,kl->il"} : f64[...]
#pragma once

#include "extensions/einsum/EinsumOp.h"

#include <string_view>
#include <vector>

namespace einstage::einsum {

inline constexpr std::string_view kEinsumAdFamily = "einstage.einsum_ad.v1";

enum class EinsumAdMode : uint8_t { jvp, vjp, vjp_part };

class EinsumAdPayload final : public ExtensionPayload {
 public:
  /// `slots`: distinct operand indices, ascending. `part`: for vjp_part, one of `slots`; -1 otherwise.
  EinsumAdPayload(EinsumPayload forward, EinsumAdMode mode, std::vector<int> slots, int part = -1);

  const EinsumPayload& forward() const { return forward_; }
  EinsumAdMode mode() const { return mode_; }
  const std::vector<int>& slots() const { return slots_; }
  int part() const { return part_; }

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
  int part_ = -1;
  uint64_t hash_ = 0;  // of to_text(), computed once (the runtime's prepared-op cache asks on every run)
};

std::string_view mode_name(EinsumAdMode mode);

/// Elements of a vjp's packed result: the slots' operands' element counts summed (their dims must be constants).
int64_t packed_vjp_elements(const std::vector<int>& slots, Types operands);

/// Registers `einstage.einsum_ad.v1` (payload readers, type rule, linearize and transpose rules) in `registry`.
/// register_einsum_semantics calls it after registering the einsum family.
void register_einsum_ad_semantics(ExtensionRegistry& registry);

}  // namespace einstage::einsum
